#!/usr/bin/env python3
"""The helper's own CPU time in a steady state, against what the program
has loaded: a Python program imports every top-level module of the
standard library it can (and NumPy, where present), or nothing, then
computes for -d seconds; it reads its helper's CPU time (utime + stime of
the strata-agentd serving it) and its own over that stretch. Builds
(--strata, several) and modes take turns round by round; prints the
median helper CPU as a share of the program's.

  bench/helper_cpu.py --strata OLD/build/bin/strata --strata build/bin/strata

What it measures is the helper's per-pass work that grows with the
program (its link map, sys.modules), not the samples' (a steady 1000 Hz
either way). bench/RESULTS.md, "The helper's CPU time and what is
loaded".
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROGRAM = r'''
import os, sys, time
sys.path = [p for p in sys.path if p not in ("", os.getcwd())]
if sys.argv[1] == "many":
    skip = ("asyncio", "test", "idlelib", "tkinter", "turtle", "turtledemo", "antigravity", "this",
            "lib2to3", "ensurepip", "venv", "pydoc_data", "xxsubtype", "__main__")
    names = sorted(getattr(sys, "stdlib_module_names", ())) + ["numpy"]
    for name in names:
        if name.startswith("_") or name in skip:
            continue
        try:
            __import__(name)
        except BaseException:
            pass
    sys.modules.pop("asyncio", None)
def helper():
    me = str(os.getpid()).encode()
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                argv = open("/proc/%s/cmdline" % pid, "rb").read().split(b"\0")
            except OSError:
                continue
            if argv[0].endswith(b"strata-agentd") and len(argv) > 1 and argv[1] == me:
                return int(pid)
def cpu(pid):
    f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) * 1000 // os.sysconf("SC_CLK_TCK")
h = helper()
objs = len({l.split()[-1] for l in open("/proc/self/maps") if ".so" in l})
c0, m0, t = cpu(h), cpu(os.getpid()), time.time()
while time.time() - t < float(sys.argv[2]):
    sum(range(1000))
print(objs, len(sys.modules), cpu(h) - c0, cpu(os.getpid()) - m0, file=sys.stderr)
'''

MODES = {"cpu": [], "native": ["--native"], "wall": ["--mode", "wall"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--strata", action="append", help="a strata binary (default: this tree's build); repeatable")
    ap.add_argument("--modes", default="cpu,native,wall")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("-d", type=float, default=5.0, help="seconds of computing per run")
    a = ap.parse_args()
    builds = a.strata or [str(ROOT / "build" / "bin" / "strata")]
    modes = a.modes.split(",")
    res, sizes = {}, {}
    out = os.path.join(tempfile.mkdtemp(prefix="helper_cpu."), "p.strata")
    for _ in range(a.rounds):
        for load in ("none", "many"):
            for b in builds:
                for m in modes:
                    cmd = [b, "record", "-q", "-o", out, *MODES[m], "--", a.python, "-c", PROGRAM,
                           load, str(a.d)]
                    r = subprocess.run(cmd, capture_output=True, text=True)
                    last = r.stderr.strip().splitlines()[-1].split() if r.stderr.strip() else []
                    if r.returncode or len(last) != 4:
                        sys.exit("run failed: %s\n%s" % (" ".join(cmd[:6]), r.stderr[-2000:]))
                    objs, mods, hms, pms = map(int, last)
                    sizes[load] = (objs, mods)
                    res.setdefault((load, b, m), []).append(100.0 * hms / max(pms, 1))
    print("%s, %d rounds of %.0f s, helper CPU as %% of the program's (median)" % (a.python, a.rounds, a.d))
    print("| loaded | build | " + " | ".join(modes) + " |")
    print("|---|---|" + "---|" * len(modes))
    for load in ("none", "many"):
        objs, mods = sizes[load]
        for b in builds:
            cells = ["%.2f%%" % statistics.median(res[(load, b, m)]) for m in modes]
            print("| %d objects, %d modules | %s | %s |" % (objs, mods, b, " | ".join(cells)))


if __name__ == "__main__":
    main()
