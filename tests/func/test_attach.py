"""Attaching to a Python process started without strata: record --pid,
ctl, a second attach reusing the loaded agent, the target's output and exit
status unchanged, signals kept, and the errors."""
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import PROGRAMS, STRATA, assert_split, assert_window_samples, cpu_ms, func_row, plain_env, strata
from test_stack import build_ext, end

# Through ptrace (a thread borrowed), or on 3.14+ through the interpreter's
# own hook (PEP 768).
LOADED_RE = re.compile(r"strata: loaded the agent into process (\d+) (?:\(thread (\d+) borrowed for ([\d.]+) ms|"
                       r"through the interpreter's remote debugging hook)")
PTRACE_RE = re.compile(r"strata: loaded the agent into process (\d+) \(thread (\d+) borrowed for ([\d.]+) ms, "
                       r"after [\d.]+ ms waiting for a safe point\)"
                       r"(?:; not through PEP 768: (.*))?$", re.M)
PEP768_RE = re.compile(r"strata: loaded the agent into process (\d+) through the interpreter's remote debugging hook "
                       r"\(PEP 768, as sys.remote_exec\), in [\d.]+ ms$", re.M)


def plain(python, *args, extra_env=None, **kw):
    """A process started without strata: no preload, no STRATA_* variables
    (extra_env: variables of the test's own)."""
    env = plain_env(**(extra_env or {}))
    return subprocess.Popen([str(python.exe)] + [str(a) for a in args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


def stoppable(tmp_path):
    """For a program that ends early, as it would have ended, once the file
    named by STOP_FILE exists (split.py, threads4.py): its environment, and
    the file to create once the test has what it needs. Its duration stays
    the upper bound that outlasts the attach on a loaded machine."""
    stop = tmp_path / "stop"
    return {"STOP_FILE": str(stop)}, stop


def maps_agent(pid):
    return "libstrata-agent.so" in Path("/proc/%d/maps" % pid).read_text()


def status(pid):
    r = strata("ctl", pid, "status")
    assert r.returncode == 0, r.stderr
    return dict(re.split(r"\s+", l, maxsplit=1) if " " in l else (l, "") for l in r.stdout.splitlines())


def test_attach_split(python, tmp_path):
    """record --pid on a plain split.py gets its 3:1 split; the agent stays
    loaded with sampling off, a second attach (ended by Ctrl-C) reuses it,
    and the program ends as it would have: no output, exit status 0."""
    env, stop = stoppable(tmp_path)
    p = plain(python, PROGRAMS / "split.py", 8, extra_env=env)
    try:
        time.sleep(0.3)
        assert not maps_agent(p.pid)
        out = tmp_path / "attached.strata"
        t0, c0 = time.monotonic(), cpu_ms(p.pid)
        r = strata("record", "--pid", p.pid, "-d", "2", "-o", out, timeout=120)
        wall, cpu = 1000 * (time.monotonic() - t0), cpu_ms(p.pid) - c0
        assert r.returncode == 0, r.stderr
        m = LOADED_RE.search(r.stderr)
        assert m and int(m.group(1)) == p.pid, r.stderr
        rep = strata("report", "--json", out)
        assert rep.returncode == 0 and "warning" not in rep.stderr, rep.stderr
        data = json.loads(rep.stdout)
        # CPU time over 2 s of wall time on a shared 2-core machine.
        assert_window_samples(data["samples"], cpu, "record --pid -d 2", wall, data["duration_s"])
        heavy, light = func_row(data, "heavy")["self"], func_row(data, "light")["self"]
        assert_split((heavy, light), (3, 1), "heavy:light")
        assert str(PROGRAMS / "split.py") in data["command"]

        # Detached: running, agent loaded, sampling off, no output.
        assert p.poll() is None and maps_agent(p.pid)
        st = status(p.pid)
        assert st["sampling"] == "off" and st["output"] == "" and st["loaded"] == "dlopen", st

        # Again, until Ctrl-C: the loaded agent is reused (no second load).
        out2 = tmp_path / "again.strata"
        t0, c0 = time.monotonic(), cpu_ms(p.pid)
        rec = subprocess.Popen([str(STRATA), "record", "--pid", str(p.pid), "-o", str(out2)],
                               stderr=subprocess.PIPE, text=True)
        time.sleep(1.5)
        rec.send_signal(signal.SIGINT)
        _, err2 = rec.communicate(timeout=30)
        wall, cpu = 1000 * (time.monotonic() - t0), cpu_ms(p.pid) - c0
        assert rec.returncode == 0, err2
        assert not LOADED_RE.search(err2), err2
        # Against the CPU time it had, not a fixed count: 85 samples once,
        # in the sid root under make check's last stage.
        data = json.loads(strata("report", "--json", out2).stdout)
        assert_window_samples(data["samples"], cpu, "record --pid until Ctrl-C", wall, data["duration_s"])
        assert Path("/proc/%d/maps" % p.pid).read_text().count("libstrata-agent.so") >= 1
        stop.touch()
    finally:
        out, err = p.communicate(timeout=120)
    assert (p.returncode, out, err) == (0, "", ""), (p.returncode, out, err)


def slow_loader(tmp_path, ms):
    """Environment that holds a program in its dynamic loader, before its
    libraries are mapped, for ms milliseconds (an LD_AUDIT library)."""
    so = tmp_path / "slowloader.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-nostdlib", "-o", str(so),
                    str(PROGRAMS / "native" / "slowloader.c")], check=True)
    return {"LD_AUDIT": str(so), "SLOWLOADER_MS": str(ms)}


