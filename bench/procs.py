#!/usr/bin/env python3
"""What a profiler adds per profiled process, on a process tree: a
multiprocessing pool of N workers (bench/workloads/pool.py), under
`strata record` and under `py-spy record --subprocesses`, beside a plain
run.

For each run the bench counts, every 20 ms, every process descended from
it (it is a child subreaper, so the helpers strata's agent starts, which
leave their parents at once, stay its descendants) and keeps the peaks:

  - procs, tasks: processes and threads (a cgroup's pids.max counts
    threads too) beyond those of the plain run's peak;
  - RSS, PSS of the profiler's own processes (strata-agentd and the
    strata CLI, or py-spy), summed at the moment their sum peaks (PSS
    every 200 ms: it splits shared pages among the processes that map
    them, so it is what they cost together);
  - CPU: the profiler's own processes' user+system time (from wait4, as
    the bench reaps them; the CLI's or py-spy's minus the workload's,
    which the workload reports itself), and the workload's CPU time over
    the plain run's.

    bench/procs.py                          # N = 1, 16, 64; Debian's python3
    bench/procs.py --workers 1 16 64 --runs 3 --python /usr/bin/python3
    bench/procs.py --pyspy .venvs/3.11.7/bin/py-spy   # scripts/benchenv.sh installs it

py-spy samples at 100 Hz by default and strata at 1000 Hz; `--rate`
sets both (strata's -F, py-spy's --rate).
"""
import argparse
import ctypes
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STRATA = ROOT / "build" / "bin" / "strata"
POOL = ROOT / "bench" / "workloads" / "pool.py"
PR_SET_CHILD_SUBREAPER = 36
PROFILER_COMMS = {"strata-agentd", "strata", "py-spy"}


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def stat_of(pid):
    s = read("/proc/%d/stat" % pid)
    if not s:
        return None
    rp = s.rindex(")")
    comm = s[s.index("(") + 1:rp]
    f = s[rp + 2:].split()
    return comm, int(f[1]), f[0]  # comm, ppid, state


def status_kb(pid, key):
    for line in read("/proc/%d/status" % pid).splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def pss_kb(pid):
    for line in read("/proc/%d/smaps_rollup" % pid).splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1])
    return 0


class Watch(threading.Thread):
    """Samples the bench's descendants until stopped."""

    def __init__(self):
        super().__init__(daemon=True)
        self.stop = threading.Event()
        self.comm = {}
        self.peak_procs = self.peak_tasks = 0
        self.peak_rss = self.peak_pss = 0
        self.max_helpers = 0

    def descendants(self):
        me = os.getpid()
        kids = {}
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            st = stat_of(int(d))
            if st and st[2] != "Z":
                kids.setdefault(st[1], []).append((int(d), st[0]))
        out, todo = [], [me]
        while todo:
            for pid, comm in kids.get(todo.pop(), []):
                out.append((pid, comm))
                todo.append(pid)
        return out

    def run(self):
        n = 0
        while not self.stop.is_set():
            procs = self.descendants()
            for pid, comm in procs:
                self.comm[pid] = comm
            tasks = sum(status_kb(pid, "Threads") for pid, _ in procs)
            prof = [pid for pid, comm in procs if comm in PROFILER_COMMS]
            self.peak_procs = max(self.peak_procs, len(procs))
            self.peak_tasks = max(self.peak_tasks, tasks)
            self.max_helpers = max(self.max_helpers, sum(1 for _, c in procs if c == "strata-agentd"))
            self.peak_rss = max(self.peak_rss, sum(status_kb(p, "VmRSS") for p in prof))
            if n % 10 == 0:
                self.peak_pss = max(self.peak_pss, sum(pss_kb(p) for p in prof))
            n += 1
            time.sleep(0.02)


