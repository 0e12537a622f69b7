"""strata record --objects: allocations sampled by bytes, by type and line.

Known answers (tests/func/programs/objects.py), under every Python present:
three() creates three times the dicts one() does; keep() keeps what it
allocates and holds most live bytes, churn() frees everything it makes and
holds none; a nested class is named by its qualified name; threads
allocating at once all show up. The sampling rate is lowered (16 KiB) so
that a short run has thousands of samples: the estimate's error is then a
few percent, and the tolerances hold with room (docs/objects.md).
"""
import gzip
import json
import re

import pytest

from conftest import strata

RATE = ["--objects", "--objects-rate", "16384"]


def rec(record, python, what, opts=()):
    r = record(python.require(), "objects.py", what, opts=list(RATE) + list(opts))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "done", r.stdout  # output unchanged
    return r


def total(report, name, event):
    """An event's total over the functions called `name` (comprehensions
    are functions of their own before 3.12: counted under their caller)."""
    rows = [f for f in report["functions"] if f["name"] == name]
    assert rows, "no function %s: %s" % (name, [f["name"] for f in report["functions"][:20]])
    return sum(f["events"][event]["total"] for f in rows)


def types(report):
    return {t["type"]: t for t in report["types"]}


def test_dicts_three_to_one(python, record):
    r = rec(record, python, "dicts")
    rep = r.report("--type", "dict")
    a3 = total(rep, "three", "alloc-objects")
    a1 = total(rep, "one", "alloc-objects")
    share = 100.0 * a3 / (a3 + a1)
    assert abs(share - 75) <= 7, (a3, a1, share)
    # The estimate of how many dicts were made: 1.6 million.
    t = types(r.report())["dict"]
    assert 1_300_000 <= t["alloc-objects"] <= 1_900_000, t
    # Each batch was dropped: almost nothing of it is live at the end.
    assert t["live-bytes"] < 0.05 * t["alloc-bytes"], t


def test_kept_allocations_are_live_freed_are_not(python, record):
    r = rec(record, python, "keep")
    rep = r.report()
    live_keep = total(rep, "keep", "live-bytes")
    live_all = sum(t["live-bytes"] for t in rep["types"])
    assert live_keep >= 0.9 * live_all, (live_keep, live_all)
    # 60 000 bytes objects of ~1 KB kept.
    assert 45e6 <= live_keep <= 80e6, live_keep
    churn_alloc = total(rep, "churn", "alloc-bytes")
    churn_live = total(rep, "churn", "live-bytes")
    assert 45e6 <= churn_alloc <= 80e6, churn_alloc
    assert churn_live <= 0.02 * churn_alloc, (churn_live, churn_alloc)
    b = types(rep)["bytes"]
    assert b["live-bytes"] >= 0.8 * live_keep, b


def test_user_class_by_qualified_name(python, record):
    """The instances are all alive when the interpreter starts finalizing:
    most are typed only then, as the interpreter frees them, and their
    class is freed right after; its name must still be known (the hooks
    read it at the free, while the class lives)."""
    r = rec(record, python, "classes")
    t = types(r.report())
    assert "[unreadable type]" not in t, t["[unreadable type]"]
    assert "Outer.Inner" in t, sorted(t)
    inner = t["Outer.Inner"]
    # 200 000 instances, all alive when the program ends.
    assert 150_000 <= inner["alloc-objects"] <= 260_000, inner
    assert inner["live-objects"] >= 0.9 * inner["alloc-objects"], inner


def test_threads_allocating_at_once(python, record):
    r = rec(record, python, "threads")
    rep = r.report()
    workers = [t for t in rep["threads"] if t["name"].startswith("Thread-")]
    assert len(workers) == 4, rep["threads"]
    assert total(rep, "worker", "alloc-bytes") > 0.5 * sum(t["alloc-bytes"] for t in rep["types"])


