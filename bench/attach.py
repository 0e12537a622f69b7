#!/usr/bin/env python3
"""Attach, again and again: how often loading the agent into a running
process succeeds, and how long it takes (issue 21).

For each interpreter and each state of tests/func/programs/attach_states.py
(busy, numpy, sleep, stdin, threads, manyext, recursion), starts a fresh
process RUNS times and loads the agent into it, turn by turn with
`strata record --pid -d 0.3`, `strata top --pid` and `strata ctl PID load`;
then ends the process and checks its output and exit status. A load's time
is from starting strata to its "loaded the agent" line (wall clock, what a
user waits); strata's own line gives the wait for a safe point and the
borrowed thread's time. On 3.14+ every other process is started with
PYTHON_DISABLE_REMOTE_DEBUG=1, so that half the loads go through ptrace
and half through PEP 768.

    bench/attach.py                       # every interpreter the tests know, 20 runs
    bench/attach.py --python 3.8 --python debian-3.11 --scenario stdin --runs 5
    bench/attach.py --stale               # every state under strata_stale_ext's stale words

Interpreters are the functional tests' ids (tests/func/conftest.py), with
STRATA_VENVS for the virtualenvs that have NumPy; STRATA_BUILD for the
build. Prints one row per interpreter and state, and a summary.
"""
import argparse
import os
import re
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "func"))
import conftest  # noqa: E402

STATES = conftest.PROGRAMS / "attach_states.py"
SCENARIOS = ["busy", "numpy", "sleep", "stdin", "threads", "manyext", "recursion"]
LOADED = re.compile(r"strata: loaded the agent into process \d+ (?:\(thread \d+ borrowed for ([\d.]+) ms, after "
                    r"([\d.]+) ms waiting for a safe point\)|through the interpreter's remote debugging hook)")


def build_stale(interp, where):
    inc = subprocess.run([str(interp.exe), "-c", "import sysconfig; print(sysconfig.get_paths()['include'])"],
                         capture_output=True, text=True, check=True).stdout.strip()
    subprocess.run(["gcc", "-shared", "-fPIC", "-g", "-O1", "-I" + inc, "-o", str(where / "strata_stale_ext.so"),
                    str(conftest.PROGRAMS / "native" / "stale.c"), "-ldl"], check=True)


def readline(f, timeout):
    r, _, _ = select.select([f], [], [], timeout)
    return f.readline() if r else None


def one(interp, exe, scenario, cmd, remote_debug, tmp, stale):
    env = {k: v for k, v in os.environ.items() if not k.startswith("STRATA_") and k != "LD_PRELOAD"}
    if not remote_debug:
        env["PYTHON_DISABLE_REMOTE_DEBUG"] = "1"
    done = Path(tmp) / "done"
    if done.exists():
        done.unlink()
    args = [str(exe), str(STATES), scenario, str(done)] + ([str(tmp)] if stale else [])
    p = subprocess.Popen(args, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    res = {"ok": False, "load_s": None, "wait_ms": None, "call_ms": None, "how": None, "error": ""}
    said = ""
    try:
        while not said.endswith("ready\n"):
            line = p.stdout.readline()
            if not line:
                res["error"] = "target did not start: " + p.stderr.read()[-300:]
                return res
            said += line
        strata = str(conftest.STRATA)
        argv = {"record": [strata, "record", "--pid", str(p.pid), "-d", "0.3", "-o", str(Path(tmp) / "r.strata")],
                "top": [strata, "top", "--pid", str(p.pid), "--no-curses", "-i", "0.3"],
                "ctl": [strata, "ctl", str(p.pid), "load"]}[cmd]
        t0 = time.monotonic()
        s = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        first = readline(s.stderr, 60)
        t1 = time.monotonic()
        if cmd == "top":
            s.send_signal(signal.SIGINT)
        out, err = s.communicate(timeout=60)
        err = (first or "") + err
        m = LOADED.search(first or "")
        if not m or s.returncode != 0:
            res["error"] = "%s exit %s: %s" % (cmd, s.returncode, err.strip()[:400])
            return res
        res["load_s"] = t1 - t0
        res["how"] = "ptrace" if m.group(1) else "pep768"
        if m.group(1):
            res["call_ms"], res["wait_ms"] = float(m.group(1)), float(m.group(2))
        res["ok"] = True
    finally:
        done.write_text("")
        try:
            o, e = p.communicate("a line\n" if scenario == "stdin" else None, timeout=120)
        except subprocess.TimeoutExpired:
            p.kill()
            o, e = p.communicate()
        if res["ok"] and (said.splitlines()[-1:], p.returncode, o, e) != (["ready"], 3, "done\n", ""):
            res["ok"] = False
            res["error"] = "target changed: exit %s, out %r, err %r" % (p.returncode, o, e[-300:])
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", action="append", help="test id (3.8, debian-3.11...); default: every one present")
    ap.add_argument("--scenario", action="append", choices=SCENARIOS)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--cmd", choices=["record", "top", "ctl", "all"], default="all")
    ap.add_argument("--stale", action="store_true", help="run each state under strata_stale_ext's stale words")
    a = ap.parse_args()
    ids = a.python or conftest.ALL_IDS
    cmds = ["record", "top", "ctl"] if a.cmd == "all" else [a.cmd]
    print("load average %s; build %s" % (open("/proc/loadavg").read().split()[0], conftest.BUILD), flush=True)
    print("%-12s %-10s %6s %6s %8s %8s %8s %8s  %s" % ("python", "state", "ok", "runs", "load med", "load max",
                                                     "wait max", "call max", "ways"), flush=True)
    total = fails = over = 0
    worst = 0.0
    for ident in ids:
        interp = conftest.get_interp(ident)
        if interp.exe is None or not interp.version:
            print("%-12s not installed" % ident, flush=True)
            continue
        for scenario in a.scenario or SCENARIOS:
            exe = interp.venv_python() or interp.exe
            with tempfile.TemporaryDirectory(prefix="strata-attach-") as tmp:
                if a.stale:
                    build_stale(interp, Path(tmp))
                rs = []
                for i in range(a.runs):
                    remote_debug = interp.minor < (3, 14) or i % 2 == 0
                    rs.append(one(interp, exe, scenario, cmds[i % len(cmds)], remote_debug, tmp, a.stale))
                    if not rs[-1]["ok"]:
                        print("  %s %s run %d: %s" % (ident, scenario, i, rs[-1]["error"]), flush=True)
            ok = [r for r in rs if r["ok"]]
            loads = [r["load_s"] for r in ok]
            waits = [r["wait_ms"] for r in ok if r["wait_ms"] is not None]
            calls = [r["call_ms"] for r in ok if r["call_ms"] is not None]
            ways = {}
            for r in ok:
                ways[r["how"]] = ways.get(r["how"], 0) + 1
            total += len(rs)
            fails += len(rs) - len(ok)
            worst = max([worst] + loads)
            over += sum(1 for l in loads if l > 1.0)
            print("%-12s %-10s %6d %6d %7.0fms %7.0fms %7.1fms %7.1fms  %s" % (
                ident, scenario, len(ok), len(rs), 1000 * statistics.median(loads) if loads else 0,
                1000 * max(loads) if loads else 0, max(waits) if waits else 0, max(calls) if calls else 0,
                " ".join("%s %d" % kv for kv in sorted(ways.items()))), flush=True)
    print("%d of %d loads succeeded; %d took over 1 s; the slowest took %.0f ms" % (
        total - fails, total, over, worst * 1000), flush=True)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
