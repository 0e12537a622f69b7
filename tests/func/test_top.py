"""strata top: the live view, driven in a real terminal (tmux, 80x24) and
as plain text."""
import json
import os
import re
import shlex
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import PROGRAMS, STRATA, strata
from test_control import agent_env, start_standby, status, stop, wait_agent, wait_for

ROW = re.compile(r"^\s*(\d+\.\d)\s+(\d+\.\d)\s+(\d+\.\d)\s+(\d+\.\d)\s+(\S+)\s+(\S+)\s*$")


class Screen:
    """A tmux server of our own running one shell script in an 80x24
    window. The script records the terminal settings before and after the
    command and the command's exit status, then waits to be read."""

    def __init__(self, tmp_path, command):
        self.dir = tmp_path
        self.sock = str(tmp_path / "tmux.sock")
        script = tmp_path / "run.sh"
        # Job control, as in an interactive shell: the command gets its own
        # foreground process group, so Ctrl-C reaches it and not the script.
        script.write_text(
            "set -m\n"
            "cd %s\n"
            "stty -g > stty.before\n"
            "%s\n"
            "echo TOP-EXIT=$?\n"
            "stty -g > stty.after\n"
            "sleep 600\n" % (shlex.quote(str(tmp_path)), command))
        subprocess.run(["tmux", "-S", self.sock, "-f", "/dev/null", "new-session", "-d", "-x", "80", "-y", "24",
                        "-s", "top", "bash %s" % shlex.quote(str(script))], check=True)

    def text(self):
        r = subprocess.run(["tmux", "-S", self.sock, "capture-pane", "-p", "-J", "-t", "top"], capture_output=True,
                           text=True)
        return r.stdout

    def keys(self, *keys):
        subprocess.run(["tmux", "-S", self.sock, "send-keys", "-t", "top"] + list(keys), check=True)

    def wait(self, pred, timeout=60, what="the screen"):
        end = time.time() + timeout
        while time.time() < end:
            t = self.text()
            v = pred(t)
            if v:
                return v
            time.sleep(0.25)
        raise AssertionError("timed out waiting for %s; screen:\n%s" % (what, self.text()))

    def exit_status(self, timeout=60):
        m = self.wait(lambda t: re.search(r"TOP-EXIT=(\d+)", t), timeout, "strata top to exit")
        return int(m.group(1))

    def terminal_restored(self):
        before = self.dir / "stty.before"
        after = self.dir / "stty.after"
        wait_for(lambda: after.exists() and after.read_text())
        return before.read_text() == after.read_text()

    def close(self):
        subprocess.run(["tmux", "-S", self.sock, "kill-server"], capture_output=True)


@pytest.fixture
def screen(tmp_path):
    made = []

    def make(command):
        s = Screen(tmp_path, command)
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()


def rows(text):
    out = {}
    for line in text.splitlines():
        m = ROW.match(line)
        if m and m.group(5) not in out:
            out[m.group(5)] = tuple(float(x) for x in m.group(1, 2, 3, 4)) + (m.group(6),)
    return out


def header_samples(text):
    m = re.search(r"^samples (\d+) ", text, re.M)
    return int(m.group(1)) if m else None


def header_pid(text):
    m = re.search(r"pid (\d+)\s*$", text.splitlines()[0] if text else "")
    return int(m.group(1)) if m else None


def top_cmd(*args):
    return " ".join(shlex.quote(str(a)) for a in [STRATA, "top"] + list(args))


def alive(pid):
    try:
        st = Path("/proc/%d/stat" % pid).read_text()
    except OSError:
        return False
    return st[st.rindex(")") + 2] not in "ZX"


