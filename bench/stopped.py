#!/usr/bin/env python3
"""What a stopped agent does while the program runs: nothing, counted.

The CPU-time ratio of bench/overhead.py (configs `paused`, `standby`) is the
end-to-end number, but on a shared machine its noise is far larger than
the cost it looks for. This counts the cost directly instead. It runs the
call-heavy workload (single-threaded, so every other thread is the
agent's) with the agent stopped, and after SECONDS reads, from /proc:

- the CPU time and the context switches (wakeups) of each agent thread;
- the samples the agent took (`strata ctl PID status`), i.e. the SIGPROF
  signals it handled;
- the main thread's involuntary context switches next to a run without
  the agent (the program's own; a stopped agent adds none).

    bench/stopped.py [--python PY] [--seconds 3]
"""
import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STRATA = ROOT / "build" / "bin" / "strata"
AGENT = ROOT / "build" / "lib" / "strata" / "libstrata-agent.so"
WORKLOAD = ROOT / "bench" / "workloads" / "calls.py"
TICK = os.sysconf("SC_CLK_TCK")


def helper_of(pid):
    """The strata-agentd process serving pid, or None."""
    want = b"strata-agentd\0%d\0" % pid
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                if open("/proc/%s/cmdline" % d, "rb").read().startswith(want):
                    return int(d)
            except OSError:
                pass
    return None


def thread_stats(pid):
    out = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        base = "/proc/%d/task/%s/" % (pid, tid)
        try:
            stat = open(base + "stat").read()
            status = open(base + "status").read()
        except OSError:
            continue
        f = stat[stat.rindex(")") + 2:].split()
        cpu = (int(f[11]) + int(f[12])) / TICK
        sw = {k: int(v) for k, v in (line.split(":") for line in status.splitlines()
                                     if line.startswith(("voluntary_ctxt", "nonvoluntary_ctxt")))}
        name = open(base + "comm").read().strip()
        out[int(tid)] = (name, cpu, sw.get("voluntary_ctxt_switches", 0), sw.get("nonvoluntary_ctxt_switches", 0))
    return out


def run(python, env, seconds, label, tmp):
    p = subprocess.Popen([python, str(WORKLOAD), "200"], env=env, stdout=subprocess.DEVNULL)
    time.sleep(seconds)
    st = thread_stats(p.pid)
    helper = helper_of(p.pid)
    hst = thread_stats(helper) if helper else {}
    samples = None
    if env is not os.environ:
        r = subprocess.run([str(STRATA), "ctl", str(p.pid), "status"], capture_output=True, text=True)
        for line in r.stdout.splitlines():
            if line.startswith("samples"):
                samples = int(line.split()[1])
    p.kill()
    p.wait()
    rows = []
    for tid, (name, cpu, vol, invol) in sorted(st.items()):
        who = "main" if tid == p.pid else "program"
        rows.append("| %s | %s | %s | %.2f | %d | %d | %s |" % (label, who, name, cpu, vol, invol,
                                                               "-" if samples is None or who != "main" else samples))
    for tid, (name, cpu, vol, invol) in sorted(hst.items()):
        rows.append("| %s | helper | %s | %.2f | %d | %d | - |" % (label, name, cpu, vol, invol))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--seconds", type=float, default=3.0)
    a = ap.parse_args()
    tmp = Path("/tmp")
    out = tmp / ("stopped-%d.strata" % os.getpid())
    subprocess.run([str(STRATA), "record", "-q", "-o", str(out), "--", "/bin/true"], capture_output=True)
    paused = dict(os.environ, LD_PRELOAD=str(AGENT), STRATA_OUTPUT=str(out), STRATA_OPTIONS="paused=1")
    standby = dict(os.environ, LD_PRELOAD=str(AGENT), STRATA_AGENT="1")
    print("after %.1f s of the call-heavy workload (Python at 100%% CPU)\n" % a.seconds)
    print("| run | thread | name | CPU s | voluntary switches | involuntary switches | samples taken |")
    print("|---|---|---|---|---|---|---|")
    for label, env in (("no agent", os.environ), ("paused (record --paused)", paused), ("standby (STRATA_AGENT=1)", standby)):
        for row in run(a.python, env, a.seconds, label, tmp):
            print(row)
    out.unlink()


if __name__ == "__main__":
    main()
