#!/usr/bin/env python3
"""run_regrtests.py — CPython's own regression tests under `strata record`.

Owns the "programs behave exactly as without the profiler" stage of
`make check` (issue 11): for every interpreter strata supports that is
present here, it runs a chosen subset of that interpreter's own test suite
(`python -m test`, with `--timeout` and `-j`) under `strata record` in cpu
mode, a smaller subset in `--mode wall` and with `--native`, and one about
allocators and C libraries with `--objects`, then
decides whether each run behaved as it does without strata:

  * no test fails, errors, hangs or alters the environment under strata
    unless it does the same without strata (every module that does not pass
    under strata is run again without strata to learn that; `--baseline all`
    runs everything both ways and also compares skips);
  * regrtest's exit status agrees with that;
  * the profile is whole: `strata report --json` reads it, the regrtest
    process and its workers finished their profiles, and the file has no
    warnings other than unfinished profiles of processes the tests kill;
  * nothing is left running when the command has ended.

    tests/cpython/run_regrtests.py [--python ID ...] [--mode cpu,wall,native,objects]
        [--parallel K] [-j N] [--timeout SECS] [--baseline failed|all]
        [--only MODULE ...] [--workdir DIR] [--strata PATH]

cpu mode runs on every interpreter; wall, native and objects on Debian's, 3.8 and
3.13 unless --every-mode is given or interpreters are named (debian-3.14
and debian-3.15 are cpu mode only unless --every-mode is given).

Interpreters: Debian's /usr/bin/python3 (its tests come in the
libpython3.11-testsuite package) and the newest pyenv CPython of each minor
version 3.8-3.13 (ids: debian-3.11 3.8 3.9 3.10 3.11 3.12 3.13; the
STRATA_TEST_PYTHONS variable narrows the set like --python), and inside
the Debian sid root (scripts/sidroot.sh) debian-3.14 and debian-3.15,
/usr/bin/python3.14 and python3.15 with their libpython3.X-testsuite
(`make check` runs them there; they are not looked for by default). An absent one
is skipped with one line naming it; one that is present but has no agent
build, or no test package, is a failure. Exit status 0 when every run
behaved as it does without strata.

Logs, junit files and profiles: build/cpython-tests/<python>-<mode>/
(summary.json there lists every verdict).
"""
import argparse
import concurrent.futures
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ALL_IDS = ["debian-3.11", "3.8", "3.9", "3.10", "3.11", "3.12", "3.13"]
# Debian sid's and experimental's interpreters, present only inside the sid
# root (scripts/sidroot.sh): make check runs them there, with build-sid's
# strata, cpu mode (SID_REGRTESTS in the Makefile).
SID_IDS = ["debian-3.14", "debian-3.15"]

# ---- what runs ---------------------------------------------------------------
# A selection is a list of test modules and the regrtest patterns that choose
# their cases. An accept pattern without a dot is matched against each part
# of a test id, so a module name runs that module whole and a class name runs
# that class wherever it is (regrtest 3.8-3.13 agree on this; they also agree
# that ignore patterns win over accept patterns). Ignore patterns are full
# test ids. Budget: the whole stage, every interpreter and mode, in a few
# minutes on a 2-core machine; times below are Debian 3.11 without strata.

# cpu mode, every interpreter: the modules about threads, signals, fork,
# subprocess, select/selectors, os and queue, whole, plus cheap fork-heavy
# parts of concurrent.futures and multiprocessing.
CPU = [
    # (module, accept patterns, why)
    ("test_threading", ["test_threading"],
     "threads, locks, joins, fork from threads, interpreter shutdown with threads (11 s)"),
    ("test_thread", ["test_thread"], "the _thread module underneath threading (1 s)"),
    ("test_threading_local", ["test_threading_local", "_threading_local"],
     "thread-local storage as threads come and go; the second pattern keeps the module's doctests (1 s)"),
    ("test_threadsignals", ["test_threadsignals"],
     "signals delivered to threads, lock waits interrupted by signals (5 s)"),
    ("test_signal", ["test_signal"],
     "handlers, masks, sigwait, itimers, wakeup fds, signals between processes (17 s without "
     "test_siginterrupt_off)"),
    ("test_fork1", ["test_fork1"], "os.fork with threads running, import locks across fork (2.5 s)"),
    ("test_wait3", ["test_wait3"], "fork + os.wait3 while threads run (2.5 s)"),
    ("test_wait4", ["test_wait4"], "fork + os.wait4 while threads run (2.5 s)"),
    ("test_subprocess", ["test_subprocess"],
     "every way of starting, feeding, timing out and killing a child, fd inheritance, "
     "communicate() over poll and over select (30 s, mostly timeouts being waited for)"),
    ("test_select", ["test_select"], "select() on pipes, interrupted select (2 s)"),
    ("test_selectors", ["test_selectors"],
     "select/poll/epoll selectors, EINTR handling, timeouts (16 s, mostly waiting)"),
    ("test_os", ["test_os"], "fork, exec, spawn, waitpid, fds, environ, urandom (2 s)"),
    ("test_queue", ["test_queue"], "blocking queues between threads (9 s, mostly waiting)"),
    # Optional: pyenv's 3.11 and 3.12 here ship without these two modules.
    ("test_concurrent_futures",
     ["ProcessPoolForkProcessPoolExecutorTest", "ProcessPoolForkProcessPoolShutdownTest",
      "ProcessPoolForkFailingInitializerTest", "ProcessPoolForkExecutorDeadlockTest"],
     "process pools started by fork: work, shutdown, failing initializers, workers that crash "
     "or are killed (10 s; the whole module takes 140 s, its thread pools repeat test_threading)"),
    ("test_multiprocessing_fork", ["WithProcessesTestProcess", "WithProcessesTestQueue"],
     "multiprocessing processes (start, join, terminate, kill, exit codes) and queues with "
     "their feeder threads, fork start method (7 s; the whole module takes minutes)"),
]
OPTIONAL = {"test_concurrent_futures", "test_multiprocessing_fork"}

