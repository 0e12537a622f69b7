"""strata record / report, end to end, on programs whose answer is known."""
import json
import os
import platform
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import PROGRAMS, ROOT, STRATA, chunk_spans, func_row, share, strata


def hot_line(path, marker="# HOT"):
    for n, text in enumerate(Path(path).read_text().splitlines(), 1):
        if marker in text:
            return n
    raise AssertionError("no %s in %s" % (marker, path))


def test_split_3_to_1(python, record):
    r = record(python, "split.py", "3")
    assert r.returncode == 0, r.stderr
    rep = r.report()
    heavy = func_row(rep, "heavy")["self"]
    light = func_row(rep, "light")["self"]
    assert heavy + light > 0.8 * rep["samples"], rep["functions"][:5]
    pct = 100.0 * heavy / (heavy + light)
    assert 68 <= pct <= 82, "heavy:light = %d:%d (%.1f%%), expected 75%% +- 7" % (heavy, light, pct)
    # main() is on the stack of every sample of both. split.py's main: the
    # start-up's site.main, also `main`, comes first by self when split.py's
    # has no sample of its own (issue 21: "3 of 3001" was site.main's).
    assert func_row(rep, "main", "split.py")["total"] >= heavy + light


@pytest.mark.edge_pythons
def test_summary_line(python, record):
    r = record(python, "split.py", "0.5")
    m = re.search(r"strata: (\d+) samples, 1 process, (\d+) threads?, (\d+) dropped -> (\S+)", r.stderr)
    assert m, r.stderr
    assert int(m.group(1)) == r.report()["samples"]
    assert m.group(4) == str(r.path)


def test_hot_line(python, record):
    r = record(python, "hotline.py", "2")
    rep = r.report()
    line = hot_line(PROGRAMS / "hotline.py")
    top = rep["lines"][0]
    assert top["function"] == "work" and top["line"] == line, rep["lines"][:5]
    assert top["self"] > 0.5 * rep["samples"]
    assert top["kind"] == "python"


@pytest.mark.edge_pythons
def test_report_json_keys(python, record):
    r = record(python, "split.py", "0.5")
    rep = r.report()
    for key in ("samples", "duration_s", "mode", "rate_hz", "dropped", "python_version", "command",
                "processes", "threads", "functions", "lines"):
        assert key in rep, key
    assert rep["mode"] == "cpu" and rep["rate_hz"] == 1000
    assert rep["python_version"] == python.version
    assert "split.py" in rep["command"]
    assert 0.3 < rep["duration_s"] < 30
    for p in rep["processes"]:
        assert set(("pid", "command", "samples")) <= set(p)
    for t in rep["threads"]:
        assert set(("pid", "tid", "name", "samples")) <= set(t)
    for f in rep["functions"]:
        assert set(("name", "file", "line", "kind", "self", "total")) <= set(f)
        assert f["self"] <= f["total"]
    for ln in rep["lines"]:
        assert set(("file", "line", "function", "kind", "self", "total")) <= set(ln)


def test_cpu_mode_ignores_sleeping_threads(python, record):
    r = record(python, "threads4.py", "2")
    rep = r.report()
    names = {t["name"]: t["samples"] for t in rep["threads"]}
    assert {"busy-1", "busy-2"} <= set(names), names
    # The sleepers wake every 50 ms for a moment: that moment is all they
    # get. (The busy threads run for a wall-clock time, so on a loaded
    # machine their share against the fixed start-up cost varies.)
    sleepy = names.get("sleepy-1", 0) + names.get("sleepy-2", 0)
    busy = names["busy-1"] + names["busy-2"]
    assert sleepy <= 0.03 * rep["samples"], names
    assert busy >= 0.8 * rep["samples"], names


