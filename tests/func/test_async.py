"""asyncio: samples by task, the await chain across tasks, and where
suspended tasks wait (docs/async.md). Known answers under every Python
present whose tasks strata reads (3.8-3.13; 3.14+ are not read yet)."""
import json

import pytest

from conftest import strata


def tasks_supported(python):
    if python.minor >= (3, 14):
        pytest.skip("asyncio tasks of Python %s are not read yet (docs/async.md)" % python.version)


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


def test_task_split_and_chain(python, record):
    tasks_supported(python)
    res = record(python, "async_tasks.py", "split", "60")
    assert res.returncode == 0, res.stderr
    rep = res.report()
    rows = {t["task"]: t for t in rep.get("tasks", [])}
    assert "heavy" in rows and "light" in rows, rep.get("tasks")
    heavy, light = rows["heavy"]["running"], rows["light"]["running"]
    # Same function, same line: only the task tells them apart.
    assert 0.66 <= heavy / (heavy + light) <= 0.84, (heavy, light)
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


def test_waiting_task(python, record):
    tasks_supported(python)
    res = record(python, "async_tasks.py", "wait", "60", opts=["--mode", "wall", "-F", "200"])
    assert res.returncode == 0, res.stderr
    rows = {t["task"]: t for t in res.report()["tasks"]}
    s = rows["sleeper"]
    assert s["waiting"] > 0 and s["waiting"] >= 0.9 * (s["running"] + s["waiting"]), s
    # Waiting on slow_db's await of the sleep, under its task.
    at_line = 0
    for stack, n in folded(res.path):
        names = [bare(f) for f in stack]
        if "[task sleeper]" in names and "slow_db (" in ";".join(stack):
            slow = [f for f in stack if f.startswith("slow_db (")][0]
            if slow.endswith(":33)"):
                at_line += n
    assert at_line >= 0.9 * s["waiting"], (at_line, s)
