#!/usr/bin/env python3
"""Overhead of profiling: the profiled run's CPU time over the unprofiled
run's, measured side by side in one run.

Each configuration is compared with a plain run of the same workload,
interleaved (plain, profiled, profiled, plain, ...) so that whatever else
the machine is doing hits both alike; the ratio reported is the median of
the per-pair ratios, with the min and max. CPU time is the target
process's own user+system time from wait4(), which counts every thread
including the agent's writer and its final flush. Bytes per sample is the
profile's size over its sample count.

    bench/overhead.py                      # default workload and configs
    bench/overhead.py --workload calls --runs 7 --config F=100 --config F=1000
    bench/overhead.py --python /root/.pyenv/versions/3.12.1/bin/python

A configuration is a comma-separated list of `strata record` options
without dashes: F=1000, mode=wall, native, paused, e=cpu-clock (several
events joined with '+': e=cpu-clock+page-faults), c=PERIOD ..., or agent
options (ncompile=0: build every unwind table at load, as before lazy
tables). `standby` runs the program with the agent preloaded in standby
(STRATA_AGENT=1, no output: what a service waiting to be attached to pays);
`paused` is an agent that records to a file with sampling stopped (strata
record --paused).

JIT (workload `numba`): `jitlines` is `strata record --jit-lines` (the
target runs with NUMBA_DEBUGINFO=1, so Numba emits line tables, which
changes the code it generates); `debuginfo` profiles nothing and only sets
NUMBA_DEBUGINFO=1, so its ratio is what the line tables cost the program
by themselves, with no profiler:

    bench/overhead.py --workload numba --runs 7 --config F=1000 --config jitlines --config debuginfo
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STRATA = ROOT / "build" / "bin" / "strata"
AGENT = ROOT / "build" / "lib" / "strata" / "libstrata-agent.so"
WORKLOADS = {
    "calls": (ROOT / "bench" / "workloads" / "calls.py", ["50"]),
    "numpy": (ROOT / "bench" / "workloads" / "numpy_sort_fft.py", ["40"]),
    "numba": (ROOT / "bench" / "workloads" / "numba_kernels.py", ["150"]),
}


# Agent options with no `strata record` flag (STRATA_OPTIONS only):
# ncompile=N samples in an object before its unwind table is built (0: at
# load), ndepth=N native frames per sample.
AGENT_ONLY = {"ncompile", "ndepth"}


def config_args(cfg):
    args = []
    for item in filter(None, cfg.split(",")):
        k, _, v = item.partition("=")
        if k in AGENT_ONLY or k == "debuginfo":
            continue
        if k == "jitlines":
            args.append("--jit-lines")
            continue
        flag = ("-" if len(k) == 1 else "--") + k
        if k == "e":
            v = v.replace("+", ",")
        args += [flag, v] if v else [flag]
    return args


def agent_env(cfg, out):
    """The environment `strata record` gives the target, for the options in cfg."""
    # Let strata itself compute it: it prints nothing for /bin/true but we
    # only need the file header it writes and the options string it would
    # pass. Recreate the latter here from the same options.
    opts = {"mode": "cpu", "rate": "1000", "depth": "512", "paused": "0"}
    extra = []
    for item in filter(None, cfg.split(",")):
        k, _, v = item.partition("=")
        if k == "F":
            opts["rate"] = v
        elif k in ("mode",):
            opts["mode"] = v
        elif k == "paused":
            opts["paused"] = "1"
        elif k == "native":
            opts["native"] = "1"
        elif k in ("standby", "debuginfo"):
            pass
        elif k == "jitlines":
            opts["jitlines"] = "1"
        elif k == "e":
            opts["events"] = v
        elif k == "c":
            opts["period"] = v
        else:
            extra.append(item)
    env = dict(os.environ)
    if opts.pop("jitlines", None):
        env["NUMBA_DEBUGINFO"] = "1"
    if "debuginfo" in cfg.split(","):
        env["NUMBA_DEBUGINFO"] = "1"  # the program alone, not profiled
        return env
    env["LD_PRELOAD"] = str(AGENT)
    if "standby" in cfg.split(","):
        env["STRATA_AGENT"] = "1"
        env.pop("STRATA_OUTPUT", None)
        opts.pop("paused")
        env["STRATA_OPTIONS"] = ",".join("%s=%s" % kv for kv in opts.items())
        return env
    env["STRATA_OUTPUT"] = str(out)
    env["STRATA_OPTIONS"] = ",".join("%s=%s" % kv for kv in opts.items()) + ("," + ",".join(extra) if extra else "")
    return env


def become_subreaper():
    """The agent's helper (strata-agentd) outlives the profiled process by
    a moment and is then reparented: as a child subreaper this script gets
    it, reaps it and counts its CPU time with the run's."""
    import ctypes
    PR_SET_CHILD_SUBREAPER = 36
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise SystemExit("prctl(PR_SET_CHILD_SUBREAPER) failed")