def test_text_report_and_pprof(debian_python, record, tmp_path):
    r = rec(record, debian_python, "dicts")
    out = strata("report", r.path)
    assert out.returncode == 0, out.stderr
    assert "Allocations by type" in out.stdout and "\n" in out.stdout
    line = next(l for l in out.stdout.splitlines() if l.rstrip().endswith(" dict"))
    assert "MiB" in line, line
    bad = strata("report", "--type", "no-such-type", r.path)
    assert bad.returncode == 1 and "no allocation of type 'no-such-type'" in bad.stderr, bad.stderr
    pb = tmp_path / "o.pb.gz"
    conv = strata("convert", r.path, "-f", "pprof", "-o", pb)
    assert conv.returncode == 0, conv.stderr
    raw = gzip.decompress(pb.read_bytes())
    for name in (b"alloc_objects", b"alloc_space", b"inuse_objects", b"inuse_space"):
        assert name in raw, name


def test_dump_names_the_records(debian_python, record):
    r = rec(record, debian_python, "classes")
    d = strata("dump", r.path)
    assert d.returncode == 0, d.stderr
    kinds = {l.split()[1] for l in d.stdout.splitlines() if l.startswith("[")}
    assert {"alloc", "obj-type", "free"} <= kinds or {"alloc", "obj-type", "alloc-type"} <= kinds, kinds
    assert "objects-rate=16384" in d.stdout


def test_without_objects_no_object_events(debian_python, record):
    r = record(debian_python.require(), "objects.py", "dicts")
    assert r.returncode == 0, r.stderr
    rep = r.report()
    assert "types" not in rep
    assert not any(e["name"].startswith("alloc-") for e in rep["events"])