@pytest.mark.edge_pythons
def test_split_on_screen(python, screen, tmp_path):
    """The 3:1 split shows as about 3:1 after a few seconds, in 80x24."""
    s = screen(top_cmd("--", python.exe, PROGRAMS / "split.py", 60))
    text = s.wait(lambda t: (header_samples(t) or 0) >= 1500 and {"heavy", "light"} <= set(rows(t)) and t,
                  what="1500 samples with heavy and light")
    assert all(len(line) <= 80 for line in text.splitlines())
    assert text.splitlines()[0].startswith("strata top ") and "split.py" in text.splitlines()[0]
    r = rows(text)
    heavy, light = r["heavy"], r["light"]
    share = heavy[2] / (heavy[2] + light[2])
    assert 0.68 <= share <= 0.82, "since start heavy:light = %.1f:%.1f\n%s" % (heavy[2], light[2], text)
    assert heavy[4] == "split.py:10" and light[4] == "split.py:17"
    # split.py's main is on the stack of both: its total covers theirs.
    mains = [l for l in text.splitlines() if ROW.match(l) and ROW.match(l).group(5, 6) == ("main", "split.py:24")]
    if mains:
        assert float(ROW.match(mains[0]).group(4)) >= heavy[3] + light[3] - 1.0, text
    assert "sampling ON" in text

    # Lines view: the hot line of heavy.
    s.keys("l")
    text = s.wait(lambda t: "split.py:13" in t and t, what="the line view")
    assert "line (function)" in text

    # Save a copy of what was collected so far: a finished profile.
    s.keys("w")
    m = s.wait(lambda t: re.search(r"saved (\d+) bytes to (strata-top-\d+-[\d-]+\.strata)", t), what="the save")
    saved = tmp_path / m.group(2)
    rep = strata("report", "--json", saved)
    assert rep.returncode == 0 and "warning" not in rep.stderr, rep.stderr
    assert json.loads(rep.stdout)["samples"] > 1000

    # Quit, and stop the program top started.
    pid = header_pid(text)
    s.keys("q")
    s.wait(lambda t: "Stop the program?" in t, what="the quit question")
    s.keys("y")
    assert s.exit_status() == 130  # the program was interrupted, like Ctrl-C
    assert s.terminal_restored()
    assert wait_for(lambda: not alive(pid), timeout=10)
    assert "was killed by signal 2" in s.text() or "exited with status" in s.text()


def test_target_killed(debian_python, screen):
    """Killing the program ends top cleanly and restores the terminal."""
    s = screen(top_cmd("--", debian_python.exe, PROGRAMS / "split.py", 60))
    text = s.wait(lambda t: "heavy" in rows(t) and t, what="the first rows")
    pid = header_pid(text)
    assert pid and alive(pid)
    os.kill(pid, signal.SIGKILL)
    assert s.exit_status() == 128 + 9
    out = s.text()
    assert "was killed by signal 9" in out
    assert s.terminal_restored()
    # The final table is printed after the full screen is gone.
    assert "since start" in out


def test_ctrl_c(debian_python, screen):
    s = screen(top_cmd("--", debian_python.exe, PROGRAMS / "split.py", 60))
    text = s.wait(lambda t: "heavy" in rows(t) and t, what="the first rows")
    pid = header_pid(text)
    s.keys("C-c")
    assert s.exit_status() == 130
    assert s.terminal_restored()
    assert wait_for(lambda: not alive(pid), timeout=10)


def test_pause_sampling_and_leave_running(debian_python, screen):
    """'p' turns sampling off in the program and back on; quitting with 'n'
    leaves the program running, detached."""
    s = screen(top_cmd("--", debian_python.exe, PROGRAMS / "split.py", 60))
    text = s.wait(lambda t: "heavy" in rows(t) and t, what="the first rows")
    pid = header_pid(text)
    s.keys("p")
    s.wait(lambda t: "sampling OFF" in t, what="sampling OFF")
    time.sleep(1.5)
    n1 = header_samples(s.text())
    time.sleep(2.5)
    n2 = header_samples(s.text())
    assert n1 == n2, "samples grew while paused: %s -> %s" % (n1, n2)
    s.keys("p")
    s.wait(lambda t: "sampling ON" in t and (header_samples(t) or 0) > n2 + 200, what="sampling to resume")

    s.keys("q")
    s.wait(lambda t: "Stop the program?" in t, what="the quit question")
    s.keys("n")
    assert s.exit_status() == 0
    assert s.terminal_restored()
    assert "left " in s.text() and "running" in s.text()
    try:
        assert alive(pid)
        st = wait_agent(pid)
        assert st["sampling"] == "off" and st["output"] == "", st
    finally:
        os.kill(pid, signal.SIGTERM)


def test_attach_on_screen(debian_python, screen):
    p = start_standby(debian_python, "split.py", 60)
    try:
        wait_agent(p.pid, p)
        s = screen(top_cmd("--pid", p.pid))
        text = s.wait(lambda t: {"heavy", "light"} <= set(rows(t)) and t, what="rows of the attached process")
        assert header_pid(text) == p.pid
        s.keys("q")  # not ours to stop: no question
        assert s.exit_status() == 0
        assert s.terminal_restored()
        assert "detached from process %d" % p.pid in s.text()
        assert p.poll() is None
        st = status(p.pid)
        assert st["sampling"] == "off" and st["output"] == "", st
    finally:
        stop(p)


