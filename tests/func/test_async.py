"""asyncio: samples by task, the await chain across tasks, and where
suspended tasks wait (docs/async.md). Known answers under every Python
present."""
import json
import subprocess

import pytest

from conftest import PROGRAMS, assert_split, burned, strata

# slow_db's await of the sleep, the line a waiting sleeper waits at; work's
# first line, where a task that has not started yet is.
_LINES = (PROGRAMS / "async_tasks.py").read_text().splitlines()
WAIT_LINE = [i + 1 for i, l in enumerate(_LINES) if l.endswith("# the wait")][0]
WORK_LINE = [i + 1 for i, l in enumerate(_LINES) if l.startswith("async def work(")][0]


def not_started(stack, names, i):
    """Whether a stack with task frame i is a task's sample before its
    first step while nothing awaits it yet: its own frame alone, at its
    coroutine's first line, no awaiter above. What holds at that instant
    (test_task_not_started_nor_awaited)."""
    return i == 0 and names[1:] == ["work"] and stack[1].endswith(":%d)" % WORK_LINE)


def folded(path, *args):
    r = strata("convert", path, "-f", "collapsed", "-o", "-", *args)
    assert r.returncode == 0, r.stderr
    out = []
    for line in r.stdout.splitlines():
        stack, _, n = line.rpartition(" ")
        out.append((stack.split(";"), int(n)))
    return out


def bare(frame):
    return frame.split(" (")[0]


def burns(path):
    """Samples of heavy's and of light's burn(), told apart by their task
    frames: what async_tasks.py's own clocks measured."""
    n = {"heavy": 0, "light": 0}
    for stack, c in folded(path):
        names = [bare(f) for f in stack]
        for task in n:
            if "[task %s]" % task in names and "burn" in names:
                n[task] += c
    return n["heavy"], n["light"]


def test_task_split_and_chain(python, record):
    res = record(python, "async_tasks.py", "split", "60")
    assert res.returncode == 0, res.stderr
    rep = res.report()
    rows = {t["task"]: t for t in rep.get("tasks", [])}
    assert "heavy" in rows and "light" in rows, rep.get("tasks")
    heavy, light = rows["heavy"]["running"], rows["light"]["running"]
    # Same function, same line: only the task tells them apart.
    assert_split(burns(res.path), burned(res.stdout, "cpu"), "heavy:light in burn()")
    chains = 0
    for stack, n in folded(res.path):
        names = [bare(f) for f in stack]
        if "[task heavy]" not in names:
            continue
        i = names.index("[task heavy]")
        # main -> parent -> [task heavy] -> work (-> burn): intact, and
        # no event-loop frame in between.
        assert names[i - 2:i] == ["main", "parent"], names
        assert names[i + 1] == "work", names
        assert not any("run_forever" in f or "_run_once" in f for f in names), names
        chains += n
    assert chains >= 0.9 * heavy, (chains, heavy)


def test_asyncio_imported_late(python, record):
    """asyncio imported after the helper has looked for it and not found
    it (it then looks again only once sys.modules has changed): the tasks
    are found all the same."""
    res = record(python, "async_tasks.py", "split", "60", "import-late")
    assert res.returncode == 0, res.stderr
    rows = {t["task"]: t for t in res.report().get("tasks", [])}
    assert "heavy" in rows and "light" in rows, rows.keys()
    assert_split(burns(res.path), burned(res.stdout, "cpu"), "heavy:light in burn()")


