#!/usr/bin/env python3
"""How long a thread's start takes under strata: N empty threading.Threads
started and joined one after another (2 ms apart), the time from
Thread() to join() returning, without strata and under `strata record`
in cpu and wall mode, side by side in one run. Prints p50, p90, p99 and
the maximum of each (bench/RESULTS.md, "Thread starts and the helper's
locks").

    bench/threadstart.py [--python PY] [-n 3000] [--busy 0]

--busy K runs K Python threads that compute meanwhile: their samples
keep the helper's writer busy (and their GIL switches dominate the
numbers).
"""
import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STRATA = ROOT / "build" / "bin" / "strata"

PROGRAM = r'''
import sys, threading, time
n, busy = int(sys.argv[1]), int(sys.argv[2])
stop = False
def spin():
    x = 0
    while not stop:
        for i in range(1000):
            x += i
bg = [threading.Thread(target=spin) for _ in range(busy)]
for t in bg:
    t.start()
lat = []
for i in range(n):
    t0 = time.perf_counter()
    t = threading.Thread(target=lambda: None)
    t.start()
    t.join()
    lat.append(time.perf_counter() - t0)
    time.sleep(0.002)
stop = True
for t in bg:
    t.join()
lat.sort()
print("p50=%.3f p90=%.3f p99=%.3f max=%.3f" % tuple(x * 1e3 for x in (lat[n // 2], lat[n * 9 // 10], lat[n * 99 // 100], lat[-1])))
'''


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("-n", type=int, default=3000)
    ap.add_argument("--busy", type=int, default=0)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        prog = os.path.join(d, "threads.py")
        with open(prog, "w") as f:
            f.write(PROGRAM)
        args = [a.python, prog, str(a.n), str(a.busy)]
        runs = [("without strata", args)]
        for mode in ("cpu", "wall"):
            runs.append(("record --mode %s" % mode,
                         [str(STRATA), "record", "-q", "--mode", mode, "-o", os.path.join(d, mode + ".strata"), "--"] + args))
        print("| run | ms: p50 | p90 | p99 | max |")
        for name, cmd in runs:
            r = subprocess.run(cmd, capture_output=True, text=True, check=True)
            vals = dict(w.split("=") for w in r.stdout.split())
            print("| %s | %s | %s | %s | %s |" % (name, vals["p50"], vals["p90"], vals["p99"], vals["max"]))


if __name__ == "__main__":
    main()
