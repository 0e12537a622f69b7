"""Why a thread is idle (wall mode, docs/async.md#why-a-thread-is-idle):
each blocked sample says why its thread waits, from the thread's system
call and the interpreter's GIL. Known answers: threads that each block one
way for the whole run, and threads that take turns on the GIL."""
import pytest

from conftest import build_embedding, func_row, strata


def _waits(threads):
    """Each thread's name, samples, idle samples and reasons, for a message."""
    return ["%s: %d samples, %d idle, %s" % (t["name"], t["samples"], t["idle"], t["waits"]) for t in threads]


def test_why_threads_wait(python, record):
    res = record(python, "idle_threads.py", "3", opts=["--mode", "wall", "-F", "200"])
    assert res.returncode == 0, res.stderr
    rep = res.report()
    threads = {t["name"]: t for t in rep["threads"]}
    for name, why in (("reader", "io"), ("selector", "poll"), ("locker", "lock"), ("sleeper", "sleep")):
        t = threads[name]
        assert t["waits"].get(why, 0) >= 0.9 * t["samples"], (name, t)
    # Three threads burning pure Python: one runs at a time, and while one
    # of the others is blocked, it is waiting for the GIL (it may also be
    # runnable, waiting for a CPU: on a loaded machine, often).
    burners = [t for n, t in threads.items() if n.startswith("burner-")]
    assert len(burners) == 3, threads
    gil = sum(t["waits"].get("gil", 0) for t in burners)
    assert gil >= 0.9 * sum(t["idle"] for t in burners), _waits(burners)
    assert gil >= 0.25 * sum(t["samples"] for t in burners), _waits(burners)
    # ... and the report says so as a frame, where the time goes, and per
    # thread.
    rows = {f["name"]: f for f in rep["functions"]}
    assert rows["[waiting for the GIL]"]["self"] == sum(t["waits"].get("gil", 0) for t in rep["threads"]), rows
    text = strata("report", res.path)
    assert text.returncode == 0, text.stderr
    lines = [l for l in text.stdout.splitlines() if l.rstrip().endswith("burner-0")]
    assert lines and " GIL " in lines[0], text.stdout


def test_gil_waits_after_a_late_start(python, record, tmp_path):
    """A futex wait sampled before the interpreter exists (an embedding
    program's own start-up; under load, Python's) is some other lock: the
    GIL is not there yet (3.12+ create it with the main interpreter). The
    waits for the GIL that come later are still the GIL's. The helper did
    not look for it again for a second, and called every wait for the GIL
    in that second a lock: about 80 of each burner's 360 idle samples."""
    exe = build_embedding(python, "late_start.c", tmp_path)
    if exe is None:
        pytest.skip("Python %s has no python-config to embed it with" % python.version)
    res = record(python, "idle_threads.py", "2", opts=["--mode", "wall", "-F", "200"], exe=exe)
    assert res.returncode == 0, res.stderr
    burners = [t for t in res.report()["threads"] if t["name"].startswith("burner-")]
    assert len(burners) == 3, res.report()["threads"]
    for t in burners:
        assert t["idle"] >= 0.25 * t["samples"], _waits(burners)
        assert t["waits"].get("gil", 0) >= 0.95 * t["idle"], _waits(burners)


@pytest.mark.edge_pythons
def test_waiting_for_a_cpu(python, record):
    """Wall mode counts the time a running thread waits for a CPU: pinned
    beside two busy loops on one CPU, burn() gets samples for its wall
    time, about three times its CPU time (one signal reaches a thread that
    waited several ticks; its sample counts them all). Without that
    weight it got about 72% of them."""
    res = record(python, "cpu_wait.py", "1.5", opts=["--mode", "wall", "-F", "200"])
    assert res.returncode == 0, res.stderr
    words = dict(w.split("=") for w in res.stdout.split()[1:])
    wall, cpu = float(words["wall"]), float(words["cpu"])
    if cpu > 0.8 * wall:
        pytest.skip("the busy loop took little of the CPU (%.2f s on it of %.2f s)" % (cpu, wall))
    burn = func_row(res.report(), "burn")["total"]
    # 200 Hz: within 12% of the wall time, and clearly more than the CPU time.
    assert 0.88 * wall * 200 <= burn <= 1.12 * wall * 200, (burn, wall, cpu)
    assert burn >= 1.3 * cpu * 200, (burn, wall, cpu)