def final_block(out):
    """Rows of the last 'since start' block of plain output."""
    block = out[out.rindex("  since start"):]
    r = {}
    for line in block.splitlines():
        m = re.match(r"^\s*(\d+\.\d)\s+(\d+\.\d)\s+(\S+)\s+(\S+)", line)
        if m:
            r.setdefault(m.group(3), (float(m.group(1)), float(m.group(2)), m.group(4)))
    return r


@pytest.mark.edge_pythons
def test_no_curses(python):
    r = strata("top", "--no-curses", "-i", "0.5", "-n", "5", "--", python.exe, PROGRAMS / "split.py", 3)
    assert r.returncode == 0, r.stderr
    blocks = [b for b in r.stdout.split("\n\n") if b.startswith("strata top ")]
    assert len(blocks) >= 3, r.stdout
    assert re.search(r"^\s+self%\s+total%\s+self%\s+total%\s+function$", r.stdout, re.M)
    fin = final_block(r.stdout)
    heavy, light = fin["heavy"][0], fin["light"][0]
    assert 0.68 <= heavy / (heavy + light) <= 0.82, fin
    assert "exited with status 0" in r.stdout
    # Not a terminal: plain text without being asked.
    r = strata("top", "-i", "0.5", "--", python.exe, PROGRAMS / "split.py", 1)
    assert r.returncode == 0 and "since start" in r.stdout and "\x1b[" not in r.stdout, r.stdout


