#!/usr/bin/env python3
"""How long a fork child waits before it runs: N children forked back to
back (bench/workloads/forkwait.py) each time fork() from the parent's
call to its return in the child, without strata and under `strata
record` (cpu mode, and --native), optionally beside BUSY busy loops (a
loaded machine: a joining child waits for the tree's helper to take it,
one child after another). Configurations take turns round by round.
Prints the median over rounds of each run's median and max, in ms
(bench/RESULTS.md, "One helper per process tree").

    bench/forkwait.py [--python PY] [--children 60 200] [--busy 0 4] [--rounds 5] [--strata PATH]
"""
import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORKLOAD = ROOT / "bench" / "workloads" / "forkwait.py"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--children", type=int, nargs="+", default=[60, 200])
    ap.add_argument("--busy", type=int, nargs="+", default=[0, 4])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--strata", default=str(ROOT / "build" / "bin" / "strata"))
    a = ap.parse_args()
    out = Path(tempfile.mkdtemp(prefix="strata-forkwait-")) / "f.strata"
    configs = [("alone", []),
               ("strata", [a.strata, "record", "-q", "-o", str(out), "--"]),
               ("strata --native", [a.strata, "record", "-q", "--native", "-o", str(out), "--"])]
    print("| busy loops | children | configuration | median ms | max ms |")
    print("|---|---|---|---|---|")
    for busy in a.busy:
        loops = [subprocess.Popen([a.python, "-c", "while 1: pass"]) for _ in range(busy)]
        try:
            for n in a.children:
                res = {name: ([], []) for name, _ in configs}
                for _ in range(a.rounds):
                    for name, pre in configs:
                        r = subprocess.run(pre + [a.python, str(WORKLOAD), str(n)], capture_output=True, text=True)
                        if r.returncode != 0:
                            sys.exit("%s failed: %s" % (name, r.stderr.strip()[-500:]))
                        w = r.stdout.split()
                        res[name][0].append(float(w[1]))
                        res[name][1].append(float(w[3]))
                for name, (med, mx) in res.items():
                    print("| %d | %d | %s | %.1f | %.1f |" % (busy, n, name, statistics.median(med), statistics.median(mx)))
        finally:
            for p in loops:
                p.kill()
                p.wait()


if __name__ == "__main__":
    main()
