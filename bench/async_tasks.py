#!/usr/bin/env python3
"""The cost of sampling suspended asyncio tasks in wall mode (docs/async.md):
a program with N live tasks (each waiting on a sleep) and one task that
computes for a fixed amount of work, run unprofiled and under
`strata record --mode wall`, alternated. Reports the CPU time of the
whole run (the program, and with strata its helper: children included)
and the wall time, medians of --runs pairs.

    bench/async_tasks.py [--tasks 10000] [--runs 3] [--python python3]
"""
import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STRATA = os.path.join(ROOT, "build", "bin", "strata")

PROGRAM = r'''
import asyncio, sys
def burn(n):
    x = 0
    for i in range(n):
        x += i * i
    return x
async def idle():
    await asyncio.sleep(3600)
async def main(n):
    tasks = [asyncio.create_task(idle()) for _ in range(n)]
    await asyncio.sleep(0)
    for _ in range(400):
        burn(20000)
        await asyncio.sleep(0)
    for t in tasks:
        t.cancel()
asyncio.run(main(int(sys.argv[1])))
'''


def helper_cpu(seen):
    """CPU seconds of every strata-agentd process now (last value kept per pid)."""
    tick = os.sysconf("SC_CLK_TCK")
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % pid) as f:
                st = f.read()
        except OSError:
            continue
        if "(strata-agentd)" not in st:
            continue
        fields = st.rsplit(")", 1)[1].split()
        seen[pid] = (int(fields[11]) + int(fields[12])) / tick


def run(cmd):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seen = {}
    while p.poll() is None:
        helper_cpu(seen)
        time.sleep(0.05)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    # The helper is not a waited-for child of ours: its CPU time is read
    # from /proc while it runs (to within 50 ms of its end).
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall, sum(seen.values())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=10000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--rate", default="100")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        prog = os.path.join(d, "tasks.py")
        with open(prog, "w") as f:
            f.write(PROGRAM)
        base, prof = [], []
        for _ in range(a.runs):
            base.append(run([a.python, prog, str(a.tasks)]))
            prof.append(run([STRATA, "record", "-q", "--mode", "wall", "-F", a.rate, "-o", os.path.join(d, "p.strata"),
                             "--", a.python, prog, str(a.tasks)]))
        bc, bw = statistics.median(c for c, _, _ in base), statistics.median(w for _, w, _ in base)
        pc, pw = statistics.median(c for c, _, _ in prof), statistics.median(w for _, w, _ in prof)
        hc = statistics.median(h for _, _, h in prof)
        rep = subprocess.run([STRATA, "report", "--json", os.path.join(d, "p.strata")], capture_output=True, text=True)
        import json
        r = json.loads(rep.stdout)
        waiting = sum(t["waiting"] for t in r.get("tasks", []))
        print("%d tasks, %s Hz: unprofiled cpu %.2f s wall %.2f s; wall mode: program cpu %.2f s (x%.2f), "
              "helper cpu %.2f s (%.0f%% of a core), wall %.2f s (x%.2f); %d task rows, %d waiting samples (weighted)"
              % (a.tasks, a.rate, bc, bw, pc, pc / bc, hc, 100 * hc / pw, pw, pw / bw, len(r.get("tasks", [])), waiting))


if __name__ == "__main__":
    main()
