"""strata stack PID: every thread's Python stack of a running process, read
from outside (nothing loaded into it), and its errors."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import PROGRAMS, STRATA, strata

NATIVE = PROGRAMS / "native"


def marker_line(path, marker):
    for i, line in enumerate(Path(path).read_text().splitlines(), 1):
        if marker in line:
            return i
    raise AssertionError("no %r in %s" % (marker, path))


def build_ext(python, where):
    inc = subprocess.run([str(python.exe), "-c", "import sysconfig; print(sysconfig.get_paths()['include'])"],
                         capture_output=True, text=True, check=True).stdout.strip()
    so = Path(where) / "strata_native_ext.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-g", "-O1", "-I" + inc, "-o", str(so), str(NATIVE / "ext.c")],
                   check=True)
    return so


def start_stuck(python, tmp_path):
    """stuck.py: its main thread spins in C holding the GIL; a second thread
    sleeps in time.sleep."""
    build_ext(python, tmp_path)
    p = subprocess.Popen([str(python.exe), str(PROGRAMS / "stuck.py"), str(tmp_path)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    assert p.stdout.readline() == "ready\n", p.stderr.read()
    # "ready" is printed just before the call into C: on a loaded machine
    # the main thread can still be in print()'s write, GIL released. Wait
    # (without pausing it) until it is in spin().
    end_at = time.time() + 30
    while time.time() < end_at:
        r = strata("stack", "--json", "--nonblocking", p.pid, timeout=60)
        main = [t for t in json.loads(r.stdout)["threads"] if t["tid"] == p.pid] if r.returncode == 0 else []
        if main and main[0]["frames"] and main[0]["frames"][-1]["function"] == "spin":
            break
        time.sleep(0.05)
    return p


def end(p):
    if p.poll() is None:
        p.kill()
    out, err = p.communicate(timeout=20)
    return out, err


def test_stack_stuck_in_c(python, tmp_path):
    """A process stuck in C with the GIL shows the Python line that called
    it, in the thread that holds the GIL; the other thread shows where it
    sleeps. The process is left running, unchanged."""
    p = start_stuck(python, tmp_path)
    try:
        for args in ((), ("--nonblocking",)):
            r = strata("stack", "--json", *args, p.pid, timeout=60)
            assert r.returncode == 0, r.stderr
            data = json.loads(r.stdout)
            assert data["pid"] == p.pid and data["paused"] == (not args)
            assert data["python"].startswith("%d.%d" % python.minor), data["python"]
            threads = {t["tid"]: t for t in data["threads"]}
            main = threads[p.pid]
            assert main["main"] and main["holds_gil"] and main["python"], main
            stuck = marker_line(PROGRAMS / "stuck.py", "# STUCK")
            inner = main["frames"][-1]
            assert Path(inner["file"]).name == "stuck.py" and inner["line"] == stuck, main["frames"]
            assert inner["function"] == "spin"
            assert [f["function"] for f in main["frames"]][-3:] == ["<module>", "main", "spin"] or \
                [f["function"] for f in main["frames"]][-2:] == ["main", "spin"], main["frames"]
            others = [t for t in data["threads"] if t["tid"] != p.pid]
            sleeper = [t for t in others if t["frames"] and t["frames"][-1]["function"] == "sleeper"]
            assert len(sleeper) == 1, others
            assert sleeper[0]["frames"][-1]["line"] == marker_line(PROGRAMS / "stuck.py", "# SLEEPER")
            assert not sleeper[0]["holds_gil"]
            if not args:
                assert all(t["paused"] for t in data["threads"]), data["threads"]
        # The text form: a traceback, most recent call last.
        r = strata("stack", p.pid, timeout=60)
        assert r.returncode == 0, r.stderr
        lines = r.stdout.splitlines()
        head = [i for i, l in enumerate(lines) if l.startswith("Thread %d " % p.pid)][0]
        assert "holds the GIL" in lines[head], lines[head]
        block = lines[head:lines.index("", head) if "" in lines[head:] else len(lines)]
        assert "Traceback (most recent call last):" in block[1]
        assert block[-2].strip().startswith('File "') and ", line %d, in spin" % stuck in block[-2], block
        assert "burn_c(10 ** 15)" in block[-1], block
        assert p.poll() is None, "the target died"
    finally:
        out, err = end(p)
    # Its own output only; killed by our SIGKILL, nothing else.
    assert out == "" and err == "", (out, err)
    assert p.returncode == -signal.SIGKILL


def test_stack_native(python, tmp_path):
    """--native: the main thread's innermost frame is the C function it is
    stuck in (ext.c's hot line), called from the Python line; the eval loop
    itself is replaced by the Python frames."""
    p = start_stuck(python, tmp_path)
    try:
        r = strata("stack", "--native", "--json", p.pid, timeout=60)
        assert r.returncode == 0, r.stderr
        threads = {t["tid"]: t for t in json.loads(r.stdout)["threads"]}
        fr = threads[p.pid]["frames"]
        assert fr[-1]["kind"] == "native" and fr[-1]["function"] == "burn_c", fr[-3:]
        # One pause lands anywhere in the loop: gcc gives the body the HOT
        # line and the increment and test the `for` line above it.
        hot = marker_line(NATIVE / "ext.c", "/* HOT */")
        assert Path(fr[-1]["file"]).name == "ext.c" and fr[-1]["line"] in (hot - 1, hot), fr[-1]
        assert fr[-1]["module"].endswith("strata_native_ext.so")
        assert fr[-2]["kind"] == "python" and fr[-2]["function"] == "spin", fr[-3:]
        assert fr[-2]["line"] == marker_line(PROGRAMS / "stuck.py", "# STUCK")
        assert not any(f["function"] == "_PyEval_EvalFrameDefault" for f in fr), fr
        r = strata("stack", "--native", p.pid, timeout=60)
        assert r.returncode == 0 and "[native] burn_c (" in r.stdout, r.stdout
        r = strata("stack", "--native", "--nonblocking", p.pid)
        assert r.returncode == 2 and "cannot be used with --nonblocking" in r.stderr, r.stderr
        assert p.poll() is None
    finally:
        out, err = end(p)
    assert (out, err) == ("", "")


SIGPROG = r"""
import os, signal, sys, time
got = 0
def on_usr1(sig, frame):
    # os.write, not print: CPython's buffered writer runs pending signal
    # handlers after each write while it holds its lock, so a handler that
    # prints, run inside the flush of a print it interrupted, dies of
    # "RuntimeError: reentrant call", with or without strata. A pause that
    # holds the thread right after its write makes that likely (3 runs in
    # 10 under 3.14 with two busy loops beside it: issue 21).
    global got
    got += 1
    os.write(1, b"got %d\n" % got)
signal.signal(signal.SIGUSR1, on_usr1)
print("ready", flush=True)
end = time.time() + 120
while time.time() < end:
    sum(range(1000))
"""


@pytest.mark.edge_pythons
def test_stack_keeps_signals(python, tmp_path):
    """A signal sent while strata stack holds the process is delivered, once,
    and the process goes on: 30 rounds of stack, each with a SIGUSR1 sent
    as it starts, with two busy loops beside them (a loaded machine, where
    a pause lasts longer and a thread may wait for a CPU to stop)."""
    prog = tmp_path / "sig.py"
    prog.write_text(SIGPROG)
    busy = [subprocess.Popen([str(python.exe), "-c", "while 1: pass"]) for _ in range(2)]
    p = subprocess.Popen([str(python.exe), str(prog)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        assert p.stdout.readline() == "ready\n"
        for i in range(1, 31):
            s = subprocess.Popen([str(STRATA), "stack", str(p.pid)], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, text=True)
            time.sleep(0.001 * (i % 5))
            os.kill(p.pid, signal.SIGUSR1)
            assert s.wait(60) == 0, s.stderr.read()
            assert p.stdout.readline() == "got %d\n" % i, (p.poll(), p.stderr.read() if p.poll() is not None else "")
        assert p.poll() is None
    finally:
        for b in busy:
            b.kill()
            b.wait()
        p.kill()
        p.communicate()


def test_stack_errors(debian_python, tmp_path):
    # No such process.
    r = strata("stack", 2 ** 22 + 12345)
    assert r.returncode == 1 and r.stderr.startswith("strata: no process 4206649"), r.stderr
    assert len(r.stderr.splitlines()) == 1
    # Not a number.
    r = strata("stack", "abc")
    assert r.returncode == 2 and "is not a process id" in r.stderr, r.stderr
    # Not a Python process.
    sl = subprocess.Popen(["sleep", "300"])
    try:
        r = strata("stack", sl.pid)
        assert r.returncode == 1 and "is not a CPython process" in r.stderr, r.stderr
        assert len(r.stderr.splitlines()) == 1
    finally:
        sl.kill()
        sl.wait()
    py = subprocess.Popen([str(debian_python.exe), "-c", "import time; print('up', flush=True); time.sleep(300)"],
                          stdout=subprocess.PIPE, text=True)
    try:
        assert py.stdout.readline() == "up\n"
        # A Python version without a reader build: the make command to build one.
        empty = tmp_path / "noreaders"
        empty.mkdir()
        env = dict(os.environ, STRATA_AGENT_DIR=str(empty))
        r = strata("stack", py.pid, env=env)
        assert r.returncode == 1 and "no reader for Python 3." in r.stderr and "make PYTHONS=" in r.stderr, r.stderr
        assert len(r.stderr.splitlines()) == 1
        # Traced by someone else (a debugger): PTRACE_SEIZE from a helper.
        tracer = subprocess.Popen([sys.executable, "-c", "import ctypes, sys, time; libc = ctypes.CDLL(None, "
                                   "use_errno=True); assert libc.ptrace(0x4206, int(sys.argv[1]), 0, 0) == 0; "
                                   "print('seized', flush=True); time.sleep(60)", str(py.pid)],
                                  stdout=subprocess.PIPE, text=True)
        try:
            assert tracer.stdout.readline() == "seized\n"
            r = strata("stack", py.pid)
            assert r.returncode == 1 and "is another debugger or profiler tracing it?" in r.stderr, r.stderr
            assert len(r.stderr.splitlines()) == 1
        finally:
            tracer.kill()
            tracer.wait()
        # Another user's process.
        r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", str(STRATA), "stack",
                            str(py.pid)], capture_output=True, text=True)
        assert r.returncode == 1 and "permission denied: process %d belongs to uid 0" % py.pid in r.stderr, r.stderr
        assert len(r.stderr.splitlines()) == 1
        assert py.poll() is None
    finally:
        py.kill()
        py.wait()


@pytest.mark.skipif(not Path("/proc/sys/kernel/yama/ptrace_scope").exists(),
                    reason="this kernel has no Yama LSM (/proc/sys/kernel/yama/ptrace_scope): its refusal cannot happen here")
def test_stack_yama_refusal(debian_python):
    scope = int(Path("/proc/sys/kernel/yama/ptrace_scope").read_text())
    if scope < 1:
        pytest.skip("kernel.yama.ptrace_scope is 0 here: Yama refuses nothing, and the test must not change it")
    # Both as nobody: the target is not strata's child, so scope 1 refuses.
    py = subprocess.Popen(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", str(debian_python.exe),
                           "-c", "import time; print('up', flush=True); time.sleep(300)"],
                          stdout=subprocess.PIPE, text=True)
    try:
        assert py.stdout.readline() == "up\n"
        r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", str(STRATA), "stack",
                            str(py.pid)], capture_output=True, text=True)
        assert r.returncode == 1 and "refused by Yama (kernel.yama.ptrace_scope = %d" % scope in r.stderr, r.stderr
    finally:
        py.kill()
        py.wait()