# wall and native modes, every interpreter: the same machinery, fewer cases.
# Wall mode signals running threads from a sampler thread and reads blocked
# ones from outside; --native copies and unwinds stacks in the handler. Both
# matter most where threads block, are signalled, and fork.
SMALL = [
    ("test_threading", ["test_threading"], "as in cpu mode (11 s)"),
    ("test_threadsignals", ["test_threadsignals"], "as in cpu mode (5 s)"),
    ("test_signal", ["test_signal"], "as in cpu mode (17 s)"),
    ("test_fork1", ["test_fork1"], "as in cpu mode (2.5 s)"),
    ("test_subprocess", ["POSIXProcessTestCase"],
     "the POSIX-specific class: signals to children, fds, preexec_fn, process groups (8 s)"),
    ("test_selectors", ["EpollSelectorTestCase"],
     "epoll, Linux's default selector, interrupted and timed out (4 s)"),
]

# --objects mode, on the same interpreters as wall and native: allocator
# hooks under programs that hook the allocator themselves, and libc's
# malloc redirected in the GOT of every C library the tests load (by path,
# by name through ctypes, and as dependencies), across forks and threads.
OBJECTS = [
    ("test_tracemalloc", ["test_tracemalloc"],
     "tracemalloc's own allocator hooks put on top of strata's and taken off, in this process and "
     "in children (2 s)"),
    ("test_ctypes", ["test_ctypes", "ctypes"],
     "libraries loaded by name and by path, callbacks from C, buffers C allocates and frees (2 s)"),
    ("test_hashlib", ["test_hashlib"], "OpenSSL's allocations through libcrypto's GOT, from threads (2 s)"),
    ("test_zlib", ["test_zlib"], "zlib's own malloc and free of its stream state (1 s)"),
    ("test_fork1", ["test_fork1"], "as in cpu mode: the hooks across fork (2.5 s)"),
    ("test_threading", ["test_threading"], "as in cpu mode: threads allocating at once (11 s)"),
    ("test_sqlite3", ["test_sqlite3"], "SQLite's allocations, its callbacks into Python (2 s)"),
    ("test_capi", ["test_capi"],
     "the allocator API itself: PyMem_SetAllocator, the debug hooks, pymem domains (5 s)"),
    ("test_asyncio", ["test_base_events"],
     "the event loop's base; its test_env_var_debug runs a child in development mode (-X dev: the debug "
     "allocator hooks, which aborted at exit a program whose audit hook strata added early) (3 s)"),
]
OPTIONAL |= {"test_sqlite3", "test_capi"}

def has_feeder_race(interp):
    """Whether the interpreter's concurrent.futures takes the executor's
    shutdown lock in the queue feeder's error path (CPython gh-125451)."""
    try:
        src = (interp.testdir.parent / "concurrent" / "futures" / "process.py").read_text()
    except (OSError, AttributeError):
        return False
    at = src.find("def _on_queue_feeder_error")
    end = src.find("\n    def ", at + 1)
    return at >= 0 and "with self.shutdown_lock" in src[at:end if end > at else None]