def test_wall_mode_sees_all_threads(python, record):
    r = record(python, "threads4.py", "2", opts=["--mode", "wall"])
    rep = r.report()
    assert rep["mode"] == "wall"
    threads = {t["name"]: t for t in rep["threads"]}
    names = ("busy-1", "busy-2", "sleepy-1", "sleepy-2", "MainThread")
    for name in names:
        assert name in threads, threads.keys()
    # About 2 s at 1000 Hz each, running or blocked alike. A running
    # thread that waits for a CPU takes one signal for several ticks and
    # counts them all (test_idle.py), but on a loaded machine (make check
    # runs the sid stage beside the CPython tests) ticks the helper itself
    # cannot make are lost: before those were counted, a busy thread got
    # 906 samples where a sleeping one got 2141 under 3.14, and after an
    # attach one got 0.32 of the most. Every thread is still seen
    # throughout.
    most = max(threads[n]["samples"] for n in names)
    for name in names:
        assert threads[name]["samples"] > 300, (name, threads[name])
        assert threads[name]["samples"] > 0.2 * most, (name, threads[name], most)
    # The sleepers spend nearly all their time blocked.
    for name in ("sleepy-1", "sleepy-2"):
        assert threads[name]["idle"] > 0.9 * threads[name]["samples"], threads[name]
    sleepy = func_row(rep, "sleepy")
    assert sleepy["total"] > 0.9 * (threads["sleepy-1"]["samples"] + threads["sleepy-2"]["samples"])


def test_subprocess_child_profiled(python, record):
    r = record(python, "subproc.py")
    assert r.returncode == 0, r.stderr
    assert "child done 0" in r.stdout
    rep = r.report()
    pids = {p["pid"]: p for p in rep["processes"]}
    assert len(pids) == 2, rep["processes"]
    child = [p for p in rep["processes"] if "child" in p["command"]]
    assert child, rep["processes"]
    cpid = child[0]["pid"]
    crep = r.report("--pid", str(cpid))
    assert func_row(crep, "child_work")["total"] > 0.8 * crep["samples"]
    assert not [f for f in crep["functions"] if f["name"] == "parent_work"]
    assert all(t["pid"] in pids for t in rep["threads"])


def test_failed_exec_keeps_streams_whole(python, record):
    """A child that runs Python and then fails exec after exec (PATH
    search) goes on in a new stream each time: every stream begins with its
    process and ends, and the file reads without a warning (the old
    helper's last chunk once went out under the new stream's id: "process
    N stopped without finishing" beside "process 0: 1 chunk(s) missing")."""
    r = record(python, "failed_exec.py", "5")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "failed to start: 5 of 5\nthen one that starts 0\n", r.stdout
    assert "warning" not in r.stderr, r.stderr
    rep = strata("report", str(r.path))
    assert rep.returncode == 0 and "warning" not in rep.stderr, rep.stderr
    # The parent, five children (one stream each once they sampled), the
    # sixth child and the Python it became.
    data = r.report()
    assert len(data["processes"]) >= 3, data["processes"]
    assert all(p["pid"] for p in data["processes"]), data["processes"]


@pytest.mark.edge_pythons
@pytest.mark.parametrize("mode", ["cpu", "wall"])
def test_exec_while_the_helper_cannot_answer(python, record, mode):
    """An exec waits at most 5 s for the helper to finish the stream. In
    cpu mode the helper holds the thread's perf event and switches it off
    before it answers; unanswered (a stopped or starved helper), the event
    went on signalling the thread, which the exec keeps, and the new image
    (SIGPROF back to its default) was killed: exit 155, no "done". The
    agent now switches it off through a copy of the helper's descriptor."""
    r = record(python, "exec_stalled_helper.py", opts=["--mode", mode], timeout=120)
    lines = r.stdout.splitlines()
    assert lines and lines[0].startswith("helper ") and lines[0] != "helper None", r.stdout
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    assert lines[1:] == ["done"], r.stdout
    assert r.report()["samples"] > 0


@pytest.fixture(scope="session")
def holdlock(tmp_path_factory):
    """native/holdlock.c built: it holds a process's strata thread list."""
    exe = tmp_path_factory.mktemp("holdlock") / "holdlock"
    subprocess.run(["gcc", "-O2", "-I", str(ROOT / "src"), "-o", str(exe),
                    str(PROGRAMS / "native" / "holdlock.c"), "-lpthread"], check=True)
    return exe


