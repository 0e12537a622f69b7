#!/usr/bin/env python3
"""How long a fork pool takes to start under strata: a `multiprocessing`
pool of N fork workers (bench/workloads/poolstart.py) times from Pool()
until every worker has answered a task, without strata and under `strata
record` (cpu mode, and with --native), for one or more builds of strata,
the configurations taking turns round by round so the machine's drift
falls on all alike. Each worker's start includes strata's part of a
fork: a state in the tree's region and joining its helper (or, for an
older build, a helper of its own). Prints the median, min and max in ms
(bench/RESULTS.md, "One helper per process tree").

    bench/poolstart.py [--python PY] [--workers 16 64] [--rounds 5] [--strata PATH ...]
"""
import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORKLOAD = ROOT / "bench" / "workloads" / "poolstart.py"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--workers", type=int, nargs="+", default=[16, 64])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--strata", action="append", default=[],
                    help="a strata CLI to measure (repeat to compare builds; default: this tree's)")
    a = ap.parse_args()
    builds = a.strata or [str(ROOT / "build" / "bin" / "strata")]
    out = Path(tempfile.mkdtemp(prefix="strata-poolstart-")) / "p.strata"
    for n in a.workers:
        configs = [("none", [])]
        for b in builds:
            name = "strata" if len(builds) == 1 else "strata (%s)" % b
            configs.append((name, [b, "record", "-q", "-o", str(out), "--"]))
            configs.append((name + " --native", [b, "record", "-q", "--native", "-o", str(out), "--"]))
        times = {name: [] for name, _ in configs}
        for _ in range(a.rounds):
            for name, pre in configs:
                r = subprocess.run(pre + [a.python, str(WORKLOAD), str(n)], capture_output=True, text=True)
                if r.returncode != 0:
                    sys.exit("%s failed: %s" % (name, r.stderr.strip()[-500:]))
                times[name].append(float(r.stdout.split()[-1]))
        print("| workers | configuration | median ms | min | max |")
        print("|---|---|---|---|---|")
        for name, v in times.items():
            print("| %d | %s | %.1f | %.1f | %.1f |" % (n, name, statistics.median(v), min(v), max(v)))


if __name__ == "__main__":
    main()