def test_task_filter_and_loop_frames(debian_python, record, tmp_path):
    res = record(debian_python, "async_tasks.py", "split", "20")
    assert res.returncode == 0, res.stderr
    only = res.report("--task", "light")
    assert {t["task"] for t in only["tasks"]} == {"light"}
    bad = strata("report", "--task", "nosuch", res.path)
    assert bad.returncode != 0 and "no asyncio task named 'nosuch'" in bad.stderr, bad.stderr
    # --keep-interpreter shows the loop's frames under the tasks.
    kept = [bare(f) for stack, _ in folded(res.path, "--keep-interpreter") for f in stack]
    assert any("run_forever" in f for f in kept)
    # convert and annotate keep one task's samples too.
    light = folded(res.path, "--task", "light")
    assert light and all("[task light]" in [bare(f) for f in stack] for stack, _ in light), light
    assert sum(n for _, n in light) == only["tasks"][0]["running"]
    ann = strata("annotate", "--json", "--task", "heavy", res.path, str(PROGRAMS / "async_tasks.py"))
    assert ann.returncode == 0, ann.stderr
    heavy = [t for t in res.report()["tasks"] if t["task"] == "heavy"][0]
    assert json.loads(ann.stdout)["samples"] == heavy["running"], ann.stdout[:300]
    bad = strata("convert", "--task", "nosuch", "-f", "collapsed", res.path)
    assert bad.returncode != 0 and "no asyncio task named 'nosuch'" in bad.stderr, bad.stderr


def test_top_task_filter(debian_python):
    """strata top --task: the live view of one task's samples."""
    r = strata("top", "--no-curses", "-i", "1", "--task", "heavy", "--", str(debian_python.exe),
               str(PROGRAMS / "async_tasks.py"), "split", "200", timeout=300)
    assert r.returncode == 0, r.stderr
    frames = r.stdout.split("\n\n")
    shown = [f for f in frames if "task heavy" in f and "burn" in f]
    assert shown, r.stdout
    # Only heavy's samples: its own task frame, never light's.
    assert "[task heavy]" in r.stdout and "[task light]" not in r.stdout, r.stdout


def check_both(res):
    """The known answers of async_tasks.py's "both" in wall mode: heavy and
    light told apart by their task frames, their burns split as the wall
    time the program measured in them (3:1 on an idle machine), heavy's
    chain intact under parent, the sleeper waiting >= 90% of its samples,
    at slow_db's line."""
    assert res.returncode == 0, res.stderr
    rows = {t["task"]: t for t in res.report().get("tasks", [])}
    assert {"heavy", "light", "sleeper"} <= set(rows), rows
    assert_split(burns(res.path), burned(res.stdout, "wall"), "heavy:light in burn()")
    s = rows["sleeper"]
    assert s["waiting"] >= 0.9 * (s["running"] + s["waiting"]), s
    chained = at_line = 0
    for stack, n in folded(res.path):
        names = [bare(f) for f in stack]
        if "[task heavy]" in names:
            i = names.index("[task heavy]")
            # Between create_task() and gather() (a thread preempted
            # there under load: make check once saw one such sample).
            if not_started(stack, names, i):
                continue
            assert names[i - 1] == "parent" and "main" in names[:i], names
            assert names[i + 1] == "work", names
            chained += n
        if "[task sleeper]" in names:
            slow = [f for f in stack if f.startswith("slow_db (")]
            if slow and slow[0].endswith(":%d)" % WAIT_LINE):
                at_line += n
    assert chained >= rows["heavy"]["running"], (chained, rows["heavy"])
    assert at_line >= 0.9 * s["waiting"], (at_line, s)


def test_task_not_started_nor_awaited(python, record):
    """Tasks created and not started yet, that nothing awaits yet (their
    creator blocks the loop for 0.3 s before its gather): wall mode's
    samples of suspended tasks show each as a task of its own, at its
    coroutine's first line, with no awaiter, which is what holds then.
    Once gather awaits it, heavy's chain is whole."""
    res = record(python, "async_tasks.py", "late", "20", opts=["--mode", "wall", "-F", "200"])
    assert res.returncode == 0, res.stderr
    early = chained = 0
    for stack, n in folded(res.path):
        names = [bare(f) for f in stack]
        if "[task heavy]" not in names:
            continue
        i = names.index("[task heavy]")
        if not_started(stack, names, i):
            early += n
        else:
            assert names[i - 1] == "parent" and "main" in names[:i], stack
            chained += n
    # 0.3 s at 200 Hz: about 60 ticks, each reading the few tasks there.
    assert early >= 20, (early, chained)
    assert chained > 0, (early, chained)