IGNORE = [
    # (test id or glob, why[, minor versions]) — for time, duplication or
    # flakiness without strata; never because a test fails under strata,
    # except a KNOWN DIFFERENCE that the README's limits name.
    ("test.test_signal.SiginterruptTest.test_siginterrupt_off",
     "waits 30 s (support.SHORT_TIMEOUT) for a read that must not be interrupted; the same "
     "child and handler are exercised by test_siginterrupt_on and test_without_siginterrupt"),
    ("test.test_subprocess.ProcessTestCaseNoPoll.*",
     "ProcessTestCase again with communicate() on select() instead of poll() (9 s); select() "
     "under signals is covered by test_select, SelectSelectorTestCase and test_signal"),
    ("test.test_selectors.DefaultSelectorTestCase.*",
     "DefaultSelector is EpollSelector on Linux: EpollSelectorTestCase again (4 s)"),
    ("*.ProcessPoolForkProcessPoolExecutorTest.test_map_timeout",
     "6 s spent waiting for a map() timeout; the class's other cases use the same pool"),
    ("test.test_subprocess.ProcessTestCase.test_leaking_fds_on_error",
     "KNOWN DIFFERENCE, not a flake (3.8 and 3.9 only): 1024 Popen calls of a command that is not on "
     "PATH; before 3.10 subprocess forks (3.10+ uses vfork, where the agent does nothing), and "
     "under strata each fork child starts a helper and every failed exec along PATH ends and "
     "restarts it: about 125 ms per call against 5 ms, past regrtest's 150 s module timeout "
     "on a loaded machine. The README's limits name it.", ("3.8", "3.9")),
    ("*.WithProcessesTestProcess.test_interrupt",
     "flaky in CPython 3.15.2 itself (Debian experimental's build, in the sid root): the child "
     "sent SIGINT while in time.sleep(100) does not end within 30 s in 5 of 12 runs without "
     "strata (1 of 6 under it); 3.14.10 passed 8 of 8 runs the same way. test_interrupt_no_handler, "
     "test_terminate and test_kill still run", ("3.15",)),
    ("*.ProcessPoolForkExecutorDeadlockTest.test_shutdown_deadlock_pickle",
     "deadlocks in CPython itself, with or without strata, where the interpreter's "
     "concurrent.futures has the lock-order race fixed upstream in 3.12.8 and 3.13.1 (CPython "
     "gh-125451; 3.9-3.13 here): the executor's manager thread holds _shutdown_lock while it joins "
     "the queue feeder thread, and the feeder, after the pickling error this test provokes, waits "
     "for that lock. Hung once under strata on pyenv's 3.13.0 (make check, cpu mode) with exactly "
     "those two stacks; the class's other deadlock cases still run", has_feeder_race),
    ("test.test_os.TimerfdTests.test_timerfd_*",
     "timing-flaky in CPython 3.13 itself: each asserts a timer's expiry within 1-2 ms of a "
     "clock read just after arming it, which a thread descheduled between the two misses "
     "(make check runs three regrtest runs and the sid stage on 2 cores). _TFD_TIMER_ABSTIME "
     "failed so without strata (0.998 s for a 1 s timer); _interval and _ns_poll failed under "
     "strata, 2 ms short, and passed rerun without it; the class passed 3 of 3 runs under "
     "strata with four busy loops beside, and 3 of 3 without"),
]

# The interpreters the wall and --native selections run on by default:
# Debian's (stripped, the one most users have), the oldest and the newest
# pyenv build, which between them have every frame layout family the
# agent reads (3.8's PyFrameObject chain, 3.11's and 3.13's interpreter
# frames). --every-mode (or naming interpreters) runs them on all, as
# cpu mode always does: `make check` must stay within its time budget.
SMALL_IDS = ["debian-3.11", "3.8", "3.13"]

MODES = {
    "cpu": ([], CPU),
    "wall": (["--mode", "wall"], SMALL),
    "native": (["--native"], SMALL),
    "objects": (["--objects"], OBJECTS),
}

# Every run, with strata and without, gets PYTHONUNBUFFERED=1, as Python
# runs in most containers: sys.stdout/sys.stderr then write straight to
# their fds, so a write(2) cut short by a signal loses the rest instead of
# being retried, and that difference must show here whatever the calling
# environment says.
FIXED_ENV = {"PYTHONUNBUFFERED": "1"}
RUN_MARK = "STRATA_REGRTEST_RUN"


# ---- interpreters ------------------------------------------------------------

def pyenv_root():
    try:
        out = subprocess.run(["pyenv", "root"], capture_output=True, text=True, check=True).stdout.strip()
        return Path(out)
    except (OSError, subprocess.CalledProcessError):
        return Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))