@pytest.mark.edge_pythons
@pytest.mark.parametrize("mode", ["cpu", "wall"])
def test_thread_and_fork_while_the_list_is_held(python, record, holdlock, mode):
    """A thread's start and a fork child wait for the agent's thread list,
    which the helper holds for moments: a helper stopped (SIGSTOP, a
    debugger) or starved while it held the list made them wait as long,
    forever for a stopped one. They wait 2 s at most now (100 ms while the
    holder stays put); the thread is not sampled and the child is not
    profiled, both said in the profile, and sampling goes on as before
    once the list is let go. holdlock keeps it 8 s: a fork child's first
    step took 8 s, and a thread's start as long, before the bound."""
    r = record(python, "held_list.py", holdlock, 8, opts=["--mode", mode], timeout=120)
    lines = r.stdout.splitlines()
    assert r.returncode == 0 and lines and lines[-1] == "done", (r.returncode, r.stdout, r.stderr)
    said = {l.split()[0]: l.split()[1] for l in lines[:-1]}
    assert float(said["child"]) < 5.5 and float(said["thread"]) < 5.5, r.stdout
    assert said["fork"] == "7", r.stdout
    assert "are not sampled: it did not let go within 2 s" in r.stderr, r.stderr
    assert "held the agent's thread list for over 2 s" in r.stderr, r.stderr
    rep = r.report()
    threads = {t["name"]: t for t in rep["threads"]}
    assert "during-hold" not in threads, threads.keys()
    assert threads.get("after-hold", {}).get("samples", 0) > 0, rep["threads"]
    assert any("did not let go" in w for w in rep["warnings"]), rep["warnings"]
    assert any("not profiled" in w or "held the agent's thread list" in w for w in rep["warnings"]), \
        rep["warnings"]


def test_right_answers(python, record):
    r = record(python, "answers.py")
    assert r.returncode == 0, r.stderr
    rep = r.report()
    names = {f["name"]: f for f in rep["functions"]}
    expect = ["Shape.area", "outer.<locals>.inner", "counter", "crunch", "handler_work", "recurse",
              "late_work", "short_lived"]
    for name in expect:
        assert name in names, (name, sorted(names)[:40])
    # Each part burns 0.3 s: its total is about 300 samples.
    for name in ("Shape.area", "outer.<locals>.inner", "handler_work", "late_work", "short_lived"):
        assert names[name]["total"] > 150, (name, names[name])
    assert names["counter"]["self"] > 100
    # exec() code is attributed to its own pseudo-file.
    string_code = [f for f in rep["functions"] if f["file"] == "<string>" and f["self"] > 100]
    assert string_code, [f for f in rep["functions"] if f["file"] == "<string>"]
    # Deep recursion: the stacks are cut at the cap and marked, never lost.
    marker = [f for f in rep["functions"] if f["name"].startswith("[truncated")]
    assert marker and marker[0]["total"] > 150, marker
    assert names["recurse"]["total"] > 150
    # The thread started mid-run has its name.
    assert "short-lived" in {t["name"] for t in rep["threads"]}


