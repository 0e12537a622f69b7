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

from conftest import AGENT_DIR, PROGRAMS, STRATA, func_row, strata

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
    assert st and "dead" not in st, "the agent of process %d never answered" % pid
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


def start_standby(interp, prog, *args, **kw):
    p = subprocess.Popen([str(interp.exe), str(PROGRAMS / prog)] + [str(a) for a in args], env=agent_env(),
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **kw)
    return p


def stop(proc):
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


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


def test_record_paused_never_started(python, record):
    r = record(python, "split.py", "0.5", opts=["--paused"])
    assert r.returncode == 0, r.stderr
    assert re.search(r"strata: 0 samples, 1 process", r.stderr), r.stderr
    assert r.report()["samples"] == 0


def test_record_pid_duration(python, tmp_path):
    """record --pid -d attaches to a standby agent, records about that
    long, leaves a complete file, and can attach again."""
    p = start_standby(python, "split.py", 60)
    try:
        st = wait_agent(p.pid, p)
        assert st["sampling"] == "off" and st["output"] == "", st
        out = tmp_path / "attached.strata"
        t0 = time.time()
        r = strata("record", "--pid", p.pid, "-d", "2", "-o", out)
        took = time.time() - t0
        assert r.returncode == 0, r.stderr
        assert 1.8 <= took < 15, took
        assert re.search(r"strata: \d+ samples, 1 process, 1 thread, 0 dropped -> ", r.stderr), r.stderr
        rep = strata("report", "--json", out)
        assert rep.returncode == 0 and "warning" not in rep.stderr, rep.stderr
        import json
        data = json.loads(rep.stdout)
        # CPU time over 2 s of wall time on a shared machine.
        assert 300 <= data["samples"] <= 2600, data["samples"]
        heavy, light = func_row(data, "heavy")["self"], func_row(data, "light")["self"]
        assert 0.68 <= heavy / (heavy + light) <= 0.82, (heavy, light)
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
        assert json.loads(strata("report", "--json", out2).stdout)["samples"] > 100
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
    plain = subprocess.Popen([str(debian_python.exe), str(PROGRAMS / "split.py"), "30"])
    inactive = subprocess.Popen([str(debian_python.exe), str(PROGRAMS / "split.py"), "30"],
                                env=dict(os.environ, LD_PRELOAD=str(AGENT)))
    try:
        time.sleep(0.5)
        r = strata("record", "--pid", plain.pid, "-d", "1", "-o", tmp_path / "x.strata")
        assert r.returncode == 2
        assert "was not started with the strata agent" in r.stderr, r.stderr
        assert "STRATA_AGENT=1" in r.stderr and "LD_PRELOAD=" in r.stderr, r.stderr
        assert not (tmp_path / "x.strata").exists()
        r = strata("top", "--pid", plain.pid, "--no-curses")
        assert r.returncode == 2 and "STRATA_AGENT=1" in r.stderr, r.stderr
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
    # A process killed with SIGKILL leaves its socket behind...
    dead = start_standby(debian_python, "split.py", 30)
    wait_agent(dead.pid, dead)
    s = sock_path(dead.pid)
    assert s.exists()
    dead.kill()
    dead.wait()
    assert s.exists()
    # ...which the next agent to start sweeps away.
    other = start_standby(debian_python, "split.py", 30)
    try:
        wait_agent(other.pid, other)
        assert wait_for(lambda: not s.exists(), timeout=5), "stale socket %s still there" % s
    finally:
        stop(other)

    # A socket nobody listens on, for a live process (a reused pid): the
    # CLI says so and removes it.
    sleeper = subprocess.Popen(["sleep", "30"], env=agent_env())
    try:
        fake = sock_path(sleeper.pid)
        fake.parent.mkdir(mode=0o700, exist_ok=True)
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