def find_exe(ident):
    if ident == "debian-3.11":
        return Path("/usr/bin/python3") if Path("/usr/bin/python3").exists() else None
    if ident in SID_IDS:
        exe = Path("/usr/bin/python" + ident.split("-")[1])
        return exe if exe.exists() else None
    versions = pyenv_root() / "versions"
    found = []
    if versions.is_dir():
        for v in versions.glob(ident + ".*"):
            parts = v.name.split(".")
            if len(parts) == 3 and all(p.isdigit() for p in parts) and (v / "bin" / "python").exists():
                found.append((tuple(int(p) for p in parts), v / "bin" / "python"))
    return max(found)[1] if found else None


class Interp:
    def __init__(self, ident):
        self.id = ident
        self.exe = find_exe(ident)
        self.version = self.testdir = None
        if self.exe:
            out = subprocess.run([str(self.exe), "-c", "import sys, sysconfig, os; "
                                  "print('%d.%d.%d' % sys.version_info[:3]); "
                                  "print(os.path.join(sysconfig.get_paths()['stdlib'], 'test'))"],
                                 capture_output=True, text=True)
            if out.returncode == 0:
                self.version, testdir = out.stdout.split("\n")[:2]
                self.testdir = Path(testdir)

    def has_module(self, name):
        return (self.testdir / (name + ".py")).exists() or (self.testdir / name / "__init__.py").exists()

    def problem(self, libdir):
        """Why this present interpreter cannot be tested, or None."""
        if not self.version:
            return "%s does not run" % self.exe
        if not (libdir / ("strata-py-%s.so" % self.version)).exists():
            return "no agent build for Python %s (%s): %s is missing; `make` builds it" % (
                self.version, self.exe, libdir / ("strata-py-%s.so" % self.version))
        if not (self.testdir / "libregrtest").is_dir():
            pkg = " (Debian package libpython%s-testsuite; scripts/deps.sh and scripts/sidroot.sh install it)" % (
                self.id.split("-")[1]) if self.id.startswith("debian") else ""
            return "Python %s has no test package at %s%s" % (self.version, self.testdir, pkg)
        return None


# ---- one regrtest run ---------------------------------------------------------

SUMMARY_HEAD = re.compile(r"^(?:All )?(\d+) (?:tests?|re-run tests?) (.+):$")
PROGRESS = re.compile(r"\[\s*\d+/\d+(?:/\d+)?\] (test_\w+(?:\.\w+)*) (.*)$")


class RunResult:
    """What one `python -m test` run did: per module and per test case."""

    def __init__(self):
        self.rc = None
        self.elapsed = 0.0
        self.killed = False        # the whole run outlived its limit
        self.cases = {}            # test id -> "pass" | "fail" | "skip"
        self.details = {}          # test id -> failure text
        self.modules = {}          # module -> "failed" | "env changed" | "skipped" | ...
        self.hangs = {}            # module -> faulthandler text
        self.log = None
        self.leftovers = []

    def failed_cases(self):
        return {t for t, o in self.cases.items() if o == "fail"}

    def bad_modules(self):
        return {m for m, s in self.modules.items() if s in ("failed", "env changed")} | set(self.hangs)


def parse_log(text, res):
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = SUMMARY_HEAD.match(lines[i].strip())
        if m and not lines[i].startswith(" "):
            what = m.group(2)
            if "failed" in what:
                state = "failed"
            elif "altered the execution environment" in what:
                state = "env changed"
            elif "skipped" in what:
                state = "skipped"
            elif "run no tests" in what or "did not run" in what:
                state = "no tests"
            elif "re-run" in what or "re-run" in lines[i]:
                state = None
            else:
                state = what
            i += 1
            while i < len(lines) and lines[i].startswith("    "):
                if state:
                    for mod in lines[i].split():
                        res.modules.setdefault(mod, state)
                i += 1
            continue
        p = PROGRESS.search(lines[i])
        if p:
            mod, rest = p.group(1), p.group(2)
            block = []
            j = i + 1
            while j < len(lines) and not PROGRESS.search(lines[j]) and not lines[j].startswith("== Tests result"):
                block.append(lines[j])
                j += 1
            # A worker killed by its faulthandler timeout says "crashed" (3.8-3.11)
            # or "worker non-zero exit code" (3.12+) and prints "Timeout (H:MM:SS)!";
            # one killed by the main process (3.8-3.10) is reported "timed out".
            timed_out = rest.startswith("timed out") or any(b.startswith("Timeout (") for b in block[:3])
            if timed_out:
                res.hangs[mod] = "\n".join(block[:60])
        i += 1


