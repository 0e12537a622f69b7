"""A signal sent to the process reaches the thread it reaches without strata
(issue 27): the main thread blocked in pause(), time.sleep, select, a read,
Event.wait or Lock.acquire(timeout=...) is cut short by a SIGALRM of
setitimer or alarm, a SIGUSR1 or SIGINT from kill(PID), or the SIGCHLD of
a child that ends, while other threads compute or sleep, in every mode, and
as soon as without strata. programs/sigdeliver.py runs the rounds and says
how each ended; each test runs the same scenarios without strata and with,
side by side.

make check runs a rotation of the matrix (every source with every call,
the threads taken in turn, a round each) in cpu and wall mode under every
Python, and a part of it (2 rounds) under -e, --native, --objects,
--paused and after an attach under the edge Pythons, and pytest-timeout's suite. The full matrix, 200 rounds a
scenario, is bench/signals.py (bench/RESULTS.md).
"""
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

import pytest

from conftest import ALL_IDS, PROGRAMS, STRATA, VENVS, build_embedding, plain_env, strata

SOURCES = ["itimer", "usr1", "int", "chld"]
WAITS = ["pause", "sleep", "select", "read", "event", "lock"]
THREADS = ["1busy", "8busy", "8sleep", "0", "1sleep"]
ROUNDS = 1
PART_ROUNDS = 2
RETRY_ROUNDS = 5
# A signal that did not cut the call short: the call ended by itself
# (late, returned) or had to be rescued by the watchdog.
FAILED = ("late", "returned", "rescued")


def rotation(offset):
    """Every source with every call, the threads taken in turn (offset: a
    different turn for each Python). Not Event.wait and Lock.acquire with
    busy threads: their call is a futex wait with a timeout, which is all
    /proc/PID/syscall shows of the main thread waiting for the GIL just
    before the call too, so the sender cannot tell that a signal came
    before the call (CPython's race: it then waits out the call, without
    strata too, about 1 round in 100 with 8 busy threads on a loaded
    machine). bench/signals.py runs them, and says so."""
    combos = [(s, w) for s in SOURCES for w in WAITS]
    out = []
    for i, (s, w) in enumerate(combos):
        th = THREADS[(i + offset) % len(THREADS)]
        if w in ("event", "lock") and th.endswith("busy"):
            th = th.replace("busy", "sleep")
        out.append("%s:%s:%s" % (s, w, th))
    return out


def run(cmd, env=None, timeout=600):
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout, env=env)
    assert p.returncode == 0, (cmd, p.stderr[-3000:])
    return {r["scenario"]: r for r in (json.loads(l) for l in p.stdout.splitlines() if l.startswith("{"))}


def failures(res):
    return {s: r["outcomes"] for s, r in res.items() if any(k in r["outcomes"] for k in FAILED)}


def check(plain, profiled, what, retry=None):
    """Every round's call was cut short, its handler ran, and the latencies
    are those without strata: their median within 20 ms for the scenarios
    without busy threads. With busy threads the main thread then waits
    for the GIL, 5 to 500 ms on a loaded machine (make check's), with or
    without strata: their latencies are not compared here (a signal that
    did not cut the call short is a failure above whatever its latency).
    The comparison of every scenario, 200 rounds each on an idle machine,
    is bench/signals.py's (bench/RESULTS.md)."""
    assert set(profiled) == set(plain), (what, set(plain) ^ set(profiled))
    failed = failures(profiled)
    if failed and retry:
        # A round can fail without strata too (bench/signals.py: 1 in
        # ~10,000 rounds on a loaded machine; CPython's own race at the
        # call's edge), and under strata about as rarely once the signal
        # is handed over. What issue 27 was, failed 8-100% of the rounds
        # of the scenarios with other threads. So a failed scenario runs
        # RETRY_ROUNDS more, all of which must cut the call short: the
        # rare race does not fail make check, a broken hand-over does.
        again = retry(sorted(failed), RETRY_ROUNDS)
        still = failures(again)
        assert not still, "%s: signals that did not cut the call short: %s, then again in %s" % (
            what, failed, {s: again[s]["outcomes"] for s in still})
        profiled = dict(profiled, **again)
    assert not failed or retry, "%s: signals that did not cut the call short: %s" % (what, failed)
    # The handler ran in every round that tested the call (in the
    # others the main thread may still wait for the GIL to run it).
    for s, r in profiled.items():
        assert r["handled"] >= r["outcomes"].get("interrupted", 0) + r["outcomes"].get("starved", 0), (what, s, r)
    # Rounds where the signal came while the main thread was in its call
    # (the others test nothing): most of them.
    synced = sum(r["outcomes"].get("interrupted", 0) for r in profiled.values())
    total = sum(sum(r["outcomes"].values()) for r in profiled.values())
    assert synced >= 0.6 * total, (what, synced, total, {s: r["outcomes"] for s, r in profiled.items()})
    def lat(res):
        return [x for s, r in res.items() if not s.endswith("busy") for x in r["lat_ms"]]
    a, b = lat(plain), lat(profiled)
    if a and b:
        ma, mb = statistics.median(a), statistics.median(b)
        assert mb <= ma + 20, "%s: median latency %.2f ms with strata, %.2f ms without" % (what, mb, ma)


