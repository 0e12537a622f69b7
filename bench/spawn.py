#!/usr/bin/env python3
"""What a short child process costs under strata: a Python parent starts N
children (`python -c ...`, one after another) and times, for each,

  start  from Popen() to the child's first statement (the interpreter's
         start, plus strata's: the agent's set-up and its helper's start),
  end    from the child's last statement to the parent's wait() returning
         (the interpreter's exit, plus strata's: the helper's last pass
         over the child's samples and the end of its profile),
  total  from Popen() to wait() returning,

without strata and with the parent (and so every child) under `strata
record`, in cpu and wall mode, for one or more builds of strata, the
configurations taking turns round by round so the machine's drift falls on
all alike. Prints p50 and p90 of each in ms (bench/RESULTS.md, "Short
child processes").

    bench/spawn.py [--python PY] [-n 200] [--rounds 4] [--strata PATH ...]
        [--modes cpu,wall]
"""
import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PARENT = r'''
import os, subprocess, sys, time
n, py = int(sys.argv[1]), sys.argv[2]
child = ("import os, sys, time; w = int(sys.argv[1]); "
         "os.write(w, repr(time.perf_counter()).encode()); os.close(w)")
for i in range(n):
    r, w = os.pipe()
    t0 = time.perf_counter()
    p = subprocess.Popen([py, "-c", child, str(w)], pass_fds=(w,))
    os.close(w)
    t_mid = float(os.read(r, 100))
    os.close(r)
    p.wait()
    t1 = time.perf_counter()
    print("%.6f %.6f %.6f" % ((t_mid - t0) * 1e3, (t1 - t_mid) * 1e3, (t1 - t0) * 1e3))
'''


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("-n", type=int, default=200, help="children per configuration (all rounds together)")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--strata", action="append", help="a strata binary (default: this tree's build)")
    ap.add_argument("--modes", default="cpu,wall")
    a = ap.parse_args()
    builds = a.strata or [str(ROOT / "build" / "bin" / "strata")]
    configs = [("plain", None, None)]
    for b in builds:
        for m in a.modes.split(","):
            configs.append(("%s %s" % (b if len(builds) > 1 else "strata", m), b, m))
    res = {c[0]: {"start": [], "end": [], "total": []} for c in configs}
    per = max(1, a.n // a.rounds)
    with tempfile.TemporaryDirectory() as tmp:
        prog = Path(tmp) / "parent.py"
        prog.write_text(PARENT)
        for _ in range(a.rounds):
            for name, b, mode in configs:
                cmd = [a.python, str(prog), str(per), a.python]
                if b:
                    cmd = [b, "record", "-q", "--mode", mode, "-o", os.path.join(tmp, "p.strata"), "--"] + cmd
                out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
                for line in out.splitlines():
                    s, e, t = map(float, line.split())
                    res[name]["start"].append(s)
                    res[name]["end"].append(e)
                    res[name]["total"].append(t)
    base = res["plain"]
    print("%d children per configuration, %s" % (per * a.rounds, a.python))
    print("| configuration | start p50 / p90 ms | end p50 / p90 ms | total p50 / p90 ms | total p50 - plain |")
    print("|---|---|---|---|---|")
    for name, _, _ in configs:
        r = res[name]
        row = " | ".join("%.2f / %.2f" % (pct(r[k], 0.5), pct(r[k], 0.9)) for k in ("start", "end", "total"))
        diff = "" if name == "plain" else "+%.2f" % (pct(r["total"], 0.5) - pct(base["total"], 0.5))
        print("| %s | %s | %s |" % (name, row, diff))


if __name__ == "__main__":
    sys.exit(main())
