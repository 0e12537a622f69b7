#!/usr/bin/env python3
"""Continuous profiling never harms the program (docs/send.md): the
program's CPU time and peak memory while its windows are sent to a
collector that accepts, to one that is down (nothing listens: connection
refused), and to one that hangs (takes the connection and never answers),
each over a plain run of the same workload, interleaved in one run.

The program is started as a service would be: the agent preloaded with
STRATA_SEND (the helper starts the sender), windows every second. A
fourth row records to a file and sends nothing: what sampling itself
costs on the same workload, in the same rounds. CPU
time is the program's own user+system time from wait4(); the helper's and
the sender's (both reparented to this script, a child subreaper) are
reported apart, since they run beside the program, never in it.

    bench/send.py                        # calls workload, 5 rounds
    bench/send.py --runs 7 --every 0.5

The accepting collector is the real one the tests use (scripts/otelcol.sh
builds it once).
"""
import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from overhead import ROOT, STRATA, become_subreaper  # noqa: E402

sys.path.insert(0, str(ROOT / "tests" / "func"))
from otelcol import Collector  # noqa: E402

AGENT = ROOT / "build" / "lib" / "strata" / "libstrata-agent.so"
WORKLOAD = (ROOT / "bench" / "workloads" / "calls.py", ["50"])


def reap_others(wait_ms=0):
    """CPU seconds of the orphans reaped (helper, sender), waiting for
    them up to wait_ms."""
    import time
    cpu, deadline = 0.0, time.time() + wait_ms / 1000
    while True:
        try:
            pid, _, ru = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return cpu
        if pid == 0:
            if time.time() > deadline:
                return cpu
            time.sleep(0.05)
            continue
        cpu += ru.ru_utime + ru.ru_stime


class Hanging:
    """Takes connections and never answers."""

    def __init__(self):
        self.s = socket.socket()
        self.s.bind(("127.0.0.1", 0))
        self.s.listen(64)
        self.port = self.s.getsockname()[1]
        self.conns = []
        threading.Thread(target=self.run, daemon=True).start()

    def run(self):
        while True:
            c, _ = self.s.accept()
            self.conns.append(c)


def run(python, env):
    cmd = [python, str(WORKLOAD[0])] + WORKLOAD[1]
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit("%s failed: %s" % (cmd, status))
    return ru.ru_utime + ru.ru_stime, ru.ru_maxrss


def main():
    become_subreaper()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--every", default="1")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        col = Collector(tmp).start()
        hang = Hanging()
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        down = s.getsockname()[1]
        s.close()  # nothing listens there
        # The first row records to a file and sends nothing: what the
        # sampling itself costs, for comparison.
        targets = {"no sending (-o file)": None, "accepts": col.port, "down": down, "hangs": hang.port}
        rows = {k: ([], [], []) for k in targets}
        for i in range(a.runs):
            order = list(targets)
            order = order[i % len(order):] + order[:i % len(order)]
            plain_cpu, plain_rss = run(a.python, dict(os.environ))
            reap_others()
            for name in order:
                if targets[name] is None:
                    out = Path(tmp) / "bench.strata"
                    if out.exists():
                        out.unlink()
                    subprocess.run([str(STRATA), "record", "-q", "-o", str(out), "--", "/bin/true"],
                                   capture_output=True)
                    env = dict(os.environ, LD_PRELOAD=str(AGENT), STRATA_OUTPUT=str(out))
                else:
                    env = dict(os.environ, LD_PRELOAD=str(AGENT),
                               STRATA_SEND="http://127.0.0.1:%d" % targets[name], STRATA_SEND_EVERY=a.every,
                               STRATA_SEND_TIMEOUT="2")
                cpu, rss = run(a.python, env)
                # The helper ends with the program; the sender after its
                # last try (a timeout, for the hanging one).
                others = reap_others(wait_ms=8000)
                rows[name][0].append(cpu / plain_cpu)
                rows[name][1].append(rss / plain_rss)
                rows[name][2].append(others)
            print("round %d done" % (i + 1), file=sys.stderr)
        received = len(col.requests())
        col.stop()
    version = subprocess.run([a.python, "-c", "import platform; print(platform.python_version())"],
                             capture_output=True, text=True).stdout.strip()
    print("workload `calls`, Python %s, %d rounds (plain, then the four in turn), windows every %s s; "
          "%d requests reached the accepting collector\n" % (version, a.runs, a.every, received))
    print("| collector | program CPU ratio (median) | min | max | program peak RSS ratio | helper + sender CPU s |")
    print("|---|---|---|---|---|---|")
    for name, (cpu, rss, others) in rows.items():
        print("| %s | %.3f | %.3f | %.3f | %.3f | %.2f |" % (name, statistics.median(cpu), min(cpu), max(cpu),
                                                           statistics.median(rss), statistics.median(others)))


if __name__ == "__main__":
    main()
