#!/usr/bin/env python3
"""bench/signals.py — issue 27's matrix, measured: a signal sent to the
process (setitimer, alarm, kill SIGUSR1/SIGINT, a child's SIGCHLD) and the
main thread blocked in a call (pause, sleep, select, read, Event.wait,
Lock.acquire) while other threads run, without strata and under strata in
each mode, side by side: for each scenario the configurations run one
after the other (tests/func/programs/sigdeliver.py, ROUNDS rounds each).

    bench/signals.py [--python EXE] [--rounds N] [--alarm-rounds N]
        [--modes cpu,wall,...] [--sources ...] [--waits ...] [--threads ...]
        [--strata PATH] [--json OUT]

Prints a table: per scenario and configuration, the rounds that tested the
call (the signal came during it), those whose call was not cut short
(must be 0), and the latency from the signal to the call's end (median,
90th percentile, max, ms), with the difference of the medians to the run
without strata.
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
PROG = ROOT / "tests" / "func" / "programs" / "sigdeliver.py"
MODES = {"cpu": ["--mode", "cpu"], "wall": ["--mode", "wall"], "events": ["-e", "task-clock"],
         "native": ["--native"], "objects": ["--objects"], "paused": ["--paused"]}
FAILED = ("late", "returned", "rescued")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--alarm-rounds", type=int, default=20)
    ap.add_argument("--modes", default="cpu,wall")
    ap.add_argument("--sources", default="itimer,alarm,usr1,int,chld")
    ap.add_argument("--waits", default="pause,sleep,select,read,event,lock")
    ap.add_argument("--threads", default="0,1busy,8busy,1sleep,8sleep")
    ap.add_argument("--strata", default=str(ROOT / "build" / "bin" / "strata"))
    ap.add_argument("--json")
    a = ap.parse_args()
    configs = [("plain", None)] + [(m, MODES[m]) for m in a.modes.split(",")]
    results = []
    out = os.path.join(tempfile.mkdtemp(prefix="strata-signals-"), "p.strata")
    print("| scenario | config | tested | not cut short | starved | median ms | p90 ms | max ms | median - plain |")
    print("|---|---|---|---|---|---|---|---|---|")
    for src in a.sources.split(","):
        for wait in a.waits.split(","):
            for th in a.threads.split(","):
                sc = "%s:%s:%s" % (src, wait, th)
                prog = [a.python, str(PROG), str(a.rounds), "alarm=%d" % a.alarm_rounds, sc]
                base = None
                for name, opts in configs:
                    cmd = prog if opts is None else [a.strata, "record", "-q", "-o", out] + opts + ["--"] + prog
                    p = subprocess.run(cmd, capture_output=True, text=True)
                    rs = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
                    if p.returncode or not rs:
                        print("| %s | %s | failed to run: %s |" % (sc, name, p.stderr.strip()[-200:]), flush=True)
                        continue
                    r = rs[0]
                    r["config"] = name
                    results.append(r)
                    lat = sorted(r["lat_ms"]) or [float("nan")]
                    med = statistics.median(lat)
                    if name == "plain":
                        base = med
                    bad = sum(r["outcomes"].get(k, 0) for k in FAILED)
                    print("| %s | %s | %d | %d | %d | %.2f | %.2f | %.2f | %s |" % (
                        sc, name, r["outcomes"].get("interrupted", 0), bad, r["outcomes"].get("starved", 0), med,
                        lat[int(0.9 * (len(lat) - 1))], lat[-1],
                        "" if name == "plain" or base is None else "%+.2f" % (med - base)), flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(results))


if __name__ == "__main__":
    main()