def parse_junit(path, res):
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return
    for tc in root.iter("testcase"):
        name = tc.get("name")
        outcome, text = "pass", ""
        for ch in tc:
            if ch.tag in ("failure", "error"):
                outcome = "fail"
                text = (ch.text or ch.get("message") or "").strip()
            elif ch.tag == "skipped" and outcome == "pass":
                outcome = "skip"
        res.cases[name] = outcome
        if text:
            res.details[name] = text


def regrtest_cmd(interp, modules, accept, args, outdir):
    cmd = [str(interp.exe), "-m", "test", "-j%d" % args.jobs, "--timeout", str(args.timeout),
           "--fail-env-changed", "--junit-xml", str(outdir / "junit.xml"),
           "--tempdir", str(outdir / "tmp")]
    for pat in accept:
        cmd += ["-m", pat]
    for entry in IGNORE:
        # An optional third element: the minor versions it applies to, or
        # a test of the interpreter.
        if len(entry) > 2 and (not entry[2](interp) if callable(entry[2]) else
                               not any(interp.version and interp.version.startswith(v + ".")
                                       for v in entry[2])):
            continue
        cmd += ["-i", entry[0]]
    return cmd + modules


def run_regrtest(interp, modules, accept, args, outdir, strata_opts=None):
    """Run the selection (under strata when strata_opts is a list)."""
    if outdir.exists():
        shutil.rmtree(outdir)
    (outdir / "tmp").mkdir(parents=True)
    res = RunResult()
    cmd = regrtest_cmd(interp, modules, accept, args, outdir)
    if strata_opts is not None:
        cmd = [str(args.strata), "record", "-o", str(outdir / "profile.strata")] + strata_opts + ["--"] + cmd
    env = dict(os.environ)
    env.update(FIXED_ENV)
    # Marks every process of this run, to find those still alive at the end:
    # regrtest puts its workers in sessions of their own, so the process
    # group does not hold them all. A child given a fresh environment loses
    # the mark, but under strata it keeps STRATA_OUTPUT (the agent puts it
    # back), which names this run's profile.
    env[RUN_MARK] = str(outdir)
    marks = ["%s=%s" % (RUN_MARK, outdir)]
    if strata_opts is not None:
        marks.append("STRATA_OUTPUT=%s" % (outdir / "profile.strata"))
    res.log = outdir / "regrtest.log"
    (outdir / "command").write_text(" ".join(cmd) + "\n")
    # A hang is regrtest's to report (--timeout per module); this limit only
    # guards against regrtest itself never ending.
    limit = args.timeout * (len(modules) + 2) + 300
    t0 = time.monotonic()
    with open(res.log, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                cwd=str(outdir), env=env, start_new_session=True)
        try:
            res.rc = proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            res.killed = True
            kill_group(proc.pid)
            res.rc = proc.wait()
    res.elapsed = time.monotonic() - t0
    time.sleep(1)  # processes the command signalled as it ended get to exit
    res.leftovers = leftover_processes(marks)
    for pid, _, _ in res.leftovers:
        try:
            os.kill(pid, signal.SIGKILL)  # a hung one may block SIGTERM
        except ProcessLookupError:
            pass
    parse_log(res.log.read_text(errors="replace"), res)
    parse_junit(outdir / "junit.xml", res)
    return res


def kill_group(pgid):
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def ours(pid):
    """Whether a process runs strata's code: a helper (strata-agentd), or a
    Python process with the agent in it. LD_PRELOAD maps the agent into
    every program the tests start (`sleep` too), where it does nothing but
    pass the variables on: such a process is the tests' own."""
    try:
        exe = os.path.basename(os.readlink("/proc/%d/exe" % pid))
        if exe == "strata-agentd":
            return True
        maps = Path("/proc/%d/maps" % pid).read_text()
        return "libstrata-agent" in maps and (exe.startswith("python") or "libpython" in maps)
    except OSError:
        return False


def leftover_processes(marks):
    """Processes whose environment carries one of the marks, as
    (pid, "pid command", ours) triples: ours when strata's code runs in it.
    Some tests leave a process of their own behind on purpose
    (test_subprocess's `sleep 3` under a shell killed at a timeout): it
    stays without strata too, and is only noted."""
    left = []
    wanted = [m.encode() for m in marks]
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            env = (d / "environ").read_bytes().split(b"\0")
            if not any(m in env for m in wanted):
                continue
            stat = (d / "stat").read_text()
            if stat[stat.rindex(")") + 2:].split()[0] == "Z":
                continue
            cmdline = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            left.append((int(d.name), "%s %s" % (d.name, cmdline.strip()[:160]), ours(int(d.name))))
        except (OSError, ValueError, IndexError):
            continue
    return left


# ---- the profile ---------------------------------------------------------------

