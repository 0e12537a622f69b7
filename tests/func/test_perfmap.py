"""Perf maps and CPython's perf trampolines (issue 5 item 5, issue 8 item 4).

Known answers:
- perfmap_jit.py runs machine code in an anonymous mapping that it names
  in /tmp/perf-PID.map: the profile names it (kind "jit", module
  "[perf-map]"), with --native under the Python line that called it.
- perftramp.py (main -> outer -> middle -> sorted(key) -> key -> leaf)
  under CPython 3.12+'s -X perf (and 3.13's -X perf_jit): one trampoline
  per Python call, in anonymous memory without unwind information. The
  merged --native stacks equal the ones without the flag: no [unknown]
  frames, trampolines folded (shown, named from the map, only with
  --keep-interpreter), native unwinding failing on almost no sample.
- perfmap_many.py names and runs new code 1000 times in a row: every
  sample in it is named, none [unknown], however the map's lines and the
  samples fall between the agent's passes.
"""
import os
import platform
import subprocess
from pathlib import Path

import pytest

from conftest import PROGRAMS, STRATA, func_row, need_tool, strata

TRAMP = PROGRAMS / "perftramp.py"

pytestmark = pytest.mark.skipif(platform.machine() != "x86_64", reason="x86-64 machine code and trampolines")


def collapsed(path, keep=False):
    args = ["convert", path, "-f", "collapsed"] + (["--keep-interpreter"] if keep else [])
    out = strata(*args)
    assert out.returncode == 0, out.stderr
    rows = []
    for line in out.stdout.splitlines():
        text, count = line.rsplit(" ", 1)
        rows.append((text.split(";"), int(count)))
    return rows


def names(frames):
    """Frame labels without their file:line suffix, for the Python and
    perf-map frames (native frames vary with the C call path)."""
    return [f.split(" (")[0] for f in frames]


def leaf_stack(rows):
    """The Python frame names of the stacks that end in leaf(), weighted."""
    out = {}
    for frames, c in rows:
        py = [n for f, n in zip(frames, names(frames)) if ".py:" in f]
        if py and py[-1] == "leaf":
            out[tuple(py)] = out.get(tuple(py), 0) + c
    return out


def test_perf_map_names_anonymous_code(debian_python, record):
    r = record(debian_python, "perfmap_jit.py", "1.5", opts=["--native"])
    assert r.returncode == 0, r.stderr
    rep = r.report()
    spin = func_row(rep, "strata_test_spin")
    assert spin["kind"] == "jit" and spin["module"] == "[perf-map]", spin
    assert spin["self"] > 0.8 * rep["samples"], rep["functions"][:3]
    # The unwinder gets out of the frameless leaf (return address on top of
    # the stack), so the JIT code sits under the Python line that called it.
    spin_line = next(i for i, l in enumerate((PROGRAMS / "perfmap_jit.py").read_text().splitlines(), 1)
                     if "# SPIN" in l)
    under = sum(c for frames, c in collapsed(r.path)
                if frames[-1].startswith("strata_test_spin")
                and any(f.startswith("spin (") and f.endswith(":%d)" % spin_line) for f in frames))
    assert under > 0.9 * spin["self"], collapsed(r.path)[:3]
    assert rep["native"]["failed"] < 0.05 * rep["samples"], rep["native"]


def test_perf_map_entry_read_late(debian_python, record):
    """Code named, run and sampled between a writer pass's read of the map
    and its drain of the rings is still named: the agent reads the map
    again before it writes a stack with an address in no object. Before
    that, about 3% of perfmap_many.py's samples were [unknown]."""
    r = record(debian_python, "perfmap_many.py", "1000", opts=["--native"])
    assert r.returncode == 0, r.stderr
    rep = r.report()
    code = [f for f in rep["functions"] if f["name"].startswith("strata_code_")]
    named = sum(f["self"] for f in code)
    assert named > 0.6 * rep["samples"], rep["functions"][:5]
    assert len(code) > 300, len(code)
    unknown = [f for f in rep["functions"] if f["name"] == "[unknown]"]
    assert not unknown, (unknown, rep["samples"])