@pytest.mark.parametrize("flavour", ["c", "pure"])
def test_running_and_waiting(python, record, flavour):
    """Wall mode: asyncio's C tasks, and its pure-Python tasks without the C
    _asyncio ("pure"), running and waiting."""
    res = record(python, "async_tasks.py", "both", "100", flavour, opts=["--mode", "wall", "-F", "200"])
    check_both(res)


@pytest.mark.edge_pythons
@pytest.mark.parametrize("flavour", ["pytask", "uvloop"])
def test_task_factory_and_uvloop(python, record, flavour):
    """asyncio's pure-Python Task class beside the C _asyncio (made by a task
    factory), and uvloop's event loop: the same answers."""
    exe = python.with_module("uvloop") if flavour == "uvloop" else None
    res = record(python, "async_tasks.py", "both", "100", flavour, opts=["--mode", "wall", "-F", "200"], exe=exe)
    check_both(res)


@pytest.mark.edge_pythons
def test_aiohttp_server(python, tmp_path):
    """A real-world check: an aiohttp server under load from 20 clients (in
    this test), whose handler awaits a 20 ms sleep and then hashes: the
    handler's awaited sleep is the largest share of its requests' time."""
    import threading
    import time
    import urllib.request
    from conftest import STRATA
    exe = python.with_module("aiohttp")
    out = tmp_path / "aiohttp.strata"
    p = subprocess.Popen([str(STRATA), "record", "--mode", "wall", "-F", "200", "-o", str(out), "--", str(exe),
                          str(PROGRAMS / "aiohttp_server.py")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        line = p.stdout.readline()
        assert line.strip().isdigit(), (line, p.stderr.read() if p.poll() is not None else "")
        url = "http://127.0.0.1:%d/" % int(line)
        stop = time.monotonic() + 3
        done = []

        def client():
            while time.monotonic() < stop:
                urllib.request.urlopen(url, timeout=60).read()
                done.append(1)

        threads = [threading.Thread(target=client) for _ in range(20)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        urllib.request.urlopen(url + "quit", timeout=60).read()
        assert p.wait(timeout=120) == 0, p.stderr.read()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert len(done) >= 40, len(done)
    # Where the handler's samples are, by its line: the awaited sleep first.
    src = (PROGRAMS / "aiohttp_server.py").read_text().splitlines()
    sleep_line = [i + 1 for i, l in enumerate(src) if l.endswith("# the database")][0]
    by_line = {}
    for stack, n in folded(out):
        at = [f for f in stack if bare(f) == "handle"]
        if at:
            line = int(at[-1].rsplit(":", 1)[1].rstrip(")"))
            by_line[line] = by_line.get(line, 0) + n
    total = sum(by_line.values())
    assert total and max(by_line, key=by_line.get) == sleep_line, by_line
    assert by_line[sleep_line] >= 0.5 * total, by_line
    # ... inside the request's task, under the connection's task awaiting it.
    names = [bare(f) for stack, _ in folded(out) for f in stack if "handle (" in ";".join(stack)]
    assert any(n.startswith("[task ") for n in names), names[:40]


def test_loops_in_threads(python, record):
    """Two event loops in two threads: each waiting task's samples belong to
    the thread that runs its loop (told by the interpreter: the thread
    state's running loop on 3.14+, asyncio's loop's _thread_id before).
    Loop b runs 0.3 s after its first task exists: until then its tasks
    wait in no thread, and must not land on loop a's (the interpreter,
    asked before the loop ran, had no answer yet)."""
    res = record(python, "async_threads.py", "150", "0.3", opts=["--mode", "wall", "-F", "200"])
    assert res.returncode == 0, res.stderr
    tids = {t["name"]: t["tid"] for t in res.report()["threads"]}
    for mine, other in (("a", "b"), ("b", "a")):
        rows = {t["task"]: t for t in res.report("--tid", str(tids["loop-" + mine]))["tasks"]}
        assert rows.get(mine + "-sleeper", {}).get("waiting", 0) > 0, rows
        assert not any(name.startswith(other + "-") for name in rows), (mine, rows)
