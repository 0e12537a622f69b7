#!/usr/bin/env python3
"""Cost of allocation sampling: `strata record --objects` beside
tracemalloc and memray on the same allocation-heavy workload
(bench/workloads/allocs.py), as CPU time over a plain run's.

Runs are interleaved (plain, then each tool, repeated) so that whatever
else the 2-core machine does hits them alike; each tool's ratio is the
median of its per-round ratios to that round's plain run, with min and
max. CPU time is the process's user+system time from wait4(), plus the
strata helper's (this script is a child subreaper, as in overhead.py).

    scripts/benchenv.sh                       # memray into .venvs/3.11.x
    bench/objects.py --runs 5                 # python: that virtualenv's
    bench/objects.py --python /usr/bin/python3 --runs 5 --no-memray
    bench/objects.py --workload numpy --runs 5      # libc malloc from NumPy

Configurations: strata --objects at the default rate (512 KiB), at 64 KiB,
and --objects --native; strata without --objects for reference;
the hooks alone (a rate so high nothing is sampled), with CPU sampling
at 1000 Hz and at 1 Hz (what the hooks cost by themselves); tracemalloc
with 1 frame (-X tracemalloc=1, its cheapest); memray run (every
allocation, Python stacks: its default mode). --only NAME[,NAME...] keeps
the configurations whose name starts with one of those; --compare
STRATA adds the default --objects run with another strata build (an
older one), side by side in the same rounds.

    bench/objects.py --shares 4 [--compare STRATA]

Where the cost goes, counted within each run rather than timed across
runs (this VM's speed drifts by ±30% from one run to the next): each
configuration runs under `perf record -e cpu-clock` (a software event:
the VM has no hardware counters), and the report gives the share of
CPU samples in the interpreter (libpython), in strata's own code (the
agent, its helper, the per-version module) and in the kernel. The
interpreter's work is the same in every run, so plain share / profiled
share estimates the CPU ratio; it leaves out what strata costs the
interpreter's own code indirectly (caches), so it reads low, and a run
the host preempted shows a kernel spike (irqentry_exit_to_user_mode):
the median of the runs is given.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from overhead import STRATA, become_subreaper, reap_helpers  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
WORKLOADS = {
    # allocation-heavy pure Python: the cost the target is about
    "allocs": (ROOT / "bench" / "workloads" / "allocs.py", "20"),
    # libc malloc/free from NumPy's C code at its highest rate
    "numpy": (ROOT / "bench" / "workloads" / "numpy_small.py", "5"),
}
WORK = WORKLOADS["allocs"][0]


def cpu_of(cmd, env=None):
    p = subprocess.Popen([str(c) for c in cmd], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit("%s failed: %s" % (cmd, status))
    return ru.ru_utime + ru.ru_stime + reap_helpers()


def configs(py, n, tmp, memray, compare=None):
    w = [WORK, n]
    out = Path(tmp) / "o.strata"
    c = {
        "strata --objects (512 KiB)": [STRATA, "record", "-q", "-o", out, "--objects", "--", py] + w,
        "strata --objects-rate 65536": [STRATA, "record", "-q", "-o", out, "--objects-rate", "65536", "--", py] + w,
        "strata --objects --native": [STRATA, "record", "-q", "-o", out, "--objects", "--native", "--", py] + w,
        "strata --objects-rate 2^40 (hooks, no samples)": [STRATA, "record", "-q", "-o", out, "--objects-rate",
                                                           str(1 << 40), "--", py] + w,
        "strata --objects-rate 2^40 -F 1 (hooks alone)": [STRATA, "record", "-q", "-o", out, "-F", "1",
                                                          "--objects-rate", str(1 << 40), "--", py] + w,
        "strata -F 1 (agent, no hooks, for reference)": [STRATA, "record", "-q", "-o", out, "-F", "1", "--", py] + w,
        "strata (cpu only, for reference)": [STRATA, "record", "-q", "-o", out, "--", py] + w,
        "tracemalloc, 1 frame": [py, "-X", "tracemalloc=1"] + w,
    }
    if memray:
        c["memray run"] = [py, "-m", "memray", "run", "-q", "-f", "-o", Path(tmp) / "m.bin"] + w
    if compare:
        c["compared build: --objects (512 KiB)"] = [compare, "record", "-q", "-o", out, "--objects", "--", py] + w
        c["compared build: --objects-rate 2^40 -F 1"] = [compare, "record", "-q", "-o", out, "-F", "1",
                                                         "--objects-rate", str(1 << 40), "--", py] + w
    return c


def dso_shares(cmd, tmp):
    """{dso: percent of cpu-clock samples} for one run of cmd under perf."""
    data = Path(tmp) / "perf.data"
    subprocess.run(["perf", "record", "-q", "-e", "cpu-clock", "-F", "2000", "-o", str(data), "--"] +
                   [str(c) for c in cmd], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    rep = subprocess.run(["perf", "report", "-i", str(data), "--no-children", "--sort", "dso", "-q", "-g", "none",
                          "--stdio"], capture_output=True, text=True).stdout
    out = {}
    for line in rep.splitlines():
        f = line.split()
        if len(f) >= 2 and f[0].endswith("%"):
            out[f[1]] = float(f[0][:-1])
    return out


def shares(py, n, runs, compare):
    w = [WORK, n]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "o.strata"
        cfgs = {"plain": [py] + w,
                "strata --objects": [STRATA, "record", "-q", "-o", out, "--objects", "--", py] + w,
                "strata (cpu only)": [STRATA, "record", "-q", "-o", out, "--", py] + w}
        if compare:
            cfgs["compared build: --objects"] = [compare, "record", "-q", "-o", out, "--objects", "--", py] + w
        got = {k: [] for k in cfgs}
        for r in range(runs):
            for name, cmd in cfgs.items():
                got[name].append(dso_shares(cmd, tmp))
            print("round %d" % (r + 1), file=sys.stderr)
    med = statistics.median
    base = med([s.get(k, 0) for s in got["plain"] for k in s if k.startswith("libpython")] or [0])
    print("| configuration | libpython % | strata's own code % | kernel % | plain / profiled libpython share |")
    print("|---|---|---|---|---|")
    for name, ss in got.items():
        lp = med([sum(v for k, v in s.items() if k.startswith("libpython")) for s in ss])
        st = med([sum(v for k, v in s.items() if "strata" in k) for s in ss])
        kn = med([s.get("[kernel.kallsyms]", 0) for s in ss])
        print("| %s | %.1f | %.1f | %.1f | %.3f |" % (name, lp, st, kn, base / lp if lp else 0))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--python", default=None)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--workload", choices=sorted(WORKLOADS), default="allocs",
                    help="allocs (pure Python, the default) or numpy (libc malloc from NumPy)")
    ap.add_argument("--n", default=None, help="workload size (x100 000 iterations; allocs 20, numpy 5)")
    ap.add_argument("--no-memray", action="store_true")
    ap.add_argument("--only", default="", help="configurations whose name starts with one of these (comma list)")
    ap.add_argument("--compare", default=None, help="another strata executable to run --objects with")
    ap.add_argument("--shares", type=int, default=0, help="instead: N runs each under perf, CPU shares by object")
    a = ap.parse_args()
    global WORK
    WORK, default_n = WORKLOADS[a.workload]
    a.n = a.n or default_n
    py = a.python
    if not py:
        py = subprocess.run([str(ROOT / "scripts" / "benchenv.sh")], capture_output=True, text=True).stdout.strip()
        if not py:
            raise SystemExit("no benchmark virtualenv: run scripts/benchenv.sh")
    if a.shares:
        shares(py, a.n, a.shares, a.compare)
        return
    memray = not a.no_memray and subprocess.run([py, "-c", "import memray"], capture_output=True).returncode == 0
    become_subreaper()
    ratios, cpus, plain = {}, {}, []
    with tempfile.TemporaryDirectory() as tmp:
        cfgs = configs(py, a.n, tmp, memray, a.compare)
        if a.only:
            keep = [k.strip() for k in a.only.split(",") if k.strip()]
            cfgs = {k: v for k, v in cfgs.items() if any(k.startswith(x) for x in keep)}
        for r in range(a.runs):
            base = cpu_of([py, WORK, a.n])
            plain.append(base)
            for name, cmd in cfgs.items():
                cpu = cpu_of(cmd)
                cpus.setdefault(name, []).append(cpu)
                ratios.setdefault(name, []).append(cpu / base)
            print("round %d: plain %.2f s" % (r + 1, base), file=sys.stderr)
    ver = subprocess.run([py, "-c", "import sys; print(sys.version.split()[0])"], capture_output=True, text=True).stdout.strip()
    print("Python %s, workload %s %s, %d rounds, plain run median %.2f s CPU" % (
        ver, WORK.name, a.n, a.runs, statistics.median(plain)))
    print("| configuration | CPU time / plain (median, min-max) | min CPU / min plain |")
    print("|---|---|---|")
    for name, rs in ratios.items():
        print("| %s | %.3f (%.3f-%.3f) | %.3f |" % (name, statistics.median(rs), min(rs), max(rs),
                                                  min(cpus[name]) / min(plain)))


if __name__ == "__main__":
    main()