def test_perf_map_without_native(debian_python, record):
    """Without --native no native address is recorded: the map costs
    nothing and the Python line holds the time."""
    r = record(debian_python, "perfmap_jit.py", "0.5")
    assert r.returncode == 0, r.stderr
    assert func_row(r.report(), "spin")["self"] > 0.8 * r.report()["samples"]


def trampoline_flags(python):
    """The -X flags this interpreter has perf trampolines for."""
    flags = []
    for flag in ("perf", "perf_jit"):
        p = subprocess.run([str(python.exe), "-X", flag, "-c",
                            "import sys; print(sys.is_stack_trampoline_active())"],
                           capture_output=True, text=True)
        if p.returncode == 0 and p.stdout.strip() == "True":
            flags.append(flag)
    return flags


def test_trampolines_folded(python, tmp_path):
    if python.minor < (3, 12):
        pytest.skip("%s: perf trampolines (-X perf) are CPython 3.12+" % python.id)
    flags = trampoline_flags(python)
    if not flags:
        pytest.skip("%s was built without perf trampoline support (sys.is_stack_trampoline_active)" % python.id)
    base = tmp_path / "base.strata"
    r = strata("record", "-o", base, "--native", "--", python.exe, TRAMP, "1.2")
    assert r.returncode == 0, r.stderr
    want = leaf_stack(collapsed(base))
    top = max(want, key=want.get)
    assert top == ("<module>", "outer", "middle", "key", "leaf"), want
    for flag in flags:
        out = tmp_path / ("%s.strata" % flag)
        r = strata("record", "-o", out, "--native", "--", python.exe, "-X", flag, TRAMP, "1.2")
        assert r.returncode == 0, r.stderr
        rows = collapsed(out)
        total = sum(c for _, c in rows)
        got = leaf_stack(rows)
        # The same Python stack dominates, and nothing of the trampolines
        # is left in the merged stacks.
        assert max(got, key=got.get) == top, (flag, got)
        assert got[top] > 0.8 * total, (flag, got)
        odd = sum(c for frames, c in rows if any("[unknown]" in f or "[perf-map]" in f for f in frames))
        assert odd < 0.01 * total, (flag, [x for x in rows if any("[unknown]" in f for f in x[0])][:3])
        rep = strata("report", "--json", out)
        import json
        nat = json.loads(rep.stdout)["native"]
        assert nat["failed"] < 0.02 * nat["samples"], (flag, nat)
        # With --keep-interpreter the trampolines show, folded no more:
        # each one right above the eval loop it calls.
        kept = collapsed(out, keep=True)
        tr = [f for frames, c in kept for f in frames if "[perf-map]" in f]
        assert tr, flag
        if flag == "perf":
            # -X perf writes its map line by line: each trampoline has the
            # name of its function.
            assert any(f.startswith("py::leaf:") and f.endswith("perftramp.py ([perf-map])") for f in tr), tr[:5]


# ---- strata record --perf-map, read by Linux perf (issue 5 item 7) --------

NUMBA_PERF = PROGRAMS / "numba_perf.py"
NO_JIT = "JIT discovery is not available in this build"


def perf_usable(tmp_path):
    """None if `perf record` samples here; the reason if this user may not.
    perf is installed by scripts/deps.sh (linux-perf): missing, or failing
    as root, it fails the test."""
    need_tool("perf", "Debian package linux-perf; scripts/deps.sh")
    p = subprocess.run(["perf", "record", "-q", "-e", "cpu-clock", "-k", "1", "-o", str(tmp_path / "probe.data"),
                        "--", "true"], capture_output=True, text=True)
    if p.returncode == 0:
        return None
    if os.geteuid() != 0:
        return "perf record cannot sample as uid %d here (perf_event_paranoid?): %s" % (os.geteuid(),
                                                                                     p.stderr.strip()[-200:])
    pytest.fail("perf record does not work here, even as root: %s" % p.stderr.strip()[-500:])