WORKER_MARKS = ("--worker-args", "test.libregrtest.worker", "--worker-json")


def check_profile(args, path, root_cmd_head):
    """Problems with the profile (a list of strings) and notes."""
    problems, notes = [], []
    if not path.exists():
        return ["no profile was written (%s)" % path], notes
    rep = subprocess.run([str(args.strata), "report", "--json", str(path)], capture_output=True, text=True)
    if rep.returncode != 0:
        return ["strata report failed (status %d): %s" % (rep.returncode, rep.stderr.strip()[:500])], notes
    try:
        data = json.loads(rep.stdout)
    except ValueError as e:
        return ["strata report --json printed no JSON: %s" % e], notes
    procs = {p["pid"]: p for p in data.get("processes", [])}
    roots = [p for p in procs.values() if p["ppid"] not in procs]
    main = [p for p in roots if p["command"].startswith(root_cmd_head)]
    if not main:
        problems.append("the profile has no process running %r" % root_cmd_head)
    for m in main:
        if not m["finished"]:
            problems.append("the regrtest process %d did not finish its profile" % m["pid"])
        if m["samples"] <= 0:
            problems.append("the regrtest process %d has no samples" % m["pid"])
        workers = [p for p in procs.values() if p["ppid"] == m["pid"]
                   and any(w in p["command"] for w in WORKER_MARKS)]
        if not workers:
            problems.append("no regrtest worker of process %d was profiled" % m["pid"])
        for w in workers:
            if not w["finished"]:
                problems.append("regrtest worker %d did not finish its profile" % w["pid"])
    unfinished = [p for p in procs.values() if not p["finished"]]
    known = re.compile(r"process \d+ (stopped without finishing its profile|is still running)")
    for w in data.get("warnings", []):
        if not known.search(w):
            problems.append("report warning: " + w)
    if unfinished:
        notes.append("%d of %d processes did not finish their profiles (killed by the tests): %s" % (
            len(unfinished), len(procs), ", ".join(
                "%d %s" % (p["pid"], p["command"].replace("\n", " ")[:60]) for p in unfinished[:4])))
    if data.get("dropped"):
        notes.append("%d samples dropped" % data["dropped"])
    notes.append("%d samples, %d processes, %d threads" % (
        data.get("samples", 0), len(procs), len(data.get("threads", []))))
    return problems, notes


# ---- one job: a mode on an interpreter ------------------------------------------

class Verdict:
    def __init__(self, interp, mode):
        self.interp, self.mode = interp, mode
        self.problems = []         # each makes the job fail
        self.notes = []
        self.expected = []         # what fails without strata too
        self.elapsed = 0.0
        self.base_elapsed = None
        self.dir = None

    @property
    def name(self):
        return "%s %s" % (self.interp.id, self.mode)

    def to_json(self):
        return {"python": self.interp.id, "version": self.interp.version, "mode": self.mode,
                "ok": not self.problems, "problems": self.problems, "notes": self.notes,
                "fails_without_strata_too": self.expected, "seconds": round(self.elapsed, 1),
                "seconds_without_strata": self.base_elapsed and round(self.base_elapsed, 1),
                "dir": str(self.dir)}


def first_lines(text, n=12):
    lines = text.strip().splitlines()
    # The assertion is at the end of a traceback: keep the end.
    return "\n".join(("      " + l) for l in lines[-n:])


