"""`strata stack PID` on an asyncio program (docs/async.md): every pending
task's await chain, each task under the task that awaits it, on every
Python, however it is awaited."""
import json
import subprocess

from conftest import PROGRAMS, STRATA


def test_stack_tasks(python, tmp_path):
    p = subprocess.Popen([str(python.exe), str(PROGRAMS / "async_combinators.py")], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        ready = p.stdout.readline().split()
        assert ready and ready[0] == "ready", (ready, p.stderr.read() if p.poll() is not None else "")
        ways = ready[1:]
        out = subprocess.run([str(STRATA), "stack", "--json", str(p.pid)], capture_output=True, text=True,
                             timeout=60)
        text = subprocess.run([str(STRATA), "stack", str(p.pid)], capture_output=True, text=True, timeout=60)
    finally:
        p.kill()
        p.wait()
    assert out.returncode == 0, out.stderr
    tasks = json.loads(out.stdout)["tasks"]
    names = {t["address"]: t["name"] for t in tasks}
    by_name = {t["name"]: t for t in tasks}
    for way in ways:
        children = [n for n in by_name if n.startswith(way + "-child")]
        assert children, (way, sorted(by_name))
        for c in children:
            awaiters = [names.get(a) for a in by_name[c]["awaited_by"]]
            # Before 3.14 as_completed hands its results over through a
            # queue: nothing links a task to the one iterating (docs/async.md).
            if way == "as_completed" and python.minor < (3, 14):
                assert awaiters == [], (c, awaiters)
                continue
            assert awaiters == ["by-" + way], (c, awaiters)
        frames = [f["function"] for f in by_name[children[0]]["frames"]]
        assert frames[0] == "child" and frames[-1] == "sleep", frames
        assert by_name["by-" + way]["state"] == "waiting"
    # The text: each child indented under the task that awaits it.
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    start = [i for i, l in enumerate(lines) if l.startswith("asyncio tasks:")]
    assert start, text.stdout
    indent = {l.strip().split(" (")[0]: len(l) - len(l.lstrip()) for l in lines[start[0] + 1:] if "(waiting" in l}
    assert indent["await-child"] > indent["by-await"] > indent["Task-1"], text.stdout
