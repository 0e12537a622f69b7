"""The control channel: strata ctl, record --paused, record --pid (attaching
to a process started with STRATA_AGENT=1), and who may connect."""
import os
import re
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import AGENT_DIR, PROGRAMS, STRATA, assert_split, assert_window_samples, cpu_ms, func_row, plain_env, strata

AGENT = AGENT_DIR / "libstrata-agent.so"


def agent_env(**extra):
    env = dict(os.environ)
    env.pop("STRATA_OUTPUT", None)
    env["LD_PRELOAD"] = str(AGENT)
    env["STRATA_AGENT"] = "1"
    env.update(extra)
    return env


def wait_for(cond, timeout=20, step=0.05):
    end = time.time() + timeout
    while time.time() < end:
        v = cond()
        if v:
            return v
        time.sleep(step)
    return cond()


def status(pid):
    r = strata("ctl", pid, "status")
    if r.returncode != 0:
        return None
    out = {}
    for line in r.stdout.splitlines():
        k, _, v = line.partition(" ")
        out[k] = v.strip()
    return out


def wait_agent(pid, proc=None):
    st = wait_for(lambda: status(pid) or (proc is not None and proc.poll() is not None and {"dead": 1}))
    if not st or "dead" in st:
        # What the process and the CLI said, for the failure message.
        last = strata("ctl", pid, "status")
        said = ""
        if proc is not None and proc.stderr is not None:
            if proc.poll() is None:
                proc.terminate()
            try:
                said = proc.communicate(timeout=10)[1]
            except subprocess.TimeoutExpired:
                proc.kill()
                said = proc.communicate()[1]
        raise AssertionError("the agent of process %d never answered (exit %s)\nctl: %s\nprocess stderr: %r"
                             % (pid, proc.returncode if proc else "?", last.stderr.strip(), said))
    return st


def samples(pid):
    st = status(pid)
    return int(st["samples"]) if st else None


def python_child(parent):
    """The Python process strata record started (its only child)."""
    def find():
        kids = Path("/proc/%d/task/%d/children" % (parent, parent)).read_text().split()
        return int(kids[0]) if kids else None
    pid = wait_for(find)
    assert pid, "strata record started nothing"
    return pid


def start_standby(interp, prog, *args, env=None, **kw):
    p = subprocess.Popen([str(interp.exe), str(PROGRAMS / prog)] + [str(a) for a in args],
                         env=env or agent_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **kw)
    return p