def test_perf_report_names_jit_function(debian_python, tmp_path):
    """perf record -k 1 -g ... strata record --perf-map ... python numba_perf.py;
    perf inject --jit; perf report --sort sym,srcline names hot_kernel and
    its hot line (NUMBA_DEBUGINFO=1), from the perf map and jitdump the
    agent writes for the JIT images it discovers (src/agent/jit.c)."""
    debian_python.with_module("numba")
    reason = perf_usable(tmp_path)
    if reason:
        pytest.skip(reason)
    env = dict(os.environ, STRATA_JITDUMP_DIR=str(tmp_path / "dumps"), NUMBA_DEBUGINFO="1")
    data, jit = tmp_path / "perf.data", tmp_path / "perf.jit.data"
    r = subprocess.run(["perf", "record", "-q", "-e", "cpu-clock", "-k", "1", "-g", "-o", str(data), "--",
                        str(STRATA), "record", "-q", "-o", str(tmp_path / "x.strata"), "--perf-map", "--",
                        str(debian_python.exe), str(NUMBA_PERF), "2"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert NO_JIT not in r.stderr, r.stderr
    dumps = list((tmp_path / "dumps").glob("jit-*.dump"))
    assert len(dumps) == 1, dumps
    pid = dumps[0].name[4:-5]
    pmap = Path("/tmp/perf-%s.map" % pid)
    try:
        lines = pmap.read_text().splitlines()
        assert any("10hot_kernel" in ln for ln in lines), lines[:10]
    finally:
        if pmap.exists():
            pmap.unlink()
    r = subprocess.run(["perf", "inject", "--jit", "-i", str(data), "-o", str(jit)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    r = subprocess.run(["perf", "report", "-i", str(jit), "--sort", "sym,srcline", "--stdio", "--no-children",
                        "-g", "none", "-t", "|"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    rows = []
    for line in r.stdout.splitlines():
        parts = [p.strip() for p in line.split("|")]
        if len(parts) == 3 and parts[0].endswith("%"):
            rows.append((float(parts[0][:-1]), parts[1], parts[2]))
    mine = [x for x in rows if "hot_kernel" in x[1] and "cpython" not in x[1]]
    assert mine, [x for x in rows[:15]]
    assert mine[0][1].startswith("[.] __main__::hot_kernel"), mine[0]
    hot = next(i for i, l in enumerate(NUMBA_PERF.read_text().splitlines(), 1) if "# HOT" in l)
    # The kernel's own instructions: most of them on the hot line.
    on_hot = sum(x[0] for x in mine if x[2].endswith("numba_perf.py:%d" % hot))
    assert on_hot > 0.6 * sum(x[0] for x in mine), mine


def test_trampolines_folded_in_fork_child(python, tmp_path):
    if python.minor < (3, 12) or "perf" not in trampoline_flags(python):
        pytest.skip("%s: no -X perf trampolines" % python.id)
    out = tmp_path / "fork.strata"
    r = strata("record", "-o", out, "--native", "--", python.exe, "-X", "perf", PROGRAMS / "perftramp_fork.py", "0.8")
    assert r.returncode == 0, r.stderr
    rows = collapsed(out)
    total = sum(c for _, c in rows)
    odd = sum(c for frames, c in rows if any("[unknown]" in f or "[perf-map]" in f for f in frames))
    assert odd < 0.01 * total, [x for x in rows if any("[unknown]" in f for f in x[0])][:3]
    src = (PROGRAMS / "perftramp_fork.py").read_text().splitlines()
    for marker in ("# CHILD", "# PARENT"):
        line = next(i for i, l in enumerate(src, 1) if marker in l)
        # The innermost Python frame: under it may be CPython's own work
        # for the line (int arithmetic), shown since issue 14.
        n = sum(c for frames, c in rows
                if frames[0].endswith("perftramp_fork.py:%d)" % line)
                and [x for f, x in zip(frames, names(frames)) if ".py:" in f][-1] == "leaf")
        assert n > 0.25 * total, (marker, rows[:4])