def test_signal_reaches_the_blocked_main_thread(python, tmp_path):
    """cpu and wall mode, beside the same scenarios without strata. Each
    Python takes the threads in another turn, and its own call for
    alarm()."""
    offset = ALL_IDS.index(python.id) if python.id in ALL_IDS else 0
    scenarios = rotation(offset) + ["alarm:%s:%s" % (WAITS[offset % len(WAITS)], THREADS[offset % len(THREADS)])]
    prog = [python.exe, PROGRAMS / "sigdeliver.py", ROUNDS, "alarm=1"] + scenarios
    plain = run(prog, env=plain_env())
    for mode in ("cpu", "wall"):
        rec = [STRATA, "record", "-q", "-o", tmp_path / (mode + ".strata"), "--mode", mode, "--"]
        profiled = run(rec + prog)
        check(plain, profiled, mode,
              retry=lambda sc, n: run(rec + [python.exe, PROGRAMS / "sigdeliver.py", n, "alarm=1"] + sc))


# A part of the matrix, each source and each call once, busy threads and
# sleeping ones (these change their signal mask around each sleep).
PART = ["itimer:pause:8busy", "usr1:read:8busy", "chld:sleep:1busy", "int:select:8sleep", "itimer:event:8sleep",
        "usr1:lock:8sleep", "chld:event:1sleep", "int:pause:8busy"]
EDGE_MODES = {"events": ["-e", "task-clock"], "native": ["--native"], "objects": ["--objects"],
              "paused": ["--paused"]}


@pytest.mark.edge_pythons
def test_signal_reaches_the_blocked_main_thread_other_modes(python, tmp_path):
    prog = [python.exe, PROGRAMS / "sigdeliver.py", PART_ROUNDS] + PART
    plain = run(prog, env=plain_env())
    for mode, opts in sorted(EDGE_MODES.items()):
        rec = [STRATA, "record", "-q", "-o", tmp_path / (mode + ".strata")] + opts + ["--"]
        profiled = run(rec + prog)
        check(plain, profiled, mode, retry=lambda sc, n: run(rec + [python.exe, PROGRAMS / "sigdeliver.py", n] + sc))