def stop(proc):
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.mark.edge_pythons
def test_ctl_stop_start(python, tmp_path):
    """ctl stop makes the sample count stop growing, ctl start resumes it,
    and dump writes a finished copy of what was recorded so far."""
    out = tmp_path / "paused.strata"
    rec = subprocess.Popen([str(STRATA), "record", "--paused", "-o", str(out), "--", str(python.exe),
                            str(PROGRAMS / "split.py"), "60"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    try:
        pid = python_child(rec.pid)
        st = wait_agent(pid, rec)
        assert st["sampling"] == "off" and st["output"] == str(out), st
        time.sleep(0.5)
        assert samples(pid) == 0, "a paused agent took samples"

        r = strata("ctl", pid, "start")
        assert r.returncode == 0 and "sampling on" in r.stdout, r.stderr
        assert wait_for(lambda: samples(pid) > 300), "sampling did not start"

        r = strata("ctl", pid, "stop")
        assert r.returncode == 0, r.stderr
        time.sleep(0.2)
        s1 = samples(pid)
        time.sleep(1.5)
        s2 = samples(pid)
        assert s1 == s2, "the sample count grew while stopped: %d -> %d" % (s1, s2)
        assert status(pid)["sampling"] == "off"

        assert strata("ctl", pid, "start").returncode == 0
        assert wait_for(lambda: samples(pid) > s2 + 300), "sampling did not resume"

        dump = tmp_path / "dump.strata"
        r = strata("ctl", pid, "dump", dump)
        assert r.returncode == 0, r.stderr
        assert re.search(r"wrote \d+ bytes to", r.stdout)
        rep = strata("report", "--json", dump)
        assert rep.returncode == 0, rep.stderr
        # A finished profile: no "stopped without finishing" warning.
        assert "warning" not in rep.stderr, rep.stderr
        import json
        data = json.loads(rep.stdout)
        assert data["samples"] >= s2 + 300 - 50
        heavy, light = func_row(data, "heavy")["self"], func_row(data, "light")["self"]
        assert 0.68 <= heavy / (heavy + light) <= 0.82, (heavy, light)
    finally:
        stop(rec)
    assert rec.returncode is not None


@pytest.mark.edge_pythons
def test_record_paused_never_started(python, record):
    r = record(python, "split.py", "0.5", opts=["--paused"])
    assert r.returncode == 0, r.stderr
    assert re.search(r"strata: 0 samples, 1 process", r.stderr), r.stderr
    assert r.report()["samples"] == 0


@pytest.mark.edge_pythons
def test_record_pid_duration(python, tmp_path):
    """record --pid -d attaches to a standby agent, records about that
    long, leaves a complete file, and can attach again."""
    p = start_standby(python, "split.py", 60)
    try:
        st = wait_agent(p.pid, p)
        assert st["sampling"] == "off" and st["output"] == "", st
        out = tmp_path / "attached.strata"
        t0, c0 = time.time(), cpu_ms(p.pid)
        r = strata("record", "--pid", p.pid, "-d", "2", "-o", out)
        took, cpu = time.time() - t0, cpu_ms(p.pid) - c0
        assert r.returncode == 0, r.stderr
        assert 1.8 <= took < 15, took
        assert re.search(r"strata: \d+ samples, 1 process, 1 thread, 0 dropped -> ", r.stderr), r.stderr
        rep = strata("report", "--json", out)
        assert rep.returncode == 0 and "warning" not in rep.stderr, rep.stderr
        import json
        data = json.loads(rep.stdout)
        # CPU time over 2 s of wall time: on a loaded machine (make check
        # runs the CPython tests beside the sid stage) the program may get
        # a twentieth of a core; the split below is what must be right.
        assert_window_samples(data["samples"], cpu, "record --pid -d 2", 1000 * took, data["duration_s"])
        heavy, light = func_row(data, "heavy")["self"], func_row(data, "light")["self"]
        assert_split((heavy, light), (3, 1), "heavy:light")
        assert str(PROGRAMS / "split.py") in data["command"]
        # Header, session, the process stream ended by the detach, session end.
        dump = strata("dump", out).stdout
        assert "session " in dump and "session-end" in dump, dump[:2000]
        assert re.search(r"process pid=%d " % p.pid, dump)
        assert re.search(r"process-end .*reason=3", dump) or "detach" in dump, \
            [l for l in dump.splitlines() if "end" in l]
        # The process runs on, idle, and takes a second attach.
        assert p.poll() is None
        st = status(p.pid)
        assert st["sampling"] == "off" and st["output"] == "", st
        out2 = tmp_path / "again.strata"
        r = strata("record", "--pid", p.pid, "-d", "1", "-o", out2)
        assert r.returncode == 0, r.stderr
        # Sampled again (CPU time in 1 s of wall time: 65 once, under
        # make check's load in the sid root).
        assert json.loads(strata("report", "--json", out2).stdout)["samples"] > 20
        # Busy: a second recorder is turned away while one is attached.
        rec = subprocess.Popen([str(STRATA), "record", "--pid", str(p.pid), "-d", "5", "-o",
                                str(tmp_path / "first.strata")], stderr=subprocess.PIPE, text=True)
        wait_for(lambda: (status(p.pid) or {}).get("output"))
        r = strata("record", "--pid", p.pid, "-d", "1", "-o", tmp_path / "second.strata")
        assert r.returncode != 0 and "already being recorded" in r.stderr, r.stderr
        rec.send_signal(signal.SIGINT)
        assert rec.wait(20) == 0, rec.stderr.read()
    finally:
        stop(p)


@pytest.mark.edge_pythons
def test_record_pid_ends_with_the_process(python, tmp_path):
    p = start_standby(python, "split.py", 2)
    try:
        wait_agent(p.pid, p)
        out = tmp_path / "short.strata"
        r = strata("record", "--pid", p.pid, "-o", out, timeout=60)
        assert r.returncode == 0, r.stderr
        rep = strata("report", "--json", out)
        assert rep.returncode == 0, rep.stderr
        assert "warning" not in rep.stderr, rep.stderr
    finally:
        stop(p)


def test_attach_without_agent(debian_python, tmp_path):
    """ctl commands other than load, on a process without an agent, say how
    to get one and change nothing (record --pid and top --pid load it: see
    test_attach.py)."""
    plain = subprocess.Popen([str(debian_python.exe), str(PROGRAMS / "split.py"), "30"])
    inactive = subprocess.Popen([str(debian_python.exe), str(PROGRAMS / "split.py"), "30"],
                                env=dict(os.environ, LD_PRELOAD=str(AGENT)))
    try:
        time.sleep(0.5)
        r = strata("ctl", plain.pid, "status")
        assert r.returncode == 2
        assert "has no strata agent" in r.stderr and "strata ctl %d load" % plain.pid in r.stderr, r.stderr
        assert "STRATA_AGENT=1" in r.stderr and "LD_PRELOAD=" in r.stderr, r.stderr
        assert "libstrata-agent.so" not in Path("/proc/%d/maps" % plain.pid).read_text()
        r = strata("ctl", inactive.pid, "status")
        assert r.returncode == 2 and "no control channel" in r.stderr, r.stderr
        r = strata("ctl", 999999999, "status")
        assert r.returncode == 2 and "no process" in r.stderr, r.stderr
        r = strata("ctl", plain.pid, "frobnicate")
        assert r.returncode == 2
    finally:
        stop(plain)
        stop(inactive)


def sock_path(pid):
    return Path("/tmp/strata-%d/%d.sock" % (os.getuid(), pid))


def nobody_env():
    env = {k: v for k, v in os.environ.items() if not k.startswith("XDG_")}
    env["HOME"] = "/tmp"
    return env


NOBODY = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to run a process as another user")
def test_other_user_refused_root_allowed(debian_python, tmp_path):
    # Socket directory and socket are the owner's only.
    mine = start_standby(debian_python, "split.py", 30)
    theirs = subprocess.Popen(NOBODY + ["env", "LD_PRELOAD=%s" % AGENT, "STRATA_AGENT=1",
                                        str(debian_python.exe), str(PROGRAMS / "split.py"), "30"],
                              env=nobody_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_agent(mine.pid, mine)
        s = sock_path(mine.pid)
        assert stat.S_IMODE(s.stat().st_mode) == 0o600
        assert stat.S_IMODE(s.parent.stat().st_mode) == 0o700

        # nobody cannot reach root's socket at all.
        r = subprocess.run(NOBODY + [str(STRATA), "ctl", str(mine.pid), "status"], env=nobody_env(),
                           capture_output=True, text=True)
        assert r.returncode == 2 and "permission denied" in r.stderr, r.stderr

        # root may control any user's process (as it may trace it): the
        # agent checks SO_PEERCRED and lets uid 0 in.
        pid = theirs.pid
        nob = Path("/tmp/strata-%d" % int(subprocess.check_output(["id", "-u", "nobody"])))
        assert wait_for(lambda: (nob / ("%d.sock" % pid)).exists()), theirs.stderr.read1(4096) if theirs.poll() else ""
        r = strata("ctl", pid, "status")
        assert r.returncode == 0, (r.stdout, r.stderr)
        assert "sampling  off" in r.stdout, r.stdout
    finally:
        stop(mine)
        stop(theirs)


def test_stale_socket_cleaned(debian_python, tmp_path):
    # A runtime directory of this test's own: an agent that other tests
    # start meanwhile sweeps the shared one too.
    run_dir = tmp_path / "run"
    run_dir.mkdir(mode=0o700)
    env = agent_env(XDG_RUNTIME_DIR=str(run_dir))
    # A process killed with SIGKILL: its helper, which outlives it,
    # removes the socket.
    dead = start_standby(debian_python, "split.py", 30, env=env)
    wait_agent(dead.pid, dead)
    s = run_dir / "strata" / ("%d.sock" % dead.pid)
    assert s.exists()
    dead.kill()
    dead.wait()
    assert wait_for(lambda: not s.exists(), timeout=10), "the helper left %s behind" % s
    # A socket left by a process that is gone, helper and all (SIGKILL to
    # the whole session, the OOM killer)...
    gone = subprocess.Popen(["true"])
    gone.wait()
    s = run_dir / "strata" / ("%d.sock" % gone.pid)
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    srv.bind(str(s))
    srv.close()
    assert s.exists()
    # ...which the next agent to start sweeps away.
    other = start_standby(debian_python, "split.py", 30, env=env)
    try:
        wait_agent(other.pid, other)
        assert wait_for(lambda: not s.exists(), timeout=5), "stale socket %s still there" % s
    finally:
        stop(other)

    # A socket nobody listens on, for a live process (a reused pid: not
    # the process whose agent made it, so no agent here): the CLI says so
    # and removes it. In this test's runtime directory too: in the shared
    # one every agent that starts sweeps the sockets of gone processes and
    # the CLI removes refused ones, so with pids reused (pid_max can be
    # 32768) another test's may remove the fake first (make check once
    # found it gone: "no control channel").
    sleeper = subprocess.Popen(["sleep", "30"], env=plain_env(XDG_RUNTIME_DIR=str(run_dir)))
    try:
        fake = run_dir / "strata" / ("%d.sock" % sleeper.pid)
        srv = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        srv.bind(str(fake))
        srv.close()
        assert fake.exists()
        r = strata("ctl", sleeper.pid, "status")
        assert r.returncode == 2, r.stderr
        assert "stale control socket" in r.stderr and "STRATA_AGENT=1" in r.stderr, r.stderr
        assert not fake.exists()
    finally:
        sleeper.kill()
        sleeper.wait()


def test_socket_follows_fork_and_exit(debian_python, tmp_path):
    """A forked child gets its own channel; sockets go away with their
    process."""
    prog = tmp_path / "forker.py"
    prog.write_text(
        "import os, sys, time\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    time.sleep(30)\n"
        "    os._exit(0)\n"
        "print(pid, flush=True)\n"
        "time.sleep(30)\n")
    p = subprocess.Popen([str(debian_python.exe), str(prog)], env=agent_env(), stdout=subprocess.PIPE, text=True)
    try:
        child = int(p.stdout.readline())
        st = wait_agent(child, p)
        assert st["pid"] == str(child)
        assert wait_agent(p.pid, p)["pid"] == str(p.pid)
        os.kill(child, signal.SIGTERM)
        assert wait_for(lambda: not sock_path(child).exists(), timeout=10)
        assert sock_path(p.pid).exists()
    finally:
        stop(p)
    assert wait_for(lambda: not sock_path(p.pid).exists(), timeout=10)


# ---- the client trusts nothing it did not check -------------------------
#
# A fake agent: another process (never the target) listening where the
# target's socket belongs. It logs what each connection carried, and ends
# when the test connects with "END" (connections are accepted in order, so
# by then every connection strata made has been logged).
FAKE_AGENT = r'''
import array, os, socket, sys
srv = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
srv.bind(sys.argv[1])
srv.listen(8)
print("ready", flush=True)
while True:
    c, _ = srv.accept()
    c.settimeout(10)
    try:
        msg, anc, _, _ = c.recvmsg(8192, socket.CMSG_SPACE(16))
    except OSError as e:
        print("error", e, flush=True)
        c.close()
        continue
    if msg == b"END":
        break
    fds = array.array("i")
    for level, kind, data in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[:len(data) - len(data) % fds.itemsize])
    print("got %d bytes %d fds %r" % (len(msg), len(fds), msg[:40]), flush=True)
    for fd in fds:
        os.close(fd)
    if msg:
        # What a standby agent says, so that a client that believes it
        # goes on to send the next request (an output descriptor).
        c.send(b"ok\npid=%s\npython=3.11.2\nmode=cpu\nrate=1000\nsampling=off\nsamples=0\n"
               b"dropped=0\nthreads=1\nloaded=preload\noutput=\n" % sys.argv[2].encode())
    c.close()
'''


class FakeAgent:
    def __init__(self, path, target_pid):
        self.path = Path(path)
        self.proc = subprocess.Popen([sys.executable, "-c", FAKE_AGENT, str(path), str(target_pid)],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline().strip() == "ready", self.proc.stderr.read()

    def log(self):
        """Ends the fake agent; returns what each connection carried."""
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            s.connect(str(self.path))
            s.send(b"END")
        finally:
            s.close()
        out, err = self.proc.communicate(timeout=20)
        assert self.proc.returncode == 0, err
        return out.splitlines()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def planted(tmp_path):
    """A target (a plain process) whose XDG_RUNTIME_DIR is a fresh private
    directory, so its control socket belongs at xdg/strata/PID.sock, where
    each test plants what it likes."""
    xdg = tmp_path / "xdg"
    xdg.mkdir(mode=0o700)
    target = subprocess.Popen(["sleep", "60"], env=dict(os.environ, XDG_RUNTIME_DIR=str(xdg)))
    fakes = []

    class Planted:
        pass
    p = Planted()
    p.xdg, p.pid, p.dir = xdg, target.pid, xdg / "strata"
    p.sock = p.dir / ("%d.sock" % target.pid)

    def fake(path=None):
        f = FakeAgent(path or p.sock, target.pid)
        fakes.append(f)
        return f
    p.fake = fake
    try:
        yield p
    finally:
        for f in fakes:
            f.kill()
        target.kill()
        target.wait()


def nobody_uid():
    return int(subprocess.check_output(["id", "-u", "nobody"]))


def refused(r, *words):
    """strata gave up with one clear line naming what was wrong."""
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("strata: "), r.stderr
    assert "refusing" in lines[0] and "restart" in lines[0], r.stderr
    for w in words:
        assert w in lines[0], (w, r.stderr)


def test_real_agent_in_runtime_dir(debian_python, tmp_path):
    """The checks let a real agent through: its own XDG_RUNTIME_DIR/strata."""
    xdg = tmp_path / "xdg"
    xdg.mkdir(mode=0o700)
    p = subprocess.Popen([str(debian_python.exe), str(PROGRAMS / "split.py"), "30"],
                         env=agent_env(XDG_RUNTIME_DIR=str(xdg)), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        st = wait_agent(p.pid, p)
        assert st["pid"] == str(p.pid)
        assert (xdg / "strata" / ("%d.sock" % p.pid)).is_socket()
    finally:
        stop(p)


@pytest.mark.parametrize("mode,what", [(0o777, "writable by others (mode 0777)"),
                                       (0o770, "writable by its group (mode 0770)")])
def test_loose_socket_dir_refused(planted, mode, what):
    planted.dir.mkdir()
    planted.dir.chmod(mode)
    fake = planted.fake()
    r = strata("ctl", planted.pid, "status")
    refused(r, str(planted.dir), what, "process %d" % planted.pid)
    assert fake.log() == [], "strata connected through a directory others can write"


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to give a directory to another user")
def test_foreign_socket_dir_refused(planted):
    planted.dir.mkdir(mode=0o700)
    fake = planted.fake()
    os.chown(planted.dir, nobody_uid(), -1)
    r = strata("ctl", planted.pid, "status")
    refused(r, str(planted.dir), "belongs to uid %d" % nobody_uid())
    assert fake.log() == []


def test_symlinked_socket_dir_refused(planted):
    real = planted.xdg / "elsewhere"
    real.mkdir(mode=0o700)
    planted.dir.symlink_to(real)
    fake = planted.fake(real / planted.sock.name)
    r = strata("ctl", planted.pid, "status")
    refused(r, str(planted.dir), "symbolic link")
    assert fake.log() == []


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to give a socket to another user")
def test_foreign_socket_refused(planted):
    planted.dir.mkdir(mode=0o700)
    fake = planted.fake()
    os.chown(planted.sock, nobody_uid(), -1)
    r = strata("ctl", planted.pid, "status")
    refused(r, str(planted.sock), "belongs to uid %d" % nobody_uid())
    assert fake.log() == []


def test_impostor_listener_refused(planted, tmp_path):
    """A socket in the right place, with the right owner, served by another
    process: every client sees the listener is not the target, and sends it
    neither a request nor a descriptor."""
    planted.dir.mkdir(mode=0o700)
    fake = planted.fake()
    who = "process %d" % fake.proc.pid
    r = strata("ctl", planted.pid, "status")
    refused(r, str(planted.sock), who, "not process %d" % planted.pid)
    assert "pid " not in r.stdout
    dump = tmp_path / "dump.strata"
    r = strata("ctl", planted.pid, "dump", dump)
    refused(r, who)
    assert not dump.exists()
    out = tmp_path / "rec.strata"
    r = strata("record", "--pid", planted.pid, "-d", "1", "-o", out)
    refused(r, who)
    assert not out.exists()
    r = strata("top", "--pid", planted.pid, "--no-curses", timeout=30)
    refused(r, who)
    log = fake.log()
    assert len(log) == 4, log
    assert all(line.startswith("got 0 bytes 0 fds") for line in log), log