def test_stopped_agent_has_no_hooks(python, tmp_path):
    """--paused: the allocator is CPython's own, and an extension's GOT
    holds libc's malloc; ctl start puts strata's hooks in (both), ctl stop
    takes them out again (not only mutes them)."""
    import subprocess
    import time
    from conftest import PROGRAMS, STRATA
    from test_control import python_child, wait_agent, wait_for
    from test_native import build_ext

    interp = python.require()
    so = build_ext(interp, tmp_path)
    state = tmp_path / "state"
    out = tmp_path / "h.strata"
    rec = subprocess.Popen([str(STRATA), "record", "--paused", "--objects", "--objects-rate", "4096", "-o", str(out),
                            "--", str(interp.exe), str(PROGRAMS / "objects_hooks.py"), str(state), "30", str(so)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def now():
        return state.read_text() if state.exists() else None

    try:
        pid = python_child(rec.pid)
        wait_agent(pid, rec)
        assert wait_for(lambda: now() is not None)
        time.sleep(0.3)
        assert now() == "off", "hooks in while paused"
        assert strata("ctl", pid, "start").returncode == 0
        assert wait_for(lambda: now() == "on"), "ctl start did not put the hooks in"
        assert strata("ctl", pid, "stop").returncode == 0
        assert wait_for(lambda: now() == "off"), "ctl stop did not take the hooks out"
    finally:
        rec.terminate()
        rec.communicate(timeout=60)


def test_c_extension_allocation_under_its_native_frame(python, tmp_path):
    """--native: a C extension's PyMem_RawMalloc and its own malloc are
    charged to its C functions (alloc_c, alloc_libc in ext.c), under the
    Python functions that called them."""
    from pathlib import Path
    from conftest import PROGRAMS
    from test_native import build_ext

    interp = python.require()
    so = build_ext(interp, tmp_path)
    out = tmp_path / "n.strata"
    r = strata("record", "-o", out, "--native", *RATE, "--", interp.exe, PROGRAMS / "native" / "objects_ext.py", so)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "done"
    rj = strata("report", "--json", out)
    rep = json.loads(rj.stdout)
    # A sample point waits for room in a full ring (docs/objects.md):
    # nothing is lost, and a loss would be said.
    assert "could not be recorded" not in rj.stderr, rj.stderr
    rows = [f for f in rep["functions"] if f["name"] == "alloc_c"]
    assert rows, [f["name"] for f in rep["functions"][:20]]
    f = rows[0]
    assert f["kind"] == "native" and Path(f["module"]).name == "strata_native_ext.so", f
    # 2000 blocks of 64 KiB: ~131 MB, all of it in alloc_c's own frame.
    ab = f["events"]["alloc-bytes"]["self"]
    assert 100e6 <= ab <= 165e6, (ab, rj.stderr, r.stderr)
    # Every other block kept.
    assert 0.35 <= f["events"]["live-bytes"]["self"] / ab <= 0.65, f["events"]
    caller = [x for x in rep["functions"] if x["name"] == "from_c"][0]
    assert caller["events"]["alloc-bytes"]["total"] >= ab, caller
    raw = types(rep)["[PyMem_RawMalloc]"]
    assert raw["alloc-bytes"] >= ab * 0.95, raw
    # libc's malloc, called by the extension itself (seen through its
    # GOT, the extension loaded after the hooks went in): 3000 blocks of
    # 64 KiB, ~197 MB, every other one kept.
    rows = [f for f in rep["functions"] if f["name"] == "alloc_libc"]
    assert rows, [f["name"] for f in rep["functions"][:20]]
    f = rows[0]
    assert f["kind"] == "native" and Path(f["module"]).name == "strata_native_ext.so", f
    lb = f["events"]["alloc-bytes"]["self"]
    assert 150e6 <= lb <= 245e6, (lb, rj.stderr, r.stderr)
    assert 0.35 <= f["events"]["live-bytes"]["self"] / lb <= 0.65, f["events"]
    caller = [x for x in rep["functions"] if x["name"] == "from_libc"][0]
    assert caller["events"]["alloc-bytes"]["total"] >= lb, caller
    libc = types(rep)["[malloc]"]
    assert libc["alloc-bytes"] >= lb * 0.95, libc
    # Neither is counted twice: the interpreter's own malloc is the RAW
    # domain's, and the extension's malloc is not PyMem_RawMalloc.
    assert raw["alloc-bytes"] <= ab * 1.3 + 8e6, (raw, ab)
    assert libc["alloc-bytes"] <= lb * 1.3 + 8e6, (libc, lb)


def test_program_replaces_malloc(python, tmp_path):
    """A preloaded allocator of the program's own (as jemalloc is): the
    extension's malloc still reaches it, every call (it counts the 64 KiB
    blocks), and strata still sees those calls as [malloc]."""
    import os
    import subprocess
    from conftest import PROGRAMS, STRATA
    from test_native import build_ext

    interp = python.require()
    so = build_ext(interp, tmp_path)
    pre = tmp_path / "countmalloc.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-o", str(pre), str(PROGRAMS / "native" / "countmalloc.c")],
                   check=True)
    counted = tmp_path / "counted"
    env = dict(os.environ, LD_PRELOAD=str(pre), COUNTMALLOC_SIZE="65536", COUNTMALLOC_OUT=str(counted))
    out = tmp_path / "m.strata"
    r = subprocess.run([str(STRATA), "record", "-o", str(out), *RATE, "--", str(interp.exe),
                        str(PROGRAMS / "native" / "objects_ext.py"), str(so)],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "done"
    # As many 64 KiB blocks as without strata (alloc_libc's 3000 and
    # PyMem_RawMalloc's 2000, which reaches it through the interpreter).
    n = max(int(f.read_text()) for f in tmp_path.glob("counted.*"))
    for f in tmp_path.glob("counted.*"):
        f.unlink()
    plain = subprocess.run([str(interp.exe), str(PROGRAMS / "native" / "objects_ext.py"), str(so)],
                           capture_output=True, text=True, env=env, timeout=120)
    assert plain.stdout.strip() == "done"
    n0 = max(int(f.read_text()) for f in tmp_path.glob("counted.*"))
    assert n == n0 and n >= 5000, (n, n0)
    rep = json.loads(strata("report", "--json", out).stdout)
    libc = types(rep)["[malloc]"]
    assert 150e6 <= libc["alloc-bytes"] <= 245e6, libc


def test_attach_mid_run(python, tmp_path):
    """record --pid --objects on a process started without strata: the
    hooks go in (PyMem and an extension's GOT), the 1:3 dict split of what
    is allocated meanwhile comes out, and after the detach the hooks are
    out again; the program ends as it would have."""
    import subprocess
    import threading
    import time
    from conftest import PROGRAMS, STRATA
    from test_attach import plain
    from test_control import wait_for
    from test_native import build_ext

    interp = python.require()
    so = build_ext(interp, tmp_path)
    state = tmp_path / "state"
    p = plain(interp, PROGRAMS / "objects_attach.py", state, 60, so)

    def now():
        return state.read_text() if state.exists() else None

    try:
        assert wait_for(lambda: now() is not None, 30)
        assert now() == "off"
        seen = set()
        done = threading.Event()

        def watch():
            while not done.is_set():
                seen.add(now())
                time.sleep(0.01)

        w = threading.Thread(target=watch)
        w.start()
        out = tmp_path / "a.strata"
        try:
            r = subprocess.run([str(STRATA), "record", "--pid", str(p.pid), "-d", "3", *RATE, "-o", str(out)],
                               capture_output=True, text=True, timeout=120)
        finally:
            done.set()
            w.join()
        assert r.returncode == 0, r.stderr
        assert "on" in seen, seen
        assert not [x for x in seen if x and x.startswith("mixed")], seen
        rep = json.loads(strata("report", "--json", "--type", "dict", out).stdout)
        a1 = [f for f in rep["functions"] if f["name"] == "one"][0]["events"]["alloc-objects"]["total"]
        a3 = [f for f in rep["functions"] if f["name"] == "three"][0]["events"]["alloc-objects"]["total"]
        assert a1 + a3 > 0 and 0.68 <= a3 / (a1 + a3) <= 0.82, (a1, a3)
        # Detached: the hooks come out (at the next sample point).
        assert wait_for(lambda: now() == "off", 20), now()
    finally:
        (tmp_path / "state.stop").touch()
        o, e = p.communicate(timeout=120)
    assert (p.returncode, o) == (0, "done\n"), (p.returncode, o, e)


def test_type_filter_in_annotate_and_convert(debian_python, record):
    """--type keeps one type in annotate and convert as in report: the 3:1
    dict split is there at the lines that make the dicts, and what is left
    out (other types) is gone."""
    r = rec(record, debian_python, "dicts")
    # annotate: per line, the dicts' events; the self/total columns are
    # of alloc-bytes (allocations carry no time samples).
    a = strata("annotate", "--json", "--type", "dict", r.path, "objects.py")
    assert a.returncode == 0, a.stderr
    lines = {l["function"]: l for f in json.loads(a.stdout)["files"] for l in f["lines"]}
    a3 = lines["three"]["events"]["alloc-objects"]["self"]
    a1 = lines["one"]["events"]["alloc-objects"]["self"]
    assert abs(100.0 * a3 / (a3 + a1) - 75) <= 7, (a3, a1)
    t = types(r.report())
    everything = sum(x["alloc-bytes"] for x in t.values())
    dict_bytes = t["dict"]["alloc-bytes"]
    assert dict_bytes < 0.9 * everything, t  # other types to leave out
    txt = strata("annotate", "--type", "dict", r.path, "three")
    assert txt.returncode == 0, txt.stderr
    assert " alloc-bytes self (" in txt.stdout.splitlines()[0], txt.stdout[:300]
    # convert: one-value formats carry alloc-bytes of dicts alone.
    c = strata("convert", "--type", "dict", r.path, "-f", "collapsed")
    assert c.returncode == 0, c.stderr
    stacks = [l.rsplit(" ", 1) for l in c.stdout.splitlines() if l.strip()]
    tot = sum(int(v) for _, v in stacks)
    assert abs(tot - dict_bytes) <= 0.01 * dict_bytes, (tot, dict_bytes)
    three = sum(int(v) for s, v in stacks if ";three (" in s)
    assert abs(100.0 * three / tot - 75) <= 7, (three, tot)
    bad = strata("convert", "--type", "no-such-type", r.path, "-f", "collapsed")
    assert bad.returncode == 1 and "no allocation of type 'no-such-type'" in bad.stderr, bad.stderr
    bad = strata("annotate", "--type", "no-such-type", r.path)
    assert bad.returncode == 1 and "no allocation of type 'no-such-type'" in bad.stderr, bad.stderr


def test_program_hooks_the_allocator_itself(python, record):
    """tracemalloc.start() mid-run puts its hooks on top of strata's: the
    allocations made meanwhile are still seen (and tracemalloc sees them
    too); after tracemalloc.stop() strata's are on top again. one() runs
    before and after, three() under tracemalloc: 20 batches against 30."""
    r = rec(record, python, "tracemalloc")
    rep = r.report("--type", "dict")
    a3 = total(rep, "three", "alloc-objects")
    a1 = total(rep, "one", "alloc-objects")
    share = 100.0 * a3 / (a3 + a1)
    assert abs(share - 60) <= 7, (a3, a1, share)
    # 2 x 100 000 + 300 000 dicts.
    assert 400_000 <= a1 + a3 <= 600_000, (a1, a3)


@pytest.mark.parametrize("how", ["PYTHONMALLOC=debug", "PYTHONDEVMODE=1"])
def test_debug_allocator_hooks(python, record, how):
    """A program run with CPython's debug allocator hooks (PYTHONMALLOC=debug,
    or development mode: -X dev) ends as it does without strata: strata's
    audit hook, added before the interpreter starts, has its list entry from
    libc's malloc, which the debug hooks would refuse to free at exit and
    abort the process ("bad ID"). Its allocations are sampled as usual,
    through the debug hooks."""
    import os
    k, v = how.split("=")
    r = record(python.require(), "objects.py", "dicts", opts=list(RATE), env=dict(os.environ, **{k: v}))
    assert r.returncode == 0 and "bad ID" not in r.stderr, r.stderr[-3000:]
    assert r.stdout.strip() == "done", r.stdout
    rep = r.report("--type", "dict")
    a3, a1 = total(rep, "three", "alloc-objects"), total(rep, "one", "alloc-objects")
    assert abs(100.0 * a3 / (a3 + a1) - 75) <= 7, (a3, a1)


def test_fork_child_counts_its_own(python, record):
    """A forked child's allocations are its own, under its pid; the
    parent's are the parent's (the child inherits the hooks, not the
    parent's samples)."""
    r = rec(record, python, "fork")
    rep = r.report()
    pids = sorted({t["pid"] for t in rep["threads"]})
    assert len(pids) == 2, rep["threads"]
    parent, child = pids  # the child's pid is the larger here (no wrap in a test run)
    names = {}
    for pid in pids:
        sub = r.report("--type", "dict", "--pid", str(pid))
        names[pid] = {f["name"]: f["events"]["alloc-objects"]["total"] for f in sub["functions"]}
    # 300 000 dicts in the child, 100 000 in the parent.
    assert 230_000 <= names[child].get("three", 0) <= 370_000, names[child]
    assert names[child].get("one", 0) == 0, names[child]
    assert 75_000 <= names[parent].get("one", 0) <= 125_000, names[parent]
    assert names[parent].get("three", 0) == 0, names[parent]


def test_pprof_type_label(debian_python, record, tmp_path):
    """pprof: allocation samples carry a `type` label, so that go tool
    pprof keeps one type with -tagfocus, and its total is that type's."""
    from test_export_text import need_go, pprof_top
    r = rec(record, debian_python, "dicts")
    dicts = types(r.report())["dict"]["alloc-objects"]
    pb = tmp_path / "o.pb.gz"
    conv = strata("convert", r.path, "-f", "pprof", "-o", pb)
    assert conv.returncode == 0, conv.stderr
    need_go()
    _, text, _ = pprof_top(pb, "-sample_index=alloc_objects", "-tagfocus=type=dict")
    m = re.search(r"Showing nodes accounting for (\d+), ", text)
    assert m, text
    assert abs(int(m.group(1)) - dicts) <= 0.001 * dicts + 2, (m.group(1), dicts, text[:500])
    _, text, _ = pprof_top(pb, "-sample_index=alloc_objects", "-tagfocus=type=no-such-type")
    assert "Showing nodes accounting for 0, " in text or "Total: 0" in text or "No samples" in text, text[:500]
