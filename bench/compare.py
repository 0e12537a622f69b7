#!/usr/bin/env python3
"""strata beside py-spy and Austin: what each costs the machine in all.

Every tool runs the same workload at the same rate (1000 samples a
second), interleaved with plain runs (plain, strata, py-spy, austin, then
the next round in another order), so whatever else the machine does hits
them alike. A run's cost is the CPU time of everything it started: the
tool's own process, the profiled program and, for strata, its helper
(this script is a child subreaper, so the helper, orphaned when the
program ends, is reaped and counted here). What is reported per tool is
the median over rounds of (run's CPU / the round's plain run's CPU), with
min and max, and the median wall-time ratio; and how many samples the
tool wrote, per second of the program's CPU (a tool that drops samples
is cheap for the wrong reason).

    scripts/benchenv.sh                      # py-spy and Austin into .venvs/3.11.x
    bench/compare.py --rounds 9
    bench/compare.py --workload numpy --rounds 5

py-spy samples from outside with process_vm_readv (`record -r 1000
-f raw`); Austin too (`-i 1000`, its text output); strata's agent samples
inside the process (`record -F 1000`, cpu mode). Each tool's default mode
is the one compared: py-spy and Austin sample every thread whether it runs
or not (wall time), strata's cpu mode only running threads; the workloads
are single-threaded and busy, where the two are the same.
"""
import argparse
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from overhead import ROOT, STRATA, WORKLOADS, become_subreaper, reap_helpers  # noqa: E402


def run(cmd, env=None):
    """Wall seconds and the CPU seconds of cmd and every process it left
    to us (reaped until none is left)."""
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    err = p.stderr.read().decode(errors="replace")
    p.stderr.close()
    # Orphans (strata's helper) come to us: reaped, their CPU counted.
    cpu = ru.ru_utime + ru.ru_stime + reap_helpers()
    if p.returncode != 0:
        raise RunFailed("%s failed (%d): %s" % (" ".join(map(str, cmd)), p.returncode, err[-2000:]))
    return wall, cpu


class RunFailed(Exception):
    pass


def run_retrying(cmd, env, failures, tool):
    """Austin 3.6 now and then starts the program and then does not find
    the interpreter in it ("not a Python process", exit 32): such a run is
    made again (up to five times) and counted."""
    for attempt in range(5):
        try:
            return run(cmd, env)
        except RunFailed as e:
            failures[tool] = failures.get(tool, 0) + 1
            last = e
            time.sleep(0.5)
    raise SystemExit(str(last))


def samples_strata(path):
    out = subprocess.run([str(STRATA), "report", "--json", str(path)], capture_output=True, text=True, check=True)
    import json
    return json.loads(out.stdout)["samples"]


def samples_pyspy(path):
    # raw (collapsed) format: "stack count" per line.
    n = 0
    with open(path) as f:
        for line in f:
            head, _, cnt = line.rstrip("\n").rpartition(" ")
            if cnt.isdigit():
                n += int(cnt)
    return n


def samples_austin(path):
    # Austin 3's text output: one line per sample ("P<pid>;T<tid>;frames
    # metric"), between comment lines and its statistics.
    n = 0
    with open(path, errors="replace") as f:
        for line in f:
            if line.startswith("P") and ";" in line:
                n += 1
    return n


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", default="calls", choices=["calls", "numpy"])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--venv", help="the virtualenv holding py-spy and austin (default: scripts/benchenv.sh's)")
    a = ap.parse_args()
    if a.venv:
        py = str(Path(a.venv) / "bin" / "python")
    else:
        py = subprocess.run([str(ROOT / "scripts" / "benchenv.sh")], capture_output=True, text=True).stdout.strip()
        if not py:
            raise SystemExit("no benchmark virtualenv: run scripts/benchenv.sh")
        py = str(ROOT / py) if not os.path.isabs(py) else py
    bindir = Path(py).parent
    pyspy, austin = bindir / "py-spy", bindir / "austin"
    for t in (pyspy, austin, STRATA):
        if not os.access(str(t), os.X_OK):
            raise SystemExit("%s is missing (scripts/benchenv.sh, make)" % t)
    prog, args = WORKLOADS[a.workload]
    target = [py, str(prog)] + args
    work = Path("/tmp/strata-compare-%d" % os.getpid())
    work.mkdir()
    become_subreaper()
    env = {k: v for k, v in os.environ.items() if not k.startswith("STRATA_")}

    tools = {
        "strata": lambda o: [str(STRATA), "record", "-q", "-F", "1000", "-o", str(o), "--"] + target,
        "py-spy": lambda o: [str(pyspy), "record", "-r", "1000", "-f", "raw", "-o", str(o), "--"] + target,
        "austin": lambda o: [str(austin), "-i", "1000", "-o", str(o)] + target,
    }
    count = {"strata": samples_strata, "py-spy": samples_pyspy,
             "austin": samples_austin}
    res = {t: {"cpu": [], "wall": [], "rate": []} for t in tools}
    failures = {}
    for r in range(a.rounds):
        order = ["plain"] + list(tools)
        random.shuffle(order)
        got = {}
        for t in order:
            out = work / ("%s-%d.out" % (t, r))
            if t == "plain":
                got[t] = run(target, env) + (None,)
            else:
                wall, cpu = run_retrying(tools[t](out), env, failures, t)
                got[t] = (wall, cpu, out)
        pw, pc, _ = got["plain"]
        line = ["round %d: plain %.2f s" % (r + 1, pc)]
        for t in tools:
            wall, cpu, out = got[t]
            res[t]["cpu"].append(cpu / pc)
            res[t]["wall"].append(wall / pw)
            res[t]["rate"].append(count[t](out) / pc)
            line.append("%s %.3f" % (t, cpu / pc))
            out.unlink()
        print(", ".join(line), flush=True)
    work.rmdir()
    print("\n| tool | CPU ratio, median (min-max) | wall ratio, median | samples per CPU second |")
    print("|---|---|---|---|")
    for t in tools:
        c = res[t]["cpu"]
        print("| %s | %.3f (%.2f-%.2f) | %.3f | %.0f |" % (t, statistics.median(c), min(c), max(c),
                                                          statistics.median(res[t]["wall"]),
                                                          statistics.median(res[t]["rate"])))
    for t, n in sorted(failures.items()):
        print("%s: %d run(s) failed and were made again" % (t, n))


if __name__ == "__main__":
    main()