def run_job(interp, mode, args):
    opts, selection = MODES[mode]
    v = Verdict(interp, mode)
    v.dir = args.workdir / ("%s-%s" % (interp.id, mode))
    modules, accept = [], []
    for mod, pats, _ in selection:
        if args.only and mod not in args.only:
            continue
        if not interp.has_module(mod):
            if mod in OPTIONAL:
                v.notes.append("%s is not in this interpreter's test package: not run" % mod)
                continue
            v.problems.append("%s is not in %s" % (mod, interp.testdir))
            continue
        modules.append(mod)
        accept += pats
    if not modules:
        v.problems.append("nothing to run")
        return v

    res = run_regrtest(interp, modules, accept, args, v.dir, strata_opts=opts)
    v.elapsed = res.elapsed
    v.res = res
    base = None
    if args.baseline == "all":
        base = run_regrtest(interp, modules, accept, args, v.dir.with_name(v.dir.name + "-nostrata"))
        v.base_elapsed = base.elapsed
    elif res.bad_modules() or res.killed or (res.rc != 0 and not res.modules):
        # Learn what the modules that did not pass do without strata.
        again = sorted(res.bad_modules()) or modules
        base = run_regrtest(interp, again, accept, args, v.dir.with_name(v.dir.name + "-nostrata"))
        v.base_elapsed = base.elapsed
    judge(v, res, base, modules)

    root_head = "%s -m test" % interp.exe
    problems, notes = check_profile(args, v.dir / "profile.strata", root_head)
    v.problems += problems
    v.notes += notes
    # A test module regrtest kills at its timeout leaves its own children
    # running (test_threading's `-c` scripts): where the run without
    # strata left the same command behind, it is the test's, not strata's.
    cmd = lambda t: t.split(" ", 1)[-1]
    base_left = {cmd(t) for _, t, _ in base.leftovers} if base else set()
    mine = [t for _, t, o in res.leftovers if o and cmd(t) not in base_left]
    also = [t for _, t, o in res.leftovers if o and cmd(t) in base_left]
    theirs = [t for _, t, o in res.leftovers if not o]
    if also:
        v.expected.append("left running without strata too (killed now): %s" % "; ".join(
            t.replace("\n", " ")[:100] for t in also[:3]))
    if mine:
        v.problems.append("%d processes running strata's code still running after the command ended "
                          "(killed now): %s" % (len(mine), "; ".join(mine[:5])))
    if theirs:
        v.notes.append("%d processes the tests left running (not profiled; killed now): %s" % (
            len(theirs), "; ".join(theirs[:5])))
    log = res.log.read_text(errors="replace")
    # The agent's messages in the tests' output (record's own summary and
    # its warnings about unfinished profiles are the CLI's, not the tests').
    own = re.compile(r"strata: (\d+ samples,|warning: process \d+ )")
    msgs = sorted(set(l.strip() for l in log.splitlines()
                      if l.strip().startswith("strata:") and not own.match(l.strip())))
    if msgs:
        v.notes.append("strata's own messages in the tests' output: " + " | ".join(msgs[:5]))
    return v


def judge(v, res, base, modules):
    """Compare the run under strata with the same selection without it."""
    if res.killed:
        v.problems.append("regrtest did not end within its limit: killed (see %s)" % res.log)
    base_fail = base.failed_cases() if base else set()
    base_bad = base.bad_modules() if base else set()
    for tid in sorted(res.failed_cases()):
        if tid in base_fail:
            v.expected.append(tid)
        else:
            v.problems.append("%s fails only under strata:\n%s" % (tid, first_lines(res.details.get(tid, ""))))
    for mod, text in sorted(res.hangs.items()):
        if base and mod in base.hangs:
            v.expected.append("%s (times out)" % mod)
        else:
            v.problems.append("%s hangs under strata (regrtest --timeout); its threads then:\n%s" % (
                mod, "\n".join("      " + l for l in text.splitlines()[:40])))
    for mod, state in sorted(res.modules.items()):
        if mod in res.hangs:
            continue
        if state == "failed":
            own = [t for t in res.failed_cases() if t.startswith("test.%s." % mod)]
            if not own and mod not in base_bad:
                v.problems.append("%s failed under strata with no failing test case "
                                  "(crashed? see %s)" % (mod, res.log))
        elif state == "env changed":
            if mod in base_bad:
                v.expected.append("%s (alters the environment)" % mod)
            else:
                v.problems.append("%s altered the execution environment only under strata "
                                  "(see %s)" % (mod, res.log))
        elif state in ("no tests",) and mod in modules:
            v.problems.append("%s ran no tests under strata" % mod)
    if base is not None and base.cases and res.cases:
        newly_skipped = sorted(t for t, o in res.cases.items() if o == "skip" and base.cases.get(t) == "pass")
        for t in newly_skipped:
            v.problems.append("%s is skipped under strata but passes without it" % t)
        only_base = sorted(t for t in base.failed_cases() if res.cases.get(t) == "pass")
        if only_base:
            v.notes.append("failed without strata but passed with it (flaky?): " + ", ".join(only_base))
        missing = sorted(set(base.cases) - set(res.cases))
        if missing and not res.hangs:
            v.problems.append("%d test cases ran without strata but not under it, e.g. %s" % (
                len(missing), ", ".join(missing[:5])))
    # regrtest's own verdict must agree: 0 when nothing went wrong.
    clean = not res.failed_cases() and not res.bad_modules()
    if res.rc not in (0, 2, 3) or (res.rc == 0) != clean:
        v.problems.append("regrtest exited with status %s (%s)" % (
            res.rc, "expected 0" if clean else "expected the failures above to give 2 or 3"))