def test_no_curses_attach(debian_python):
    p = start_standby(debian_python, "split.py", 60)
    try:
        wait_agent(p.pid, p)
        top = subprocess.Popen([str(STRATA), "top", "--pid", str(p.pid), "--no-curses", "-i", "0.5"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for(lambda: (status(p.pid) or {}).get("sampling") == "on")
        time.sleep(3)
        top.send_signal(signal.SIGINT)
        out, err = top.communicate(timeout=30)
        assert top.returncode == 0, err
        assert "heavy" in out and "light" in out, out
        assert "detached from process %d" % p.pid in out
        assert p.poll() is None
        st = status(p.pid)
        assert st["sampling"] == "off" and st["output"] == "", st
    finally:
        stop(p)


def test_borrowed_recording(debian_python, tmp_path):
    """top --pid on a process strata record is already recording reads
    that recording, and leaves sampling as it found it."""
    out = tmp_path / "rec.strata"
    rec = subprocess.Popen([str(STRATA), "record", "--paused", "-o", str(out), "--", str(debian_python.exe),
                            str(PROGRAMS / "split.py"), "60"], stderr=subprocess.PIPE)
    try:
        from test_control import python_child
        pid = python_child(rec.pid)
        wait_agent(pid, rec)
        top = subprocess.Popen([str(STRATA), "top", "--pid", str(pid), "--no-curses", "-i", "0.5"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for(lambda: (status(pid) or {}).get("sampling") == "on")
        time.sleep(2)
        top.send_signal(signal.SIGINT)
        o, e = top.communicate(timeout=30)
        assert top.returncode == 0, e
        assert "heavy" in o and "still recorded to %s" % out in o, o
        st = status(pid)
        assert st["sampling"] == "off" and st["output"] == str(out), st
    finally:
        rec.terminate()
        rec.wait(30)


def test_bad_command_and_options(debian_python):
    r = strata("top", "--no-curses", "--", "/nonexistent/program")
    assert r.returncode == 127 and "command not found" in r.stderr, (r.returncode, r.stderr)
    r = strata("top", "-F", "0", "--", "true")
    assert r.returncode == 2 and "invalid frequency" in r.stderr
    r = strata("top")
    assert r.returncode == 2
    r = strata("top", "--pid", "1", "--objects-rate", "x")
    assert r.returncode == 2 and "invalid --objects-rate" in r.stderr


def test_attach_with_settings(debian_python):
    """top --pid --mode wall --native on a process started without strata
    loads its agent with them (as record --pid does): the sleeping threads
    show, the agent says wall and native; asking for other settings then is
    refused in one line, and the program runs on."""
    from test_attach import plain
    from test_attach import status as ctl_status
    p = plain(debian_python, PROGRAMS / "threads4.py", 60)
    try:
        time.sleep(0.5)
        top = subprocess.Popen([str(STRATA), "top", "--pid", str(p.pid), "--mode", "wall", "--native",
                                "--no-curses", "-i", "0.5", "-n", "60"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
        wait_for(lambda: (status(p.pid) or {}).get("sampling") == "on", timeout=30)
        time.sleep(2.5)
        top.send_signal(signal.SIGINT)
        out, err = top.communicate(timeout=30)
        assert top.returncode == 0, err
        # 60 rows: with --native, how many native leaves (futex, clock
        # calls) show varies, and with 15 rows they can push sleepy (no
        # self time) off the end.
        last = out.split("strata top ")[-1]
        assert "busy" in last and "sleepy" in last, out
        st = ctl_status(p.pid)
        assert st["mode"] == "wall" and st["native"] == "1", st
        r = strata("top", "--pid", p.pid, "--mode", "cpu", "--no-curses", timeout=60)
        assert r.returncode == 2 and "fixed when it was loaded" in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert p.poll() is None
    finally:
        p.kill()
        p.communicate(timeout=20)


def test_keys_filters_and_wall_mode(debian_python, screen):
    """Thread and process filters, sorting, freezing and help; --mode is
    passed on to strata record (wall mode shows the sleeping threads)."""
    s = screen(top_cmd("--mode", "wall", "--", debian_python.exe, PROGRAMS / "threads4.py", 60))
    text = s.wait(lambda t: {"busy", "sleepy"} <= set(rows(t)) and (header_samples(t) or 0) > 2000 and t,
                  what="busy and sleepy rows")
    r = rows(text)
    assert 25 <= r["busy"][3] <= 75 and 25 <= r["sleepy"][3] <= 75, text

    def cycle_to(key, label):
        for _ in range(12):
            t = s.text()
            if label in t:
                return t
            s.keys(key)
            time.sleep(0.4)
        raise AssertionError("never reached %r:\n%s" % (label, s.text()))

    cycle_to("T", "thread busy-1 (")
    text = s.wait(lambda t: "busy" in rows(t) and re.search(r"threads 1\b", t) and t, what="the busy-1 filter")
    assert rows(text)["busy"][3] >= 90, text
    assert "sleepy" not in rows(text) or rows(text)["sleepy"][3] < 5
    cycle_to("T", "thread sleepy-2 (")
    text = s.wait(lambda t: "sleepy" in rows(t) and t, what="the sleepy-2 filter")
    assert rows(text)["sleepy"][3] >= 90, text
    cycle_to("T", "thread all")

    pid = header_pid(s.text())
    cycle_to("P", "process %d" % pid)
    cycle_to("P", "process all")

    # Sort by total: the threads' entry points come first.
    def sorted_by(t, col):
        vals = [v[col] for v in rows(t).values()]
        return len(vals) > 3 and vals == sorted(vals, reverse=True)

    s.keys("t")
    s.wait(lambda t: sorted_by(t, 1), what="rows sorted by total")
    s.keys("a")
    s.wait(lambda t: sorted_by(t, 3), what="rows sorted by total since start")
    s.keys("s")
    s.wait(lambda t: sorted_by(t, 2), what="rows sorted by self since start")
    s.keys("e")  # one event only: stays on samples
    s.keys("Space")
    s.wait(lambda t: "FROZEN" in t, what="the frozen marker")
    frozen = s.text()
    time.sleep(2.5)
    assert header_samples(s.text()) == header_samples(frozen)
    s.keys("Space")
    s.wait(lambda t: "FROZEN" not in t and header_samples(t) != header_samples(frozen), what="unfreezing")
    s.keys("?")
    s.wait(lambda t: "strata top keys" in t, what="the help")
    s.keys("x")
    s.wait(lambda t: "sampling ON" in t, what="the view after help")
    s.keys("q")
    s.wait(lambda t: "Stop the program?" in t, what="the quit question")
    s.keys("c")  # cancel: top goes on
    s.wait(lambda t: "Stop the program?" not in t and "sampling ON" in t, what="the view after cancel")
    s.keys("q")
    s.wait(lambda t: "Stop the program?" in t, what="the quit question")
    s.keys("y")
    # Non-daemon threads keep Python alive after Ctrl-C: top goes on to
    # SIGTERM after a while.
    assert s.exit_status() in (130, 143)
    assert s.terminal_restored()


def test_native_passed_on(debian_python, tmp_path):
    out = tmp_path / "n.strata"
    r = strata("top", "--no-curses", "--native", "-o", out, "--", debian_python.exe, PROGRAMS / "split.py", 1)
    assert r.returncode == 0, r.stderr
    assert "profile in %s" % out in r.stdout
    dump = strata("dump", out).stdout
    assert re.search(r"process pid=\d+ .*flags=0x1 ", dump), [l for l in dump.splitlines() if "process" in l]
    assert "module " in dump or "MODULE" in dump.upper()