def reap_helpers():
    """CPU seconds of the helpers orphaned to us since the last call."""
    cpu = 0.0
    while True:
        try:
            _, _, ru = os.wait4(-1, 0)
        except ChildProcessError:
            return cpu
        cpu += ru.ru_utime + ru.ru_stime


def run_cpu(cmd, env=None):
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit("%s failed: %s" % (cmd, status))
    return ru.ru_utime + ru.ru_stime + reap_helpers()


def prepare(cfg, tmp):
    """The profiled run's environment and output file."""
    out = Path(tmp) / "bench.strata"
    if "standby" not in cfg.split(",") and "debuginfo" not in cfg.split(","):
        # `strata record -- /bin/true` creates the file (header and session)
        # and says no Python was seen; the target then appends to it like
        # any child.
        subprocess.run([str(STRATA), "record", "-q", "-o", str(out)] + config_args(cfg) + ["--", "/bin/true"],
                       capture_output=True)
    return agent_env(cfg, out), out


def finish(cfg, out):
    """Bytes written, samples, share of failed native unwinds."""
    if "standby" in cfg.split(",") or "debuginfo" in cfg.split(","):
        return 0, 0, float("nan")  # nothing is written
    rep = subprocess.run([str(STRATA), "report", "--json", str(out)], capture_output=True, text=True)
    if rep.returncode != 0:
        raise SystemExit("strata report failed: %s" % rep.stderr)
    data = json.loads(rep.stdout)
    samples = data["samples"]
    failed = float("nan")
    nat = data.get("native")
    if nat:
        # Share of samples whose native unwinding failed or was cut short.
        failed = (nat["failed"] + nat["truncated"]) / max(1, nat["samples"])
    return out.stat().st_size, samples, failed


def profiled(python, script, args, cfg, tmp):
    env, out = prepare(cfg, tmp)
    cpu = run_cpu([python, str(script)] + args, env=env)
    return (cpu,) + finish(cfg, out)


def side_by_side(python, script, args, cfg, tmp, profiled_first):
    """Both runs at once, one per core: whatever else the machine does
    hits them at the same moments."""
    env, out = prepare(cfg, tmp)
    cmd = [python, str(script)] + args
    if profiled_first:
        q = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL)
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    else:
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
        q = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL)
    cpu = {}
    for proc in (p, q):
        _, status, ru = os.wait4(proc.pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit("%s failed: %s" % (cmd, status))
        cpu[proc.pid] = ru.ru_utime + ru.ru_stime
    # Only the profiled run has a helper.
    cpu[q.pid] += reap_helpers()
    return (cpu[p.pid], cpu[q.pid]) + finish(cfg, out)


def main():
    become_subreaper()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--workload", default="calls", choices=sorted(WORKLOADS))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--config", action="append", help="strata options, e.g. F=1000 (repeatable)")
    ap.add_argument("--side-by-side", action="store_true",
                    help="run each pair at the same time (needs 2 free cores) instead of one after the other")
    a = ap.parse_args()
    configs = a.config or ["F=100", "F=1000"]
    script, args = WORKLOADS[a.workload]
    version = subprocess.run([a.python, "-c", "import platform; print(platform.python_version())"],
                             capture_output=True, text=True).stdout.strip()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for cfg in configs:
            ratios, plains, profs, bps, fails = [], [], [], [], []
            for i in range(a.runs):
                # Alternate which of the pair runs first, so a drift in
                # the machine's speed does not favour either side.
                if a.side_by_side:
                    plain, prof, size, samples, failed = side_by_side(a.python, script, args, cfg, tmp, i % 2)
                elif i % 2 == 0:
                    plain = run_cpu([a.python, str(script)] + args)
                    prof, size, samples, failed = profiled(a.python, script, args, cfg, tmp)
                else:
                    prof, size, samples, failed = profiled(a.python, script, args, cfg, tmp)
                    plain = run_cpu([a.python, str(script)] + args)
                fails.append(failed)
                plains.append(plain)
                profs.append(prof)
                ratios.append(prof / plain)
                if samples:
                    bps.append(size / samples)
            rows.append((cfg, statistics.median(ratios), min(ratios), max(ratios), statistics.median(plains),
                         statistics.median(profs), statistics.median(bps) if bps else float("nan"),
                         statistics.median(fails)))
    print("workload `%s`, Python %s, %d pairs per row%s\n" % (a.workload, version, a.runs,
                                                              ", side by side" if a.side_by_side else ""))
    print("| config | CPU ratio (median) | min | max | plain CPU s | profiled CPU s | bytes/sample "
          "| native unwind failed |")
    print("|---|---|---|---|---|---|---|---|")
    for cfg, med, lo, hi, pl, pr, b, f in rows:
        print("| %s | %.3f | %.3f | %.3f | %.2f | %.2f | %.1f | %s |" % (cfg, med, lo, hi, pl, pr, b,
                                                                   "-" if f != f else "%.2f%%" % (100 * f)))


if __name__ == "__main__":
    main()