def test_attach_while_loading(python, tmp_path):
    """A process attached to just after its exec, while its dynamic loader has
    not mapped libpython or the C library yet (as a test starting a program and
    attaching at once can catch it), is waited for: the attach succeeds and
    records, and the program ends as it would have. Past the attach's time
    budget the error says the process is still starting, not that it is no
    Python."""
    env, stop = stoppable(tmp_path)
    p = plain(python, PROGRAMS / "split.py", 3, extra_env=dict(env, **slow_loader(tmp_path, 1000)))
    try:
        time.sleep(0.1)
        assert "libc.so.6" not in Path("/proc/%d/maps" % p.pid).read_text()
        out = tmp_path / "early.strata"
        r = strata("record", "--pid", p.pid, "-d", "1.5", "-o", out, timeout=120)
        assert r.returncode == 0, r.stderr
        assert LOADED_RE.search(r.stderr), r.stderr
        data = json.loads(strata("report", "--json", out).stdout)
        assert func_row(data, "heavy")["self"] > 50, data["samples"]
    finally:
        stop.touch()
        o, e = p.communicate(timeout=120)
    assert (p.returncode, o, e) == (0, "", ""), (p.returncode, o, e)

    # Held in its loader past the attach's budget, then let go (STOP_FILE
    # ends the loader's wait and split.py at once).
    stop.unlink()
    q = plain(python, PROGRAMS / "split.py", 1, extra_env=dict(env, **slow_loader(tmp_path, 30000)))
    try:
        time.sleep(0.1)
        r = strata("record", "--pid", q.pid, "-d", "1", "-o", tmp_path / "late.strata", timeout=120)
        assert r.returncode != 0 and "is still starting" in r.stderr, r.stderr
        assert "not a CPython" not in r.stderr and "no GNU C library" not in r.stderr, r.stderr
        assert "libc.so.6" not in Path("/proc/%d/maps" % q.pid).read_text()
    finally:
        stop.touch()
        o, e = q.communicate(timeout=120)
    assert (q.returncode, o, e) == (0, "", ""), (q.returncode, o, e)


@pytest.mark.edge_pythons
def test_attach_while_starting_on_a_busy_cpu(python, tmp_path):
    """Attached to as it starts, on a CPU it shares with three busy loops:
    its start-up (the loader, then Py_Initialize and site's imports) takes
    four times as long, and the attach lands in it. On 3.14+ the
    interpreter runs a PEP 768 request at its first safe point, start-up's
    included, where importlib or os may be half made (the script could not
    run, and CPython printed its traceback into the program's stderr):
    strata asks once the interpreter is initialized, and asks again while a
    module is being imported. The attach records, and the program's
    output is its own."""
    cpu = max(os.sched_getaffinity(0))

    def pin():
        os.sched_setaffinity(0, {cpu})

    hogs = [subprocess.Popen(["sh", "-c", "while :; do :; done"], preexec_fn=pin) for _ in range(3)]
    try:
        p = plain(python, PROGRAMS / "split.py", 1, extra_env=slow_loader(tmp_path, 300), preexec_fn=pin)
        try:
            time.sleep(0.1)
            out = tmp_path / "starved.strata"
            r = strata("record", "--pid", p.pid, "-d", "1", "-o", out, timeout=120)
            assert r.returncode == 0 and LOADED_RE.search(r.stderr), r.stderr
            data = json.loads(strata("report", "--json", out).stdout)
            assert func_row(data, "heavy")["self"] > 10, data["samples"]
        finally:
            o, e = p.communicate(timeout=120)
        assert (p.returncode, o, e) == (0, "", ""), (p.returncode, o, e)
    finally:
        for h in hogs:
            h.kill()
            h.wait()


def test_attach_stuck_in_c_and_ctl(python, tmp_path):
    """A process spinning in C with the GIL can be attached to: its samples fall in the Python function that made the
    call, and strata stack still reads it afterwards."""
    build_ext(python, tmp_path)
    p = plain(python, PROGRAMS / "stuck.py", tmp_path)
    try:
        assert p.stdout.readline() == "ready\n"
        out = tmp_path / "stuck.strata"
        r = strata("record", "--pid", p.pid, "-d", "1.5", "-o", out, timeout=120)
        assert r.returncode == 0, r.stderr
        assert LOADED_RE.search(r.stderr), r.stderr
        data = json.loads(strata("report", "--json", out).stdout)
        spin = func_row(data, "spin")
        assert spin["total"] >= 0.9 * data["samples"] > 0, (spin, data["samples"])
        st = status(p.pid)
        assert st["sampling"] == "off" and st["loaded"] == "dlopen", st
        r = strata("stack", "--json", p.pid)
        assert r.returncode == 0, r.stderr
        main = [t for t in json.loads(r.stdout)["threads"] if t["main"]][0]
        assert main["frames"][-1]["function"] == "spin", main
        assert p.poll() is None
    finally:
        out, err = end(p)
    assert (out, err) == ("", ""), (out, err)


def test_ctl_load(debian_python):
    """ctl PID load loads the agent into a plain process, in standby; a
    second load finds it running; other ctl commands before it load nothing."""
    p = plain(debian_python, PROGRAMS / "split.py", 30)
    try:
        time.sleep(0.3)
        r = strata("ctl", p.pid, "stop")
        assert r.returncode == 2 and "has no strata agent" in r.stderr, r.stderr
        assert not maps_agent(p.pid), "ctl stop loaded the agent"
        r = strata("ctl", p.pid, "load")
        assert r.returncode == 0 and LOADED_RE.search(r.stderr), (r.stdout, r.stderr)
        assert "agent loaded, sampling off" in r.stdout, r.stdout
        r = strata("ctl", p.pid, "load")
        assert r.returncode == 0 and not LOADED_RE.search(r.stderr) and "already running" in r.stdout, r.stdout
        st = status(p.pid)
        assert st["sampling"] == "off" and st["loaded"] == "dlopen" and st["output"] == "", st
    finally:
        p.kill()
        p.communicate()