def run_one(cmd, env=None):
    """Runs cmd, reaping it and every orphan that comes to the bench, until
    none is left. Returns (workload report, {pid: (comm, cpu_s)}, watch)."""
    w = Watch()
    w.start()
    r, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.dup2(wfd, 1)
        os.execvpe(cmd[0], cmd, env or os.environ)
    os.close(wfd)
    out = b""
    cpu = {}
    main_done = False
    deadline = None
    os.set_blocking(r, False)
    while True:
        try:
            chunk = os.read(r, 65536)
            if chunk:
                out += chunk
        except BlockingIOError:
            pass
        try:
            p, status, ru = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if p == 0:
            if main_done and deadline and time.monotonic() > deadline:
                break
            time.sleep(0.005)
            continue
        cpu[p] = (w.comm.get(p, "?"), ru.ru_utime + ru.ru_stime)
        if p == pid:
            main_done = True
            deadline = time.monotonic() + 10
    w.stop.set()
    w.join()
    os.close(r)
    lines = [ln for ln in out.decode(errors="replace").splitlines() if ln.startswith("{")]
    report = json.loads(lines[-1]) if lines else {"cpu_s": float("nan")}
    return report, cpu, w, pid


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 16, 64])
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--iters", type=int, default=2000000, help="loop iterations per task (2M: about 0.1 s of CPU)")
    ap.add_argument("--rate", type=int, default=0, help="samples per second for both profilers")
    ap.add_argument("--pyspy", default=None, help="py-spy executable (default: .venvs/3.11.*/bin/py-spy, then PATH)")
    ap.add_argument("--strata", action="append", default=[],
                    help="a strata CLI to measure (repeat to compare builds side by side; default: this tree's)")
    a = ap.parse_args()
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    pyspy = a.pyspy
    if not pyspy:
        cands = sorted(ROOT.glob(".venvs/3.11.*/bin/py-spy")) + [Path(shutil.which("py-spy") or "/nonexistent")]
        pyspy = next((str(c) for c in cands if c.exists()), None)
    tmp = Path(tempfile.mkdtemp(prefix="strata-procs-"))
    rows = []
    for n in a.workers:
        work = [a.python, str(POOL), str(n), str(a.iters)]
        configs = [("plain", work)]
        sargs = ["-F", str(a.rate)] if a.rate else []
        for k, exe in enumerate(a.strata or [str(STRATA)]):
            name = "strata" if len(a.strata) <= 1 else "strata (%s)" % exe
            configs.append((name, [exe, "record", "-q", "-o", str(tmp / ("p%d.strata" % k))] + sargs + ["--"] + work))
        if pyspy:
            pargs = ["--rate", str(a.rate)] if a.rate else []
            configs.append(("py-spy", [pyspy, "record", "--subprocesses", "--format", "raw", "-o",
                                       str(tmp / "p.txt")] + pargs + ["--"] + work))
        res = {}
        for _ in range(a.runs):
            for name, cmd in configs:
                report, cpu, w, top = run_one(cmd)
                prof_cpu = sum(c for p, (comm, c) in cpu.items() if comm == "strata-agentd")
                if name != "plain":
                    # The CLI's or py-spy's rusage holds the workload it reaped.
                    prof_cpu += max(0.0, cpu.get(top, ("", 0.0))[1] - report["cpu_s"])
                res.setdefault(name, []).append({
                    "cpu": report["cpu_s"], "prof_cpu": prof_cpu, "procs": w.peak_procs, "tasks": w.peak_tasks,
                    "rss": w.peak_rss, "pss": w.peak_pss, "helpers": w.max_helpers})
        base = {k: statistics.median(r[k] for r in res["plain"]) for k in ("cpu", "procs", "tasks")}
        for name in res:
            m = {k: statistics.median(r[k] for r in res[name]) for k in res[name][0]}
            rows.append((n, name, m, base))
    print("| workers | profiler | procs added | tasks added | helpers | profiler RSS MB | profiler PSS MB "
          "| profiler CPU s | per profiled process: procs, PSS MB, CPU ms | workload CPU ratio |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for n, name, m, base in rows:
        if name == "plain":
            print("| %d | none | %d procs, %d tasks in all | | | | | | | workload %.2f s CPU |"
                  % (n, m["procs"], m["tasks"], m["cpu"]))
            continue
        profiled = n + 1
        print("| %d | %s | %+d | %+d | %d | %.1f | %.1f | %.2f | %.2f, %.2f, %.1f | %.3f |" % (
            n, name, m["procs"] - base["procs"], m["tasks"] - base["tasks"], m["helpers"], m["rss"] / 1024.0,
            m["pss"] / 1024.0, m["prof_cpu"], (m["procs"] - base["procs"]) / profiled,
            m["pss"] / 1024.0 / profiled, 1000.0 * m["prof_cpu"] / profiled, m["cpu"] / base["cpu"]))
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