def test_entry_points(python, record, tmp_path):
    """python -m pkg, a script with a shebang, and a console entry point."""
    pkg = tmp_path / "pkgdemo"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "__main__.py").write_text((PROGRAMS / "split.py").read_text())
    out = tmp_path / "m.strata"
    proc = strata("record", "-o", out, "--", python.exe, "-m", "pkgdemo", "0.5", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    rep = strata("report", "--json", out)
    assert '"heavy"' in rep.stdout

    script = tmp_path / "tool"
    script.write_text("#!%s\n" % python.exe + (PROGRAMS / "split.py").read_text())
    script.chmod(0o755)
    out = tmp_path / "s.strata"
    proc = strata("record", "-o", out, "--", script, "0.5")
    assert proc.returncode == 0, proc.stderr
    assert '"heavy"' in strata("report", "--json", out).stdout

    envscript = tmp_path / "tool2"
    envscript.write_text("#!/usr/bin/env python3\n" + (PROGRAMS / "split.py").read_text())
    envscript.chmod(0o755)
    out = tmp_path / "e.strata"
    env = dict(os.environ, PATH="%s:%s" % (Path(python.exe).parent, os.environ["PATH"]))
    proc = strata("record", "-o", out, "--", envscript, "0.5", env=env)
    assert proc.returncode == 0, proc.stderr
    assert '"heavy"' in strata("report", "--json", out).stdout


def test_console_entry_point_pytest(debian_python, tmp_path):
    """A console entry point (pytest's own) is profiled like any script."""
    if not Path("/usr/bin/pytest-3").exists():
        pytest.fail("Debian's pytest (/usr/bin/pytest-3) is not installed (python3-pytest; scripts/deps.sh)")
    t = tmp_path / "test_burn.py"
    t.write_text("def test_burn():\n    s = 0\n    for i in range(3_000_000):\n        s += i\n")
    out = tmp_path / "p.strata"
    proc = strata("record", "-o", out, "--", "/usr/bin/pytest-3", "-q", "-p", "no:cacheprovider", str(t), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rep = strata("report", "--json", out)
    assert '"test_burn"' in rep.stdout


def run_plain(python, prog, *args):
    return subprocess.run([str(python.exe), str(PROGRAMS / prog)] + list(args), capture_output=True, text=True,
                          timeout=120)


MODES = {"cpu": ["--mode", "cpu"], "wall": ["--mode", "wall"], "native": ["--native"]}


def same_output(text):
    """Output with what differs from run to run anyway (process ids in
    CPython's own warnings) made equal."""
    return re.sub(r"pid=\d+", "pid=N", text)


def profile_whole(path):
    """The profile reads without a warning, and every process's stream
    ended (none cut short, none left unfinished)."""
    rep = strata("report", "--json", path)
    assert rep.returncode == 0, rep.stderr
    assert rep.stderr == "", rep.stderr
    dump = strata("dump", path).stdout
    procs = dump.count("] process pid=")
    ends = dump.count("] process-end ")
    assert procs == ends, (procs, ends)
    return json.loads(rep.stdout)


@pytest.mark.edge_pythons
@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("prog", ["behave_signals.py", "behave_fork.py", "behave_forkthread.py",
                                  "behave_forkwarn.py"])
def test_program_behaves_the_same(python, record, mode, prog):
    """Same stdout, same stderr byte for byte (warnings included: CPython
    3.12+ warns on fork() in a process it counts more than one thread in),
    same exit status, no hang, in every mode; and the profile is whole."""
    plain = run_plain(python, prog)
    r = record(python, prog, opts=MODES[mode] + ["-q"], timeout=120)
    assert r.returncode == plain.returncode, (r.stderr, plain.stderr)
    assert r.stdout == plain.stdout
    assert same_output(r.stderr) == same_output(plain.stderr)
    profile_whole(r.path)


INHERITED_IGNORED = ("SIGINT", "SIGQUIT", "SIGHUP", "SIGTERM", "SIGUSR2")
INHERITED_BLOCKED = ("SIGUSR1", "SIGWINCH")


def start_like_a_background_job():
    """What the program is started with: signals ignored and blocked as a
    shell without job control or a service manager may leave them."""
    for name in INHERITED_IGNORED:
        signal.signal(getattr(signal, name), signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_BLOCK, [getattr(signal, n) for n in INHERITED_BLOCKED])


@pytest.mark.parametrize("mode", sorted(MODES))
def test_inherited_ignored_and_blocked_signals(python, tmp_path, mode):
    """Signals the program was started with ignored stay ignored, and
    blocked ones blocked, in its main thread, its threads and its
    children, as Python sees them; interrupt_main() does nothing when
    SIGINT is ignored, as without strata (CPython's test_threading hangs
    otherwise in a `make check &`). Same output with and without strata."""
    prog = str(PROGRAMS / "behave_inherited.py")
    plain = subprocess.run([str(python.exe), prog], capture_output=True, text=True, timeout=120,
                           preexec_fn=start_like_a_background_job)
    assert plain.returncode == 0, plain.stderr
    assert "SIGINT=IGN" in plain.stdout and "interrupt_main: nothing" in plain.stdout, plain.stdout
    out = tmp_path / "p.strata"
    r = subprocess.run([str(STRATA), "record", "-q", "-o", str(out)] + MODES[mode] + ["--", str(python.exe), prog],
                       capture_output=True, text=True, timeout=120, preexec_fn=start_like_a_background_job)
    assert r.returncode == 0, r.stderr
    assert r.stdout == plain.stdout
    assert r.stderr == plain.stderr
    profile_whole(out)


def test_profile_whole_when_record_returns(python, record):
    """Children killed a moment after they started, then the program
    ends: record returns only once every helper has written its process's
    stream, so the profile it leaves reads whole at once (CI once caught
    the report of behave_fork.py reading a pool worker's stream before its
    helper had ended it; this program did so about one run in four)."""
    for i in range(5):
        r = record(python, "behave_killkids.py", opts=["-q"], timeout=120)
        assert r.returncode == 0, r.stderr
        assert r.stdout == "killed 12\n"
        # Children killed before their first sample leave no stream.
        assert len(profile_whole(r.path)["processes"]) >= 1


@pytest.mark.parametrize("mode", sorted(MODES))
def test_program_sees_only_its_descriptors(python, record, mode):
    """While the program runs the agent holds no descriptor in it (docs/agent.md):
    the descriptors a program lists (with threads running, after a fork, in
    the fork child and a subprocess) and the numbers it is given are those
    it gets without strata, in every mode."""
    plain = run_plain(python, "behave_fds.py")
    assert plain.returncode == 0, plain.stderr
    r = record(python, "behave_fds.py", opts=MODES[mode] + ["-q"], timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout == plain.stdout
    # 3.12+ warns of the fork with threads running, naming the pid.
    assert same_output(r.stderr) == same_output(plain.stderr)
    assert profile_whole(r.path)["samples"] > 0


def test_event_descriptors_are_the_documented_ones(python, record):
    """-e keeps each thread's event group in the process (the handler reads
    its counters): one descriptor per event per thread, close-on-exec and
    above 511; below that, and in a subprocess, the program sees what it
    sees without strata."""
    plain = run_plain(python, "behave_fds.py")
    r = record(python, "behave_fds.py", opts=["-e", "task-clock", "-q"], timeout=120)
    assert r.returncode == 0, r.stderr
    ours = {}

    def low(line):
        head, _, rest = line.partition(":")
        def strip(m):
            nums = [int(x) for x in m.group(1).split(", ") if x]
            ours.setdefault(head, []).append(sum(1 for n in nums if n >= 512))
            return "[%s]" % ", ".join(str(n) for n in nums if n < 512)
        return head + ":" + re.sub(r"\[([\d, ]*)\]", strip, rest)

    assert [low(l) for l in r.stdout.splitlines()] == plain.stdout.splitlines()
    # One per thread alive at each listing: main; main and 3 workers; in
    # the fork child, the forking thread and the one it started; the
    # subprocess's main thread. A joined thread may not have ended yet when
    # join() returns (CPython releases it first): its descriptor goes when
    # it does.
    assert {k: v for k, v in ours.items() if k != "after fork"} == {
        "start": [1], "in threads": [4], "with threads": [4], "child": [1, 2], "subprocess": [1]}, ours
    assert ours["child"] == [1, 2], ours
    assert 1 <= ours["after fork"][0] <= 4, ours
    assert same_output(r.stderr) == same_output(plain.stderr)


@pytest.mark.edge_pythons
@pytest.mark.parametrize("opts", [["-e", "task-clock", "-c", "100000"], ["-F", "10000"]], ids=["events", "cpu"])
def test_exec_after_closing_every_descriptor(python, record, opts):
    """A fork child that closes every descriptor and execs (subprocess
    before 3.10, or with preexec_fn) runs its new program unharmed. Its -e
    group, mapped, outlived the closed descriptor and signalled on through
    the exec's own kernel work: the new program, SIGPROF back to its
    default, died of it (40 of 40 children at a 100 us period; at the
    default period, now and then: test_event_descriptors_are_the_documented_ones
    once). The group is unmapped before the exec now."""
    r = record(python, "exec_closed.py", "20", opts=opts + ["-q"], timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "children: 40 died: []\n", r.stdout
    assert "warning" not in r.stderr, r.stderr


@pytest.mark.edge_pythons
@pytest.mark.parametrize("mode", sorted(MODES))
def test_failed_exec_carries_on(python, record, mode):
    """A failed exec ends the stream and starts a continued one with a new
    helper (handed the shared region again): the thread that tried is
    sampled right away, new threads too, and no descriptor is left over."""
    plain = run_plain(python, "behave_execfail.py")
    r = record(python, "behave_execfail.py", opts=MODES[mode] + ["-q"], timeout=120)
    assert r.returncode == plain.returncode == 0, r.stderr
    assert r.stdout == plain.stdout
    assert r.stderr == plain.stderr
    data = profile_whole(r.path)
    dump = strata("dump", r.path).stdout
    assert dump.count("] process pid=") == 2, dump
    for name in ("before", "after_main", "after_thread"):
        assert func_row(data, name)["total"] > 0, name


@pytest.mark.edge_pythons
@pytest.mark.parametrize("sig", ["TERM", "HUP", "INT", "KILL"])
def test_killed_by_signal_profile_whole(python, record, sig):
    """A process ended by a signal's default action dies exactly as without
    the agent (nothing of ours handles the signal), and its helper still
    writes everything it sampled and ends the stream."""
    plain = run_plain(python, "behave_die.py", sig)
    r = record(python, "behave_die.py", sig, opts=["-q"], timeout=120)
    assert plain.returncode == -getattr(signal, "SIG" + sig)
    assert r.returncode == plain.returncode, r.stderr
    assert r.stdout == plain.stdout and r.stderr == plain.stderr
    data = profile_whole(r.path)
    assert data["samples"] > 100, data["samples"]
    assert func_row(data, "burn")["self"] > 0
    ends = [l for l in strata("dump", r.path).stdout.splitlines() if "process-end" in l]
    assert ends and "reason=4" in ends[0], ends


@pytest.mark.parametrize("mode", ["cpu", "wall"])
def test_no_stray_eintr(python, record, mode):
    """Calls that a signal handler always cuts short (nanosleep, select,
    poll, epoll_wait), made from C at a high sample rate: the profiler's
    signals never make them fail with EINTR (the agent holds SIGPROF inside
    them). Without that, several percent of them failed here."""
    r = record(python, "eintr.py", "1.0", opts=["--mode", mode, "-F", "5000", "-q"])
    assert r.returncode == 0, r.stderr
    assert "calls>=2000: True" in r.stdout, r.stdout
    assert "eintr: 0" in r.stdout, r.stdout
    assert r.report()["samples"] > 100


@pytest.mark.skipif(platform.machine() != "x86_64", reason="x86-64 system calls")
def test_syscalls_not_skipped(python, record, tmp_path):
    """A sampling signal that lands on a `syscall` instruction before it
    runs, while a signal of the program is pending: the agent must not take
    the call for one the kernel interrupted and restarted (it returned EINTR
    past it, so getppid failed, 40-75 times a run, and a skipped
    rt_sigreturn crashed CPython's test_signal)."""
    lib = tmp_path / "rawsys.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-o", str(lib), str(PROGRAMS / "native" / "rawsys.c")],
                   check=True)
    r = record(python, "rawsys.py", lib, "60", opts=["-F", "5000", "-q"], timeout=120)
    assert r.returncode == 0, r.stderr
    assert "failed: 0" in r.stdout, r.stdout
    assert "handled: True" in r.stdout, r.stdout
    assert r.report()["samples"] > 100


def test_exit_status_and_signals(python, tmp_path):
    out = tmp_path / "x.strata"
    proc = strata("record", "-q", "-o", out, "--", python.exe, "-c", "import sys; sys.exit(3)")
    assert proc.returncode == 3
    proc = strata("record", "-q", "-o", out, "--", python.exe, "-c",
                  "import os, signal; os.kill(os.getpid(), signal.SIGTERM)")
    assert proc.returncode == -signal.SIGTERM
    # A signal sent to strata is passed on to the command.
    p = subprocess.Popen([str(STRATA), "record", "-q", "-o", str(out), "--", str(python.exe), "-c",
                          "import signal, sys, time\n"
                          "signal.signal(signal.SIGTERM, lambda *a: sys.exit(9))\n"
                          "print('ready', flush=True)\n"
                          "time.sleep(60)\n"], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    # Sent once the program sleeps: a SIGTERM that comes between CPython's
    # last check for signals and the sleep's system call waits out the
    # sleep, with or without a profiler (make check's load once put it
    # there, 3.11).
    from test_control import python_child, wait_for
    kid = python_child(p.pid)
    sleeping = {"23", "35", "230", "270"}  # select, nanosleep, clock_nanosleep, pselect6
    assert wait_for(lambda: Path("/proc/%d/syscall" % kid).read_text().split()[0] in sleeping), \
        Path("/proc/%d/syscall" % kid).read_text()
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=30) == 9
    rep = strata("report", "--json", out)
    assert rep.returncode == 0, rep.stderr


def test_sigkill_leaves_complete_profile(python, tmp_path):
    """A process killed by SIGKILL cannot flush anything itself: its helper
    sees it gone and writes what the rings hold, then ends its stream."""
    out = tmp_path / "k.strata"
    p = subprocess.Popen([str(STRATA), "record", "-o", str(out), "--", str(python.exe),
                          str(PROGRAMS / "split.py"), "30"], stderr=subprocess.PIPE, text=True)
    end = time.monotonic() + 10
    child = []
    while not child and time.monotonic() < end:
        time.sleep(0.05)
        child = subprocess.run(["pgrep", "-P", str(p.pid)], capture_output=True, text=True).stdout.split()
    assert child, "no child of strata"
    # Killed once it has burnt 1.5 s of CPU (not after so much wall time: a
    # loaded machine gives it less).
    tick = os.sysconf("SC_CLK_TCK")
    end = time.monotonic() + 60
    while time.monotonic() < end:
        fields = Path("/proc/%s/stat" % child[0]).read_text().rsplit(")", 1)[1].split()
        if (int(fields[11]) + int(fields[12])) / tick >= 1.5:
            break
        time.sleep(0.1)
    os.kill(int(child[0]), signal.SIGKILL)
    p.wait(timeout=30)
    err = p.stderr.read()
    assert p.returncode == -signal.SIGKILL
    assert "without finishing" not in err and "cut short" not in err, err
    rep = strata("report", "--json", out)
    assert rep.returncode == 0, rep.stderr
    assert rep.stderr == "", rep.stderr
    import json
    data = json.loads(rep.stdout)
    assert data["samples"] > 1000, data["samples"]
    assert func_row(data, "heavy")["self"] > 0
    # The stream says how the process ended: by a signal.
    dump = strata("dump", out).stdout
    ends = [l for l in dump.splitlines() if "process-end" in l]
    assert ends and all("reason=4" in l for l in ends), ends


def test_no_python_seen(tmp_path):
    out = tmp_path / "t.strata"
    proc = strata("record", "-o", out, "--", "/bin/true")
    assert proc.returncode != 0
    assert "no Python process was seen" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_command_not_found(tmp_path):
    proc = strata("record", "-o", tmp_path / "x.strata", "--", "no-such-command-strata")
    assert proc.returncode == 127
    assert proc.stderr.strip() == "strata: no-such-command-strata: command not found"
    proc = strata("record", "-o", tmp_path / "x.strata", "--", "/etc/passwd")
    assert proc.returncode == 126
    assert proc.stderr.strip() == "strata: /etc/passwd: Permission denied"


@pytest.mark.edge_pythons
def test_unwritable_output(python, tmp_path):
    proc = strata("record", "-o", "/nonexistent-dir/x.strata", "--", python.exe, "-c", "pass")
    assert proc.returncode != 0
    assert proc.stderr.startswith("strata: cannot write /nonexistent-dir/x.strata")
    assert len(proc.stderr.strip().splitlines()) == 1


def test_bad_options():
    for args in (["record", "-F", "0", "--", "true"], ["record", "--mode", "fast", "--", "true"],
                 ["record"], ["report"], ["nosuchcommand"]):
        proc = strata(*args)
        assert proc.returncode == 2, args
        assert proc.stderr.startswith("strata: ") or proc.stderr.startswith("usage: "), (args, proc.stderr)


@pytest.fixture(scope="module")
def good_file(tmp_path_factory):
    from conftest import debian_interp
    it = debian_interp().require()
    out = tmp_path_factory.mktemp("good") / "g.strata"
    proc = strata("record", "-q", "-o", out, "--", it.exe, PROGRAMS / "split.py", "1")
    assert proc.returncode == 0, proc.stderr
    return out


def one_line_error(proc, path):
    assert proc.returncode == 1, (proc.returncode, proc.stdout[:200], proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("strata: %s: " % path), proc.stderr
    return lines[0]


def test_report_bad_files(good_file, tmp_path):
    empty = tmp_path / "empty.strata"
    empty.write_bytes(b"")
    assert "empty" in one_line_error(strata("report", empty), empty)
    text = tmp_path / "text.strata"
    text.write_text("hello, this is not a profile\n" * 10)
    assert "not a .strata file" in one_line_error(strata("report", text), text)
    missing = tmp_path / "missing.strata"
    one_line_error(strata("report", missing), missing)
    data = good_file.read_bytes()
    newer = tmp_path / "newer.strata"
    newer.write_bytes(data[:8] + bytes([2, 0]) + data[10:])
    assert "newer" in one_line_error(strata("report", newer), newer)
    short = tmp_path / "short.strata"
    short.write_bytes(data[:20])
    one_line_error(strata("report", short), short)


def test_report_truncated_and_corrupt(good_file, tmp_path):
    data = good_file.read_bytes()
    cut = tmp_path / "cut.strata"
    # Cut inside the last chunk's payload (a cut between two chunks is not
    # cut short: test_export_text.py's test_truncated_file): the first
    # chunk holds the code objects (most of the bytes of a short run),
    # later ones the samples.
    start, end = chunk_spans(data)[-1]
    cut.write_bytes(data[: start + 40 + (end - start - 40) // 2])
    proc = strata("report", "--json", cut)
    assert proc.returncode == 0
    assert "cut short" in proc.stderr
    import json
    assert json.loads(proc.stdout)["samples"] > 0
    bad = bytearray(data)
    mid = len(bad) // 2
    for i in range(mid, mid + 64):
        bad[i] ^= 0x5A
    corrupt = tmp_path / "corrupt.strata"
    corrupt.write_bytes(bytes(bad))
    proc = strata("report", "--json", corrupt)
    assert proc.returncode == 0, proc.stderr
    assert "damaged" in proc.stderr
    assert json.loads(proc.stdout)["samples"] > 0


def test_own_sigterm_handler_interrupts_blocking_read(python, tmp_path):
    """The program's SIGTERM handler must run while it is blocked in read():
    the agent must not keep SIGTERM with SA_RESTART once the program has its
    own handler."""
    out = tmp_path / "t.strata"
    p = subprocess.Popen([str(STRATA), "record", "-q", "-o", str(out), "--", str(python.exe),
                          str(PROGRAMS / "term_handler.py")], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    child = subprocess.run(["pgrep", "-P", str(p.pid)], capture_output=True, text=True).stdout.split()
    assert child
    # A signal that lands after Python's last check for pending signals but
    # before read() starts leaves the handler waiting for the next one (a
    # race of Python's, with or without a profiler): send it until the
    # program ends.
    for _ in range(60):
        os.kill(int(child[0]), signal.SIGTERM)
        try:
            rc = p.wait(timeout=0.5)
            break
        except subprocess.TimeoutExpired:
            continue
    else:
        p.kill()
        raise AssertionError("the program's SIGTERM handler never ended its read()")
    assert rc == 9