SIGPROG = r"""
import os, signal, sys, time
got = 0
def on_usr1(sig, frame):
    # os.write, not print: a handler that prints can be re-entered inside
    # its own flush (which runs pending handlers), with or without strata.
    global got
    got += 1
    os.write(1, b"got %d\n" % got)
signal.signal(signal.SIGUSR1, on_usr1)
print("ready", flush=True)
end = time.time() + 120
while time.time() < end:
    sum(range(1000))
    time.sleep(0.0005)
"""


def test_attach_keeps_signals(debian_python, tmp_path):
    """Signals sent one after another while the agent is being loaded and
    recorded are each delivered once."""
    prog = tmp_path / "sig.py"
    prog.write_text(SIGPROG)
    p = plain(debian_python, prog)
    try:
        assert p.stdout.readline() == "ready\n"
        rec = subprocess.Popen([str(STRATA), "record", "--pid", str(p.pid), "-d", "2", "-o",
                                str(tmp_path / "sig.strata")], stderr=subprocess.PIPE, text=True)
        i = 0
        while rec.poll() is None or i < 50:
            i += 1
            os.kill(p.pid, signal.SIGUSR1)
            assert p.stdout.readline() == "got %d\n" % i
        _, err = rec.communicate(timeout=30)
        assert rec.returncode == 0 and LOADED_RE.search(err), err
        assert p.poll() is None
    finally:
        p.kill()
        p.communicate()


def test_attach_no_safe_point(debian_python, tmp_path):
    """A process whose only thread waits in flock() (a call strata does not
    borrow a thread in) is left alone: one line saying why, and it goes on
    exactly as before once the lock is free."""
    import fcntl
    lock = tmp_path / "lock"
    lock.write_text("")
    fd = os.open(lock, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    p = plain(debian_python, "-c", "import fcntl, sys; f = open(sys.argv[1]); print('locking', flush=True); "
              "fcntl.flock(f, fcntl.LOCK_EX); print('locked', flush=True); sys.exit(3)", lock)
    try:
        assert p.stdout.readline() == "locking\n"
        time.sleep(0.3)
        t0 = time.time()
        r = strata("record", "--pid", p.pid, "-d", "1", "-o", tmp_path / "x.strata", timeout=60)
        assert r.returncode != 0, r.stderr
        assert len(r.stderr.splitlines()) == 1, r.stderr
        assert "no thread of process %d reached a safe point" % p.pid in r.stderr, r.stderr
        assert "thread %d is in the system call flock" % p.pid in r.stderr, r.stderr
        assert "nothing was changed in it: try again" in r.stderr
        assert time.time() - t0 < 20
        assert not maps_agent(p.pid)
    finally:
        os.close(fd)
        out, err = p.communicate(timeout=30)
    assert (p.returncode, out, err) == (3, "locked\n", ""), (p.returncode, out, err)


def test_attach_errors(debian_python, tmp_path):
    sl = subprocess.Popen(["sleep", "300"])
    try:
        r = strata("record", "--pid", sl.pid, "-d", "1", "-o", tmp_path / "x.strata")
        assert r.returncode != 0 and "is not a CPython process" in r.stderr, r.stderr
        assert len(r.stderr.splitlines()) == 1, r.stderr
        assert not maps_agent(sl.pid)
    finally:
        sl.kill()
        sl.wait()
    p = plain(debian_python, "-c", "import time; print('up', flush=True); time.sleep(300)")
    try:
        assert p.stdout.readline() == "up\n"
        empty = tmp_path / "noagent"
        empty.mkdir()
        r = strata("record", "--pid", p.pid, "-d", "1", "-o", tmp_path / "x.strata",
                   env=dict(os.environ, STRATA_AGENT_DIR=str(empty)))
        assert r.returncode != 0 and "make PYTHONS=" in r.stderr, r.stderr
        assert len(r.stderr.splitlines()) == 1, r.stderr
        r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", str(STRATA), "top",
                            "--pid", str(p.pid)], capture_output=True, text=True, timeout=60)
        assert r.returncode != 0 and "permission denied" in r.stderr, r.stderr
        assert len(r.stderr.splitlines()) == 1, r.stderr
        assert not maps_agent(p.pid)
        assert p.poll() is None
    finally:
        p.kill()
        p.communicate()


def test_attach_no_process(tmp_path):
    """A pid that names no process: one line, exit status 2, for record,
    top and ctl load alike."""
    pid = 4194303  # above every default pid_max
    for args in (["record", "--pid", pid, "-d", "1", "-o", tmp_path / "x.strata"], ["top", "--pid", pid],
                 ["ctl", pid, "load"]):
        r = strata(*args, timeout=60)
        assert r.returncode == 2 and r.stderr == "strata: no process %d\n" % pid, (args, r.returncode, r.stderr)
    assert not (tmp_path / "x.strata").exists()