# ---- main ---------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--strata", type=Path, default=ROOT / "build" / "bin" / "strata")
    ap.add_argument("--python", action="append",
                    help="an interpreter id (%s); repeatable" % " ".join(ALL_IDS + SID_IDS))
    ap.add_argument("--mode", default="cpu,wall,native,objects",
                    help="comma-separated: cpu, wall, native, objects")
    ap.add_argument("--parallel", type=int, default=int(os.environ.get("STRATA_REGRTEST_PARALLEL", 3)),
                    help="regrtest runs at a time (default 3: the tests mostly wait)")
    ap.add_argument("-j", "--jobs", type=int, default=2, help="regrtest's own -j (default 2)")
    ap.add_argument("--timeout", type=int, default=150, help="regrtest --timeout per test module (default 150 s)")
    ap.add_argument("--baseline", choices=["failed", "all"], default="failed",
                    help="run without strata only the modules that did not pass (default), or everything")
    ap.add_argument("--every-mode", action="store_true",
                    help="wall, --native and --objects on every interpreter too (default: %s)" % " ".join(SMALL_IDS))
    ap.add_argument("--only", action="append", help="only this test module (repeatable)")
    ap.add_argument("--workdir", type=Path, default=ROOT / "build" / "cpython-tests")
    ap.add_argument("-v", "--verbose", action="store_true", help="print notes for passing runs too")
    args = ap.parse_args()
    args.strata = args.strata.resolve()
    # Started in the background by a shell without job control (`make
    # check &` in a script), this process has SIGINT and SIGQUIT ignored,
    # and so would every test: test_signal then fails, and test_threading's
    # interrupt_main() does nothing, so its gh-102056 case recurses until
    # regrtest's timeout, with strata and without. The tests expect a
    # terminal's defaults.
    for sig in (signal.SIGINT, signal.SIGQUIT):
        if signal.getsignal(sig) == signal.SIG_IGN:
            print("%s was ignored by whatever started this: the tests get its default" % sig.name)
            signal.signal(sig, signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL)
    libdir = args.strata.parent.parent / "lib" / "strata"
    modes = [m for m in args.mode.split(",") if m]
    for m in modes:
        if m not in MODES:
            ap.error("unknown mode %r" % m)
    ids = args.python or (os.environ.get("STRATA_TEST_PYTHONS", "").split() or ALL_IDS)
    if not args.strata.exists():
        print("run_regrtests: %s does not exist; run make first" % args.strata, file=sys.stderr)
        return 2
    args.workdir.mkdir(parents=True, exist_ok=True)

    failures, jobs = [], []
    for ident in ids:
        it = Interp(ident)
        if it.exe is None:
            print("skipped: Python %s is not installed on this machine" % ident)
            continue
        why = it.problem(libdir)
        if why:
            print("FAIL  %-12s %s" % (ident, why))
            failures.append({"python": ident, "ok": False, "problems": [why]})
            continue
        for m in modes:
            if m != "cpu" and not args.every_mode and ident not in SMALL_IDS and \
                    (not args.python or ident in SID_IDS):
                continue
            jobs.append((it, m))
    # Longest first, so that the slow runs do not end up alone at the end.
    jobs.sort(key=lambda j: (j[1] != "cpu",))

    t0 = time.monotonic()
    lock = threading.Lock()
    verdicts = []

    def one(job):
        try:
            v = run_job(job[0], job[1], args)
        except Exception as e:  # a bug here must not hide the other results
            v = Verdict(job[0], job[1])
            v.problems.append("run_regrtests.py failed: %r" % e)
        with lock:
            status = "ok  " if not v.problems else "FAIL"
            print("%s  %-12s %-6s %5.0f s%s" % (status, v.interp.id + " " + v.interp.version, v.mode, v.elapsed,
                                             "" if not v.expected else
                                             "  (%d fail without strata too)" % len(v.expected)), flush=True)
        return v

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.parallel)) as pool:
        verdicts = list(pool.map(one, jobs))
    total = time.monotonic() - t0

    bad = [v for v in verdicts if v.problems]
    for v in verdicts:
        if v.problems or args.verbose:
            print("\n== %s (Python %s, %s): %s" % (v.name, v.interp.version, v.dir,
                                                  "FAIL" if v.problems else "ok"))
            for p in v.problems:
                print("  - " + p)
            for t in v.expected:
                print("  = fails without strata too: " + t)
            for n in v.notes:
                print("  . " + n)
    summary = {"seconds": round(total, 1), "runs": [v.to_json() for v in verdicts] + failures}
    (args.workdir / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    print("\nCPython regression tests under strata: %d runs, %d failed%s, %.0f s (%s)" % (
        len(verdicts), len(bad), "" if not failures else ", %d interpreters not testable" % len(failures),
        total, args.workdir / "summary.json"))
    return 1 if bad or failures else 0


if __name__ == "__main__":
    sys.exit(main())