@pytest.mark.edge_pythons
def test_signal_reaches_the_blocked_main_thread_after_attach(python, tmp_path):
    """The program's handlers are in place when the agent is loaded into
    it (an agent loaded with dlopen cannot see later sigaction() calls)."""
    go = tmp_path / "go"
    prog = [python.exe, PROGRAMS / "sigdeliver.py", PART_ROUNDS, "early", "go=%s" % go] + PART
    plain = run(prog[:4] + PART, env=plain_env())
    p = subprocess.Popen([str(c) for c in prog], env=plain_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        out = tmp_path / "attached.strata"
        # A load can find no thread at a safe point in its time on a
        # loaded machine (it says so and changes nothing): again.
        for _ in range(5):
            rec = subprocess.Popen([str(STRATA), "record", "--pid", str(p.pid), "-o", str(out)],
                                   stderr=subprocess.PIPE, text=True)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and rec.poll() is None:
                st = strata("ctl", p.pid, "status")
                if st.returncode == 0 and re.search(r"^sampling\s+on$", st.stdout, re.M):
                    break
                time.sleep(0.1)
            if rec.poll() is None:
                break
            err = rec.stderr.read()
            assert "reached a safe point" in err, err
        go.write_text("")
        stdout, stderr = p.communicate(timeout=600)
        assert p.returncode == 0, stderr
        _, rerr = rec.communicate(timeout=120)
        assert rec.returncode == 0, (rec.returncode, rerr, stderr)
    finally:
        if p.poll() is None:
            p.kill()
    profiled = {r["scenario"]: r for r in (json.loads(l) for l in stdout.splitlines() if l.startswith("{"))}
    check(plain, profiled, "attach")
    assert json.loads(strata("report", "--json", out).stdout)["samples"] > 0


@pytest.mark.edge_pythons
@pytest.mark.parametrize("mode", ["cpu", "wall"])
def test_signal_sent_during_a_sample_reaches_the_main_thread(python, tmp_path, mode):
    """A signal sent to the process while the main thread is in our sample
    handler (which blocks it) goes to another thread, which must pass it on
    to the main thread when the code the sample interrupted does not block
    it. The main thread's slot was not in the tid table that question was
    asked of (only a dlopen'ed agent's threads were), so the sleeping
    thread saw every signal blocked and ran the handler itself: a SIGCHLD
    that came as the wall sampler signalled the main thread, just woken in
    its read(), left the read blocked (test_signal_reaches_the_blocked_-
    main_thread[3.8] in CI, 1 round in 100-300 here).

    programs/native/sigwhere.c computes in its main thread while a child
    sends it 3000 SIGUSR1s; its handler has SA_NODEFER, so the main
    thread never blocks the signal itself, and without strata every one
    runs there (the kernel picks another thread only for a main thread
    that blocks it, or that is off its CPU with another signal pending:
    rare, so a few are allowed, beside the run without strata). At 10 kHz
    the build without the fix ran 60-970 of them elsewhere, idle or
    loaded, in either mode."""
    exe = build_embedding(python, "sigwhere.c", tmp_path)
    if exe is None:
        pytest.skip("Python %s has no python-config to embed it with" % python.version)

    def counts(out):
        m = re.search(r"^main (\d+) elsewhere (\d+)$", out, re.M)
        assert m, out
        return int(m.group(1)), int(m.group(2))

    plain = subprocess.run([str(exe), "3000"], capture_output=True, text=True, timeout=300, env=plain_env())
    assert plain.returncode == 0, plain.stderr
    _, plain_elsewhere = counts(plain.stdout)
    p = subprocess.run([str(STRATA), "record", "-q", "-o", str(tmp_path / "w.strata"), "--mode", mode, "-F", "10000",
                        "--", str(exe), "3000"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    main, elsewhere = counts(p.stdout)
    assert main >= 500, p.stdout
    assert elsewhere <= 5 + plain_elsewhere, "%d of %d signals ran their handler outside the main thread " \
        "(%d without strata)" % (elsewhere, main + elsewhere, plain_elsewhere)
    assert json.loads(strata("report", "--json", tmp_path / "w.strata").stdout)["samples"] > 0


@pytest.mark.edge_pythons
@pytest.mark.parametrize("mode", ["wall", "cpu"])
def test_pause_not_cut_short_when_the_program_handles_sigprof(python, tmp_path, mode):
    """A program with a SIGPROF handler of its own gets no SIGPROF held
    around its blocking calls (it may wait for its own), so a sample could
    land in its pause(), which no handler's SA_RESTART restarts: signal.pause()
    returned before the SIGALRM it waited for (CPython's
    test_signal.test_itimer_real after test_itimer_prof, wall mode: 12 of
    900 pauses here). A pause() cut short by samples alone is made again."""
    cmd = [python.exe, PROGRAMS / "pause_prof.py", "300"]
    # The run without strata goes on beside the profiled one (each pauses
    # for a third of its time): the test takes one run's time, not two.
    alone = subprocess.Popen([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=plain_env())
    rec = [STRATA, "record", "-q", "-o", tmp_path / "p.strata", "--mode", mode, "--"]
    p = subprocess.run([str(c) for c in rec + cmd], capture_output=True, text=True, timeout=120)
    out, err = alone.communicate(timeout=120)
    plain = subprocess.CompletedProcess(alone.args, alone.returncode, out, err)
    assert plain.returncode == 0 and " early: 0 " in plain.stdout, plain.stdout + plain.stderr
    assert p.returncode == 0, p.stderr
    assert p.stdout == plain.stdout, (p.stdout, plain.stdout)
    assert json.loads(strata("report", "--json", tmp_path / "p.strata").stdout)["samples"] > 0


PYTEST_TIMEOUT_SUITE = '''
import select, threading, time

def spin(stop):
    while not stop.is_set():
        sum(range(1000))

def run(wait):
    stop = threading.Event()
    t = threading.Thread(target=spin, args=(stop,), daemon=True)
    t.start()
    try:
        wait()
    finally:
        stop.set()

def test_sleep():
    run(lambda: time.sleep(30))

def test_event():
    run(lambda: threading.Event().wait(30))

def test_select():
    run(lambda: select.select([], [], [], 30))

def test_lock():
    lock = threading.Lock()
    lock.acquire()
    run(lambda: lock.acquire(timeout=30))
'''


def pytest_venv(interp):
    """The interpreter of this version's pytest virtualenv (pytest and
    pytest-timeout from PyPI, made by scripts/pyenvs.sh, and in the sid
    root by scripts/sidroot.sh)."""
    v = VENVS / "pytest" / interp.version / "bin" / "python"
    if not v.exists():
        if os.path.exists("/.strata-sidroot-rev") or not shutil.which("pyenv"):
            pytest.skip("no pytest virtualenv for Python %s here (PyPI could not be reached when "
                        "scripts/pyenvs.sh or scripts/sidroot.sh made them)" % interp.version)
        pytest.fail("no pytest virtualenv %s: scripts/pyenvs.sh makes it" % v)
    return v


def call_durations(out):
    return {m.group(2): float(m.group(1)) for m in re.finditer(r"^([\d.]+)s call\s+\S+::(\w+)", out, re.M)}


@pytest.mark.edge_pythons
def test_pytest_timeout_fires_on_time(python, tmp_path):
    """pytest with pytest-timeout's default (signal) method: a test that
    sleeps past its timeout while a thread computes fails on time under
    strata record, in cpu and wall mode, as without it (SIGALRM of
    setitimer, whose handler raises in the main thread)."""
    py = pytest_venv(python)
    (tmp_path / "test_slow.py").write_text(PYTEST_TIMEOUT_SUITE)
    cmd = [py, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--timeout=0.5", "--durations=0", "test_slow.py"]
    runs = {}
    for name, opts in (("plain", None), ("cpu", ["--mode", "cpu"]), ("wall", ["--mode", "wall"])):
        full = cmd if opts is None else [STRATA, "record", "-q", "-o", tmp_path / (name + ".strata")] + opts + ["--"] + cmd
        p = subprocess.run([str(c) for c in full], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                           env=plain_env() if opts is None else None)
        assert p.returncode == 1, (name, p.stdout[-3000:], p.stderr[-2000:])
        assert "4 failed" in p.stdout, (name, p.stdout[-3000:])
        assert p.stdout.count("Failed: Timeout (>0.5s) from pytest-timeout") >= 4, (name, p.stdout[-3000:])
        runs[name] = call_durations(p.stdout)
        assert set(runs[name]) == {"test_sleep", "test_event", "test_select", "test_lock"}, (name, p.stdout[-3000:])
    for name in ("cpu", "wall"):
        for test, secs in runs[name].items():
            # 0.5 s and what the main thread waits for the GIL after (the
            # bug this guards against made it seconds).
            assert secs < runs["plain"][test] + 1.0 and secs < 2.5, (name, test, runs)