def test_top_pid_loads_agent(debian_python):
    """top --pid on a plain process loads the agent and shows the split;
    Ctrl-C leaves the process running with sampling off."""
    p = plain(debian_python, PROGRAMS / "split.py", 60)
    try:
        time.sleep(0.3)
        top = subprocess.Popen([str(STRATA), "top", "--pid", str(p.pid), "--no-curses", "-i", "1", "-n", "4"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(3)
        top.send_signal(signal.SIGINT)
        out, err = top.communicate(timeout=30)
        assert LOADED_RE.search(err), err
        assert re.search(r"^\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+heavy\s+split.py:10", out, re.M), out
        assert p.poll() is None
        st = status(p.pid)
        assert st["sampling"] == "off" and st["output"] == "", st
    finally:
        p.kill()
        p.communicate()


def test_attach_allocating_threads(python, tmp_path):
    """Threads that allocate all the time (the allocator's locks held at
    any moment): the load waits for a safe point, and every process ends
    as it would have (output, exit status 5)."""
    for i in range(2):
        p = plain(python, PROGRAMS / "alloc_threads.py", 3)
        try:
            time.sleep(0.2 + 0.3 * i)
            r = strata("record", "--pid", p.pid, "-d", "1", "-o", tmp_path / ("a%d.strata" % i), timeout=120)
            assert r.returncode == 0 and LOADED_RE.search(r.stderr), r.stderr
            assert re.search(r"strata: \d+ samples, 1 process, 4 threads, 0 dropped", r.stderr), r.stderr
        finally:
            out, err = p.communicate(timeout=120)
        assert (p.returncode, out, err) == (5, "done\n", ""), (p.returncode, out, err)


def test_attach_stopped_process(debian_python, tmp_path):
    p = plain(debian_python, "-c", "import time; print('up', flush=True); time.sleep(300)")
    try:
        assert p.stdout.readline() == "up\n"
        os.kill(p.pid, signal.SIGSTOP)
        # The stop takes effect when the kernel delivers it: wait for it.
        for _ in range(500):
            if "State:\tT" in Path("/proc/%d/status" % p.pid).read_text():
                break
            time.sleep(0.01)
        r = strata("record", "--pid", p.pid, "-d", "1", "-o", tmp_path / "x.strata")
        assert r.returncode != 0 and "is stopped (job control" in r.stderr, r.stderr
        assert Path("/proc/%d/status" % p.pid).read_text().count("State:\tT") == 1
        # strata stack reads it, and leaves it stopped.
        r = strata("stack", "--json", p.pid)
        assert r.returncode == 0, r.stderr
        # The detach wakes a thread in group stop for a moment, to stop
        # again (the kernel's ptrace_unlink): R can be read just after.
        for _ in range(200):
            if "State:\tT" in Path("/proc/%d/status" % p.pid).read_text():
                break
            time.sleep(0.01)
        assert "State:\tT" in Path("/proc/%d/status" % p.pid).read_text()
        assert not maps_agent(p.pid)
    finally:
        p.kill()
        p.communicate()


# ---- every feature of a preloaded agent, after an attach ----------------------

def marker_line(path, marker):
    for i, line in enumerate(Path(path).read_text().splitlines(), 1):
        if marker in line:
            return i
    raise AssertionError("no %s in %s" % (marker, path))


def test_attach_wall_mode(python, tmp_path):
    """--mode wall on a plain threads4.py: the agent is loaded in wall mode
    and every thread that existed before the attach is sampled at the
    rate, running or blocked; the blocked ones (found by a scan: read from
    outside by their kernel thread id) with their Python stacks."""
    env, stop = stoppable(tmp_path)
    p = plain(python, PROGRAMS / "threads4.py", 12, extra_env=env)
    try:
        time.sleep(0.5)
        out = tmp_path / "wall.strata"
        r = strata("record", "--pid", p.pid, "-d", "2", "--mode", "wall", "-o", out, timeout=120)
        assert r.returncode == 0 and LOADED_RE.search(r.stderr), r.stderr
        data = json.loads(strata("report", "--json", out).stdout)
        assert data["mode"] == "wall"
        threads = data["threads"]
        assert len(threads) == 5, threads
        most = max(t["samples"] for t in threads)
        # About 2000 each (2 s at 1000 Hz); busy threads lose ticks on a
        # loaded machine (README, "Limitations"), as when preloaded: a
        # busy one had 0.32 of the most under make check's load.
        for t in threads:
            assert t["samples"] > 300 and t["samples"] > 0.2 * most, (t, threads)
        main = [t for t in threads if t["tid"] == p.pid][0]
        assert main["idle"] > 0.9 * main["samples"], main
        # The two sleepers: nearly all idle, every idle sample in sleepy().
        sleepers = sorted((t for t in threads if t is not main), key=lambda t: t["idle"])[-2:]
        for t in sleepers:
            assert t["idle"] > 0.9 * t["samples"], threads
        assert func_row(data, "sleepy")["total"] >= 0.9 * sum(t["samples"] for t in sleepers), \
            (func_row(data, "sleepy"), sleepers)
        assert func_row(data, "busy")["total"] > 300
        st = status(p.pid)
        assert st["mode"] == "wall" and st["sampling"] == "off", st
        stop.touch()
    finally:
        out, err = p.communicate(timeout=120)
    assert (p.returncode, out, err) == (0, "", ""), (p.returncode, out, err)


def test_attach_native(python, tmp_path):
    """--native on a process spinning in C: the C function (with its
    source line) is under the Python line that called it."""
    build_ext(python, tmp_path)
    p = plain(python, PROGRAMS / "stuck.py", tmp_path)
    try:
        assert p.stdout.readline() == "ready\n"
        out = tmp_path / "native.strata"
        # Under make check's load the target may get a fraction of a CPU:
        # enough samples for the shares, not a count per second of -d.
        # (No CPU-time bound: the program burns in C, where 3.14+'s remote
        # execution waits for it in vain, up to 2 s, before ptrace.)
        r = strata("record", "--pid", p.pid, "-d", "2", "--native", "-o", out, timeout=120)
        assert r.returncode == 0 and LOADED_RE.search(r.stderr), r.stderr
        data = json.loads(strata("report", "--json", out).stdout)
        burn = func_row(data, "burn_c")
        assert data["samples"] >= 20, data["samples"]
        assert burn["kind"] == "native" and burn["total"] >= 0.9 * data["samples"], (burn, data["samples"])
        folded = strata("convert", out, "-f", "collapsed", "-o", "-").stdout
        stuck = marker_line(PROGRAMS / "stuck.py", "# STUCK")
        under = sum(int(l.rsplit(" ", 1)[1]) for l in folded.splitlines()
                    if re.search(r"spin \([^)]*stuck\.py:%d\);burn_c \([^)]*ext\.c:\d+\) \d+$" % stuck, l))
        assert under >= 0.9 * data["samples"], folded[:2000]
        assert status(p.pid)["native"] == "1"
    finally:
        out, err = end(p)
    assert (out, err) == ("", ""), (out, err)


@pytest.mark.edge_pythons
def test_attach_events_and_fixed_settings(python, tmp_path):
    """-e task-clock: samples by the event, counts per function in the
    3:1 split. The settings stay the agent's: an attach that asks for
    others is refused (one line, naming them), one that asks for none
    takes them."""
    p = plain(python, PROGRAMS / "split.py", 30)
    try:
        time.sleep(0.3)
        out = tmp_path / "ev.strata"
        # -d 3: 143 samples in 2 s were seen under make check's load.
        t0, c0 = time.monotonic(), cpu_ms(p.pid)
        r = strata("record", "--pid", p.pid, "-d", "3", "-e", "task-clock", "-o", out, timeout=120)
        wall, cpu = 1000 * (time.monotonic() - t0), cpu_ms(p.pid) - c0
        assert r.returncode == 0 and LOADED_RE.search(r.stderr), r.stderr
        data = json.loads(strata("report", "--json", out).stdout)
        assert [e["name"] for e in data["events"]] == ["task-clock"], data["events"]
        heavy, light = func_row(data, "heavy"), func_row(data, "light")
        # task-clock's default period is 1 ms of the thread's CPU time.
        assert_window_samples(data["samples"], cpu, "record --pid -e task-clock", wall, data["duration_s"])
        assert_split((heavy["self"], light["self"]), (3, 1), "heavy:light samples")
        # The counts split as the samples do (each sample carries about
        # one period of the event).
        hc, lc = heavy["events"]["task-clock"]["self"], light["events"]["task-clock"]["self"]
        assert abs(hc / (hc + lc) - heavy["self"] / (heavy["self"] + light["self"])) <= 0.05, \
            (hc, lc, heavy["self"], light["self"])

        for opts in (["--mode", "wall"], ["--native"], ["-e", "task-clock", "--native"]):
            r = strata("record", "--pid", p.pid, "-d", "1", "-o", tmp_path / "x.strata", *opts)
            assert r.returncode == 2 and len(r.stderr.splitlines()) == 1, (opts, r.stderr)
            assert "agent samples with --mode cpu -e task-clock, fixed when it was loaded" in r.stderr, r.stderr
        r = strata("record", "--pid", p.pid, "-d", "1", "-o", tmp_path / "again.strata")
        assert r.returncode == 0, r.stderr
        again = json.loads(strata("report", "--json", tmp_path / "again.strata").stdout)
        assert [e["name"] for e in again["events"]] == ["task-clock"] and again["samples"] > 50, again["samples"]
        assert p.poll() is None
    finally:
        p.kill()
        p.communicate()


JIT_PROG = r"""
import math, sys, time
import numpy as np
from numba import njit

@njit
def kernel(a, reps):
    s = 0.0
    for r in range(reps):
        for i in range(a.shape[0]):
            t = math.exp(-a[i]) * math.sin(a[i] + r) * math.log1p(a[i] + 1.0) * math.atan(a[i] * r + 0.5)  # HOT
            s += t  # COLD
    return s

a = np.linspace(0.0, 1.0, 10000)
kernel(a, 1)
print("ready", flush=True)
end = time.time() + 60
while time.time() < end:
    kernel(a, 50)  # CALLER
"""


def test_attach_jit_lines(debian_python, tmp_path):
    """--jit-lines on a Numba program started with NUMBA_DEBUGINFO=1 (and
    without strata): the JIT code's samples fall on its HOT line. On one
    started without it, a one-line error before anything is loaded."""
    exe = debian_python.with_module("numba")
    prog = tmp_path / "jitprog.py"
    prog.write_text(JIT_PROG)
    env = plain_env()
    p = subprocess.Popen([str(exe), str(prog)], env=dict(env, NUMBA_DEBUGINFO="1"), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline() == "ready\n", p.stderr.read()
        out = tmp_path / "jit.strata"
        r = strata("record", "--pid", p.pid, "-d", "3", "--jit-lines", "-o", out, timeout=120)
        assert r.returncode == 0 and LOADED_RE.search(r.stderr), r.stderr
        data = json.loads(strata("report", "--json", out).stdout)
        kernels = [f for f in data["functions"] if f["kind"] == "jit" and f["name"].startswith("__main__.kernel(")]
        kernel = kernels[0]
        lines = [l for l in data["lines"] if l["function"] == kernel["name"]]
        total = sum(l["self"] for l in lines)
        hot = sum(l["self"] for l in lines if l["line"] == marker_line(prog, "# HOT"))
        assert total > 500 and all(l["kind"] == "jit" for l in lines), lines
        assert hot >= 0.8 * total, (hot, total, lines)
    finally:
        p.kill()
        p.communicate()
    p = subprocess.Popen([str(exe), str(prog)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline() == "ready\n", p.stderr.read()
        r = strata("record", "--pid", p.pid, "-d", "1", "--jit-lines", "-o", tmp_path / "x.strata")
        assert r.returncode == 2 and len(r.stderr.splitlines()) == 1, r.stderr
        assert "not started with NUMBA_DEBUGINFO=1" in r.stderr, r.stderr
        assert not maps_agent(p.pid)
    finally:
        p.kill()
        p.communicate()


FORK_PROG = r"""
import os, subprocess, sys, time

def burn(seconds):
    end = time.process_time() + seconds
    s = 0
    while time.process_time() < end:
        for i in range(10_000):
            s += i * i
    return s

def child_work():
    return burn(1.0)

def parent_work():
    return burn(1.0)

print("ready", flush=True)
sys.stdin.readline()
pid = os.fork()
if pid == 0:
    child_work()
    print("child up", flush=True)
    while not os.path.exists(sys.argv[1]):
        time.sleep(0.05)
    os._exit(7)
parent_work()
_, st = os.waitpid(pid, 0)
print("child", os.WEXITSTATUS(st), flush=True)
"""


def test_attach_fork_child(python, tmp_path):
    """A process forked after the attach is recorded into the same file,
    under its own pid, and detached with its parent at the end: both run
    on with sampling off, and end as they would have."""
    prog = tmp_path / "forker.py"
    prog.write_text(FORK_PROG)
    done = tmp_path / "done"
    p = plain(python, prog, done, stdin=subprocess.PIPE)
    try:
        assert p.stdout.readline() == "ready\n"
        out = tmp_path / "fork.strata"
        rec = subprocess.Popen([str(STRATA), "record", "--pid", str(p.pid), "-o", str(out)], stderr=subprocess.PIPE,
                               text=True)
        assert LOADED_RE.search(rec.stderr.readline())
        assert "strata: recording process" in rec.stderr.readline()
        p.stdin.write("go\n")
        p.stdin.flush()
        assert p.stdout.readline() == "child up\n"
        child = int(subprocess.run(["pgrep", "-P", str(p.pid), "-f", str(prog)], capture_output=True,
                                   text=True).stdout.split()[0])
        time.sleep(0.5)
        rec.send_signal(signal.SIGINT)
        _, err = rec.communicate(timeout=60)
        assert rec.returncode == 0, err
        assert re.search(r"strata: \d+ samples, 2 processes, 2 threads", err), err
        data = json.loads(strata("report", "--json", out).stdout)
        procs = {q["pid"]: q for q in data["processes"]}
        assert set(procs) == {p.pid, child}, procs
        assert procs[child]["ppid"] == p.pid and procs[child]["samples"] > 300, procs
        assert func_row(data, "child_work")["total"] > 300
        # Both detached, still running.
        for pid in (p.pid, child):
            st = status(pid)
            assert st["sampling"] == "off" and st["output"] == "", (pid, st)
        done.write_text("")
        out_, err_ = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    assert (p.returncode, out_, err_) == (0, "child 7\n", ""), (p.returncode, out_, err_)


# ---- CPython 3.14+: the interpreter's own hook (PEP 768) ----------------------

PEP768_PROG = r"""
import os, sys, threading, time
before = dict(sys.modules)
importers = dict(sys.path_importer_cache)
def burn():
    s = 0
    for i in range(100_000):
        s += i * i
    return s
def worker(stop):
    while not stop.is_set():
        burn()
stop = threading.Event()
t = threading.Thread(target=worker, args=(stop,), name="named-worker")
t.start()
print("ready", flush=True)
while not os.path.exists(sys.argv[1]):
    burn()
stop.set()
t.join()
print(dict(sys.modules) == before, dict(sys.path_importer_cache) == importers, "ctypes" in sys.modules, flush=True)
"""


def test_attach_pep768(python, tmp_path):
    """3.14+: the agent is loaded through the interpreter's own hook, not
    ptrace: the program's sys.modules and sys.path_importer_cache are as
    they were, its threads are named from threading, its output and exit
    status unchanged. Before 3.14: ptrace, with nothing said about PEP 768."""
    prog = tmp_path / "p768.py"
    prog.write_text(PEP768_PROG)
    done = tmp_path / "done"
    p = plain(python, prog, done)
    try:
        assert p.stdout.readline() == "ready\n"
        out = tmp_path / "p.strata"
        r = strata("record", "--pid", p.pid, "-d", "1.5", "-o", out, timeout=120)
        assert r.returncode == 0, r.stderr
        if python.minor >= (3, 14):
            assert PEP768_RE.search(r.stderr), r.stderr
            data = json.loads(strata("report", "--json", out).stdout)
            names = {t["name"] for t in data["threads"]}
            assert {"MainThread", "named-worker"} <= names, data["threads"]
        else:
            m = PTRACE_RE.search(r.stderr)
            assert m and not m.group(4), r.stderr
        done.write_text("")
        o, e = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    assert (p.returncode, o, e) == (0, "True True False\n", ""), (p.returncode, o, e)


@pytest.mark.parametrize("case", ["disabled", "blocked"])
def test_attach_pep768_fallback(python, tmp_path, case):
    """3.14+: where the hook is closed (PYTHON_DISABLE_REMOTE_DEBUG) or no
    thread runs bytecode (all blocked), the request is withdrawn and the
    agent comes through ptrace, the message saying why; the program never
    runs the script later (its stderr stays empty)."""
    if python.minor < (3, 14):
        pytest.skip("PEP 768 came with Python 3.14")
    env = plain_env()
    if case == "disabled":
        env["PYTHON_DISABLE_REMOTE_DEBUG"] = "1"
        args = [PROGRAMS / "split.py", 30]
    else:
        args = ["-c", "import sys, time; print('up', flush=True); sys.stdin.readline(); time.sleep(1); print('end')"]
    p = subprocess.Popen([str(python.exe)] + [str(a) for a in args], env=env, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        if case == "blocked":
            assert p.stdout.readline() == "up\n"
            # 'up' comes before the read: under load the request could
            # land while bytecode still ran, and PEP 768 then works (the
            # sid stage saw it once). Attach once the read blocks.
            from test_control import wait_for
            sc = Path("/proc/%d/syscall" % p.pid)
            assert wait_for(lambda: sc.read_text().split()[0] == "0"), sc.read_text()
        else:
            time.sleep(0.3)
        r = strata("record", "--pid", p.pid, "-d", "1", "-o", tmp_path / "f.strata", timeout=120)
        assert r.returncode == 0, r.stderr
        m = PTRACE_RE.search(r.stderr)
        assert m and m.group(4), r.stderr
        why = {"disabled": "remote debugging is turned off in it", "blocked": "no thread ran Python bytecode"}[case]
        assert why in m.group(4), r.stderr
        if case == "blocked":
            p.stdin.write("go\n")
            p.stdin.flush()
            o, e = p.communicate(timeout=60)
            assert (p.returncode, o, e) == (0, "end\n", ""), (p.returncode, o, e)
        else:
            assert p.poll() is None
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()


# ---- the safe point: the real call chain, every state (issue 21) --------------

STATES = PROGRAMS / "attach_states.py"
# attach_states.py's scenarios: each a process an attach must load into.
SCENARIOS = ["busy", "numpy", "sleep", "stdin", "threads", "manyext", "recursion"]


def build_stale_ext(python, where):
    """native/stale.c as strata_stale_ext in `where`: runs a callable under
    a frame whose stack holds stale words into ld.so and malloc."""
    inc = subprocess.run([str(python.exe), "-c", "import sysconfig; print(sysconfig.get_paths()['include'])"],
                         capture_output=True, text=True, check=True).stdout.strip()
    so = Path(where) / "strata_stale_ext.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-g", "-O1", "-I" + inc, "-o", str(so),
                    str(PROGRAMS / "native" / "stale.c"), "-ldl"], check=True)
    return Path(where)


def start_state(python, scenario, tmp_path, name, stale=None, remote_debug=True):
    """attach_states.py in `scenario`, started without strata, once it says
    it is there; returns (process, its DONE file, the output so far)."""
    exe = python.with_module("numpy") if scenario == "numpy" else (python.venv_python() or python.exe)
    env = plain_env()
    if not remote_debug:
        env["PYTHON_DISABLE_REMOTE_DEBUG"] = "1"
    done = tmp_path / ("done-" + name)
    args = [str(exe), str(STATES), scenario, str(done)] + ([str(stale)] if stale else [])
    p = subprocess.Popen(args, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    said = ""
    while not said.endswith("ready\n"):
        line = p.stdout.readline()
        assert line, (said, p.stderr.read())
        said += line
    return p, done, said


def finish_state(p, scenario, done):
    """Ends the program as it would end without strata: (status, output, errors)."""
    done.write_text("")
    try:
        out, err = p.communicate("a line\n" if scenario == "stdin" else None, timeout=120)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
    return p.returncode, out, err


def attach_by(cmd, pid, tmp_path):
    """Loads the agent into pid with `record --pid`, `top --pid` or `ctl
    PID load`; returns strata's stderr (the load's line first)."""
    if cmd == "record":
        r = strata("record", "--pid", pid, "-d", "0.5", "-o", tmp_path / ("%d.strata" % pid), timeout=120)
        assert r.returncode == 0 and LOADED_RE.search(r.stderr), r.stderr
        assert re.search(r"strata: \d+ samples, 1 process", r.stderr), r.stderr
        return r.stderr
    if cmd == "ctl":
        r = strata("ctl", pid, "load", timeout=120)
        assert r.returncode == 0 and LOADED_RE.search(r.stderr) and "agent loaded" in r.stdout, (r.stdout, r.stderr)
        return r.stderr
    top = subprocess.Popen([str(STRATA), "top", "--pid", str(pid), "--no-curses", "-i", "0.3"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = top.stderr.readline()
    top.send_signal(signal.SIGINT)
    out, err = top.communicate(timeout=60)
    assert LOADED_RE.search(first), first + err
    assert top.returncode == 0, (top.returncode, first + err)
    return first + err


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_attach_states(python, tmp_path, scenario):
    """Each state a process may be in when strata attaches (busy in Python
    or in NumPy, asleep, blocked reading stdin, 8 threads, many extension
    modules loaded, deep in recursion) takes the agent: through `record
    --pid`, then, in a second process, `top --pid` or `ctl PID load` (every
    other state: both on every interpreter); on 3.14+ the first through
    PEP 768, the second through ptrace with remote debugging turned off.
    Each program's output and exit status are what they are without
    strata. bench/attach.py repeats this 20 times per state and
    interpreter (the three commands in turn) and times the loads."""
    pep768 = python.minor >= (3, 14)
    runs = [("record", True), (("top", "ctl")[SCENARIOS.index(scenario) % 2], not pep768)]
    procs = [start_state(python, scenario, tmp_path, "%s-%d" % (cmd, i), remote_debug=rd)
             for i, (cmd, rd) in enumerate(runs)]
    try:
        for (cmd, rd), (p, done, said) in zip(runs, procs):
            err = attach_by(cmd, p.pid, tmp_path)
            if pep768 and not rd:
                m = PTRACE_RE.search(err)
                assert m and "remote debugging is turned off" in (m.group(4) or ""), err
            assert p.poll() is None and maps_agent(p.pid), (cmd, err)
    finally:
        ends = [finish_state(p, scenario, done) for p, done, said in procs]
    for (cmd, rd), (p, done, said), end_ in zip(runs, procs, ends):
        assert (said,) + end_ == ("ready\n", 3, "done\n", ""), (cmd, said, end_)


def test_pep768_load_beside_busy_threads(python, tmp_path):
    """3.14+: PEP 768's loading script runs in a thread that takes the GIL
    back after each of the import system's system calls, against 4 threads
    busy in Python (attach_states.py threads). It shortens the switch
    interval while it runs: before, about one load in four took 0.4-3 s
    and some failed after 12 s ("took strata's loading script but it has
    not finished"); now they take about what ptrace takes (bench/RESULTS.md).
    Every load succeeds, and the program finds its own interval after
    (checked by the program)."""
    if python.minor < (3, 14):
        pytest.skip("PEP 768 came with Python 3.14")
    took = {True: [], False: []}
    for i in range(6):
        for rd in (True, False):
            p, done, said = start_state(python, "threads", tmp_path, "t%d-%d" % (i, rd), remote_debug=rd)
            try:
                t0 = time.monotonic()
                r = strata("ctl", p.pid, "load", timeout=120)
                took[rd].append(round(time.monotonic() - t0, 3))
                assert r.returncode == 0 and (PEP768_RE if rd else PTRACE_RE).search(r.stderr), (r.stderr, took)
            finally:
                end_ = finish_state(p, "threads", done)
            assert end_ == (3, "done\n", ""), end_
    # Side by side with ptrace in the same state (a bound loose enough for
    # make check's load: a load now takes 40-300 ms, rarely 1.4 s).
    assert max(took[True]) <= max(took[False]) + 5, took


def test_attach_stale_stack(python, tmp_path):
    """A stack holding words that point into the loader and into malloc
    but are not frames (a reserved, never written slot of a live frame
    under the Python code: strata_stale_ext) does not refuse the thread:
    the safe point is decided from its real frames, unwound with CFI.
    Through ptrace on every interpreter (3.14+: remote debugging off),
    busy, asleep, and with 8 threads all under such frames."""
    ext = build_stale_ext(python, tmp_path)
    for scenario in ("busy", "sleep", "threads"):
        p, done, said = start_state(python, scenario, tmp_path, scenario, stale=ext, remote_debug=False)
        try:
            m = re.match(r"stale (\d+) (\d+)\nready\n$", said)
            # The program holds the words it is meant to (else this tests nothing).
            assert m and int(m.group(1)) >= 1 and int(m.group(2)) >= 1, said
            r = strata("record", "--pid", p.pid, "-d", "0.3", "-o", tmp_path / (scenario + ".strata"), timeout=120)
            assert r.returncode == 0 and PTRACE_RE.search(r.stderr), (scenario, r.stderr)
        finally:
            end_ = finish_state(p, scenario, done)
        assert end_ == (3, "done\n", ""), (scenario, end_)


def test_attach_refusal_names_the_frame(debian_python, tmp_path):
    """A thread that really is inside a lock holder (C stdio's fgets, which
    keeps stdin's FILE locked while it waits) is never borrowed: after 3 s,
    one line names the thread, the function and its object, and what to
    try; the process goes on as before."""
    ext = build_stale_ext(debian_python, tmp_path)
    env = plain_env(PYTHON_DISABLE_REMOTE_DEBUG="1")
    p = subprocess.Popen([str(debian_python.exe), "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
                          "import strata_stale_ext as e; print('ready', flush=True); print(e.fgets_stdin(), end=''); "
                          "sys.exit(4)", str(ext)], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline() == "ready\n"
        time.sleep(0.3)
        r = strata("record", "--pid", p.pid, "-d", "1", "-o", tmp_path / "x.strata", timeout=60)
        assert r.returncode != 0 and len(r.stderr.splitlines()) == 1, r.stderr
        assert "no thread of process %d reached a safe point" % p.pid in r.stderr, r.stderr
        assert re.search(r"thread %d is inside fgets \(libc\.so\.6\), called from fgets_stdin "
                         r"\(strata_stale_ext\.so\)" % p.pid, r.stderr), r.stderr
        assert "nothing was changed in it: try again" in r.stderr and "strata stack --native %d" % p.pid in r.stderr
        assert not maps_agent(p.pid)
    finally:
        out, err = p.communicate("a line\n", timeout=30)
    assert (p.returncode, out, err) == (4, "a line\n", ""), (p.returncode, out, err)


def test_attach_refusal_without_cfi(debian_python, tmp_path):
    """A thread running code with no unwind information (anonymous memory,
    as JIT code) cannot be walked past it: the stack above is then checked
    word by word, as before the walk, and the stale words there refuse it;
    the line says so. The process goes on as before."""
    ext = build_stale_ext(debian_python, tmp_path)
    env = plain_env(PYTHON_DISABLE_REMOTE_DEBUG="1")
    p = subprocess.Popen([str(debian_python.exe), "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
                          "import strata_stale_ext as e; print('ready', flush=True); e.spin_without_cfi()", str(ext)],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline() == "ready\n"
        time.sleep(0.3)
        r = strata("record", "--pid", p.pid, "-d", "1", "-o", tmp_path / "x.strata", timeout=60)
        assert r.returncode != 0 and len(r.stderr.splitlines()) == 1, r.stderr
        assert re.search(r"last seen: thread %d's stack could not be unwound past 0x[0-9a-f]+ \(in no object file\) "
                         r"\(no unwind information\), and a word above it points into (malloc \(libc\.so\.6\)|"
                         r"\S+ \(ld-linux[^)]*\)|ld-linux\S* at 0x[0-9a-f]+), which may be a frame holding a lock; "
                         r"nothing was changed in it: try again when the thread is elsewhere" % p.pid, r.stderr), r.stderr
        assert not maps_agent(p.pid) and p.poll() is None
    finally:
        p.kill()
        p.communicate()
