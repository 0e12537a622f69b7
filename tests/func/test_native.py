"""--native: C frames merged with the Python frames that called them, read
through the user's interfaces: `strata report --json` (functions and lines
with kind "native" and their module, the native unwinding counts) and
`strata convert -f collapsed` (whole stacks, root first, for the order).

Known answers from tests/func/programs/native: a C extension built here
with -g (burn_c under a known Python line, a C function calling back into
Python, a sorted() key function calling C again), libm's sin under a
Python line, NumPy's C code under its caller; the eval loop never shows
unless --keep-interpreter; unwinding fails on less than 1% of samples; the
target survives threads, dlopen, fork, wall mode.
"""
import re
import subprocess
from pathlib import Path

import pytest

from conftest import PROGRAMS, func_row, strata

NATIVE = PROGRAMS / "native"
MIXED = NATIVE / "mixed.py"
EXT_C = NATIVE / "ext.c"
# Interpreter objects: the executable, or libpython of a shared build.
INTERP_RE = re.compile(r"(^|/)(lib)?python\d(\.\d+)?[dmt]*(\.so[.\d]*)?$")


def marker_line(path, marker):
    for i, line in enumerate(Path(path).read_text().splitlines(), 1):
        if marker in line:
            return i
    raise AssertionError("no %s in %s" % (marker, path))


class Frame:
    """One frame of a collapsed stack: "name (file:line)", "name (object)",
    "object+0xOFFSET" or a marker."""

    def __init__(self, label):
        self.label = label
        self.name, self.file, self.line = label, "", 0
        if label.endswith(")") and " (" in label:
            self.name, loc = label[:-1].rsplit(" (", 1)
            m = re.match(r"(.*):(\d+)$", loc)
            self.file, self.line = (m.group(1), int(m.group(2))) if m else (loc, 0)

    def at(self, name, path=None, line=None):
        return (self.name == name and (path is None or Path(self.file).name == Path(path).name)
                and (line is None or self.line == line))

    def __repr__(self):
        return self.label


class Profile:
    """A recorded --native profile, read through report --json and
    convert -f collapsed (with and without --keep-interpreter)."""

    def __init__(self, path):
        self.path = path
        self._cache = {}

    def report(self, keep=False):
        key = ("report", keep)
        if key not in self._cache:
            args = ["report", "--json"] + (["--keep-interpreter"] if keep else []) + [self.path]
            out = strata(*args)
            assert out.returncode == 0, out.stderr
            import json
            self._cache[key] = json.loads(out.stdout)
        return self._cache[key]

    def stacks(self, keep=False):
        key = ("stacks", keep)
        if key not in self._cache:
            args = ["convert", self.path, "-f", "collapsed"] + (["--keep-interpreter"] if keep else [])
            out = strata(*args)
            assert out.returncode == 0, out.stderr
            rows = []
            for line in out.stdout.splitlines():
                text, count = line.rsplit(" ", 1)
                rows.append(([Frame(x) for x in text.split(";")], int(count)))
            self._cache[key] = rows
        return self._cache[key]

    def count(self, pred, keep=False):
        return sum(c for f, c in self.stacks(keep) if pred(f))

    def module_of(self, name):
        mods = {f["module"] for f in self.report()["functions"] if f["name"] == name}
        return mods.pop() if len(mods) == 1 else None


def build_ext(python, where):
    """The test extension, compiled with -g for this interpreter."""
    inc = subprocess.run([str(python.exe), "-c", "import sysconfig; print(sysconfig.get_paths()['include'])"],
                         capture_output=True, text=True, check=True).stdout.strip()
    so = Path(where) / "strata_native_ext.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-g", "-O1", "-I" + inc, "-o", str(so), str(EXT_C)], check=True)
    return so


@pytest.fixture
def ext(python, tmp_path):
    return build_ext(python, tmp_path)


# mixed.py is recorded once per interpreter and read by several tests.
_MIXED = {}


@pytest.fixture
def mixed(python, tmp_path_factory):
    if python.id not in _MIXED:
        d = tmp_path_factory.mktemp("native-%s" % python.id)
        so = build_ext(python, d)
        out = d / "mixed.strata"
        r = strata("record", "-o", out, "--native", "--", python.exe, MIXED, so, "1.2")
        assert r.returncode == 0, r.stderr
        _MIXED[python.id] = Profile(out)
    return _MIXED[python.id]


def ordered(frames, *preds):
    """Whether frames (root first) contain a frame matching each predicate,
    in this order."""
    i = 0
    for f in frames:
        if i < len(preds) and preds[i](f):
            i += 1
    return i == len(preds)


def test_c_function_under_python_caller(mixed):
    rep = mixed.report()
    burn = func_row(rep, "burn_c")
    assert burn["kind"] == "native"
    assert Path(burn["module"]).name == "strata_native_ext.so", burn
    assert Path(burn["file"]).name == "ext.c" and burn["line"] == marker_line(EXT_C, "*burn_c("), burn
    # caller() runs for 1.2 of 3 CPU seconds, nearly all of it in burn_c,
    # which holds the most self samples of any function.
    assert burn["self"] > 0.3 * rep["samples"], rep["functions"][:5]
    assert rep["functions"][0]["name"] == "burn_c", rep["functions"][:5]
    hot = marker_line(EXT_C, "/* HOT */")
    burn_lines = [ln for ln in rep["lines"] if ln["function"] == "burn_c" and ln["self"]]
    assert all(Path(ln["file"]).name == "ext.c" and ln["kind"] == "native" for ln in burn_lines), burn_lines
    top = max(burn_lines, key=lambda ln: ln["self"])
    assert top["line"] in (hot - 1, hot), burn_lines
    # The stack reads caller (mixed.py:CALLER) -> burn_c (ext.c:HOT).
    caller_line = marker_line(MIXED, "# CALLER")
    direct = mixed.count(lambda f: len(f) >= 2 and f[-1].at("burn_c", EXT_C) and f[-2].at("caller", MIXED, caller_line))
    assert direct > 0.9 * func_row(rep, "caller")["total"], mixed.stacks()[:5]
    at_hot = mixed.count(lambda f: f[-1].at("burn_c", EXT_C) and f[-1].line in (hot - 1, hot))
    assert at_hot > 0.9 * burn["self"]


def test_python_callback_below_c_frame(mixed):
    call_line = marker_line(MIXED, "# CALL_BACK")
    with_cb = [(f, c) for f, c in mixed.stacks() if any(x.at("callback", MIXED) for x in f)]
    n = sum(c for _, c in with_cb)
    assert n > 0.1 * mixed.report()["samples"]
    good = sum(c for f, c in with_cb if ordered(f, lambda x: x.at("uses_callback", MIXED, call_line),
                                                  lambda x: x.at("call_back", EXT_C),
                                                  lambda x: x.at("call_into_python", EXT_C),
                                                  lambda x: x.at("callback", MIXED)))
    assert good > 0.95 * n, with_cb[:3]
    cip = func_row(mixed.report(), "call_into_python")
    assert cip["kind"] == "native" and cip["line"] == marker_line(EXT_C, "call_into_python(PyObject")


def test_python_c_python_c(mixed):
    """sorted(key=...) whose key calls C: Python -> C -> Python -> C, with
    the interpreter's sorted() hidden between the two Python frames."""
    sorted_line, key_line = marker_line(MIXED, "# SORTED"), marker_line(MIXED, "# KEY")
    in_key = [(f, c) for f, c in mixed.stacks() if any(x.at("key", MIXED) for x in f)]
    n = sum(c for _, c in in_key)
    assert n > 0.05 * mixed.report()["samples"], n

    def exact(f):
        for i in range(len(f) - 2):
            if (f[i].at("uses_sorted", MIXED, sorted_line) and f[i + 1].at("key", MIXED, key_line)
                    and f[i + 2].at("burn_c", EXT_C)):
                return True
        return False

    assert sum(c for f, c in in_key if exact(f)) > 0.8 * n, in_key[:3]
    # map() over a Python function: the function right under the map line.
    map_line = marker_line(MIXED, "# MAP")
    in_sq = [(f, c) for f, c in mixed.stacks() if any(x.at("square", MIXED) for x in f)]
    n = sum(c for _, c in in_sq)
    assert n > 0.05 * mixed.report()["samples"], n
    adjacent = sum(c for f, c in in_sq
                   if any(f[i].at("uses_map", MIXED, map_line) and f[i + 1].at("square", MIXED)
                          for i in range(len(f) - 1)))
    assert adjacent > 0.95 * n, in_sq[:3]


def test_libm_sin_under_python_line(mixed):
    sin_line = marker_line(MIXED, "# SIN")
    rep = mixed.report()
    libm = [f for f in rep["functions"]
            if f["kind"] == "native" and f["module"] and Path(f["module"]).name.startswith("libm.")
            and (re.match(r"(__)?sin(_[a-z0-9]+)?$", f["name"]) or f["name"].startswith("libm."))]
    assert sum(f["self"] for f in libm) > 0.02 * rep["samples"], [f for f in rep["functions"] if f["module"]][:10]
    names = {f["name"] for f in libm}

    def nearest_py(f):
        return next((x for x in reversed(f) if x.file.endswith(".py")), None)

    # Between them there may be the math module's own C function, where
    # the build has it as a separate extension (pyenv) rather than in the
    # interpreter (Debian).
    under = mixed.count(lambda f: f[-1].name in names and nearest_py(f) and nearest_py(f).at("sines", MIXED, sin_line))
    assert under > 0.9 * sum(f["self"] for f in libm), names


def is_interpreter(module):
    return bool(module) and bool(INTERP_RE.search(module))


def test_eval_loop_hidden_unless_keep_interpreter(mixed):
    rep = mixed.report()
    assert not [f for f in rep["functions"] if f["name"].startswith("_PyEval_EvalFrameDefault")]
    assert not [f for f in rep["functions"] if is_interpreter(f["module"])], \
        [f for f in rep["functions"] if is_interpreter(f["module"])][:5]
    kept = mixed.report(keep=True)
    assert kept["native"]["keep_interpreter"] is True
    ev = [f for f in kept["functions"] if f["name"].startswith("_PyEval_EvalFrameDefault")]
    assert ev and all(is_interpreter(f["module"]) for f in ev), ev
    assert max(f["total"] for f in ev) > 0.9 * kept["samples"]
    # The same samples, only more frames.
    assert kept["samples"] == rep["samples"]
    # Interpreter code that C calls (PyFloat_FromDouble...) is the C
    # caller's self cost when hidden, its own when kept.
    kb, rb = func_row(kept, "burn_c")["self"], func_row(rep, "burn_c")["self"]
    assert 0.98 * rb <= kb <= rb
    # Each eval frame sits right above the Python frames it runs.
    after = [(f[i + 1], c) for f, c in mixed.stacks(keep=True) for i, x in enumerate(f[:-1])
             if x.name.startswith("_PyEval_EvalFrameDefault")]
    n = sum(c for _, c in after)
    assert sum(c for x, c in after if x.file.endswith(".py") or x.file.startswith("<")) > 0.99 * n, \
        [x for x, _ in after if not x.file.endswith(".py")][:5]
    # And the interpreter's call machinery between caller and burn_c.
    caller = [f for f, _ in mixed.stacks(keep=True) if f[-1].at("burn_c", EXT_C)]
    assert any(len(f) >= 3 and f[-2].name != "caller" for f in caller)


def test_unwinding_rarely_fails(mixed):
    rep = mixed.report()
    nat = rep["native"]
    assert nat["samples"] == rep["samples"], nat
    assert (nat["failed"] + nat["truncated"]) < 0.01 * nat["samples"], nat
    assert nat["mismatch"] < 0.01 * nat["samples"], nat
    # Every native address was in an object the profile describes (the
    # extension is loaded mid-run: its module record precedes its stacks).
    assert not [f for f in rep["functions"] if f["name"] == "[unknown]"], rep["functions"][:5]


def test_native_in_text_report(mixed):
    out = strata("report", "-n", "5", mixed.path)
    assert out.returncode == 0, out.stderr
    assert re.search(r"^native stacks: \d+ samples, \d+\.\d% cut short", out.stdout, re.M), out.stdout
    row = next(l for l in out.stdout.splitlines() if " burn_c " in l)
    assert row.rstrip().endswith("native") and "ext.c:" in row, row


def test_numpy_c_code_under_python_line(python, record):
    exe = python.with_module("numpy")
    res = record(python, NATIVE / "numpy_work.py", "1.2", opts=["--native"], exe=exe)
    assert res.returncode == 0, res.stderr
    prof = Profile(res.path)
    rep = prof.report()
    nat = rep["native"]
    assert (nat["failed"] + nat["truncated"]) < 0.01 * nat["samples"], nat
    work = NATIVE / "numpy_work.py"
    for fn, marker in (("sorting", "# SORT"), ("fft", "# FFT")):
        line = marker_line(work, marker)
        under = [(f, c) for f, c in prof.stacks() if any(x.at(fn, work, line) for x in f)]
        n = sum(c for _, c in under)
        assert n > 0.2 * rep["samples"], (fn, n)
        in_c = sum(c for f, c in under if "/numpy" in (prof.module_of(f[-1].name) or ""))
        assert in_c > 0.6 * n, (fn, under[:3])
    assert not [f for f in rep["functions"] if f["name"].startswith("_PyEval_EvalFrameDefault")]


@pytest.mark.parametrize("mode", ["cpu", "wall"])
def test_target_survives(python, record, ext, mode):
    res = record(python, NATIVE / "stress.py", str(ext), opts=["--native", "--mode", mode])
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "OK"
    rep = res.report()
    nat = rep["native"]
    assert nat and nat["samples"] > 0
    assert func_row(rep, "burn_c")["self"] > 0
    assert (nat["failed"] + nat["truncated"]) < 0.05 * nat["samples"], nat
    assert len(rep["processes"]) == 2  # the fork child too


def test_exports_of_a_native_profile(mixed, tmp_path):
    """A recorded --native profile read by the formats' real consumers:
    callgrind_annotate (native functions under their object and source
    file, called from the Python line), flamegraph.pl (collapsed) and, for
    Debian's Python, `go tool pprof` (every function's self and total)."""
    from test_export_text import (callgrind_annotate, fg_total, flamegraph, need_callgrind_annotate, need_flamegraph,
                                  need_go, pprof_top)
    rep = mixed.report()
    burn = func_row(rep, "burn_c")
    # collapsed -> flamegraph.pl
    need_flamegraph()
    folded = tmp_path / "mixed.folded"
    assert strata("convert", mixed.path, "-f", "collapsed", "-o", folded).returncode == 0
    frames = flamegraph(folded, tmp_path / "mixed.svg")
    assert fg_total(frames, "burn_c") == burn["total"]
    assert fg_total(frames, "call_into_python") == func_row(rep, "call_into_python")["total"]
    # callgrind -> callgrind_annotate
    need_callgrind_annotate()
    cg = tmp_path / "mixed.callgrind"
    assert strata("convert", mixed.path, "-f", "callgrind", "-o", cg).returncode == 0
    ann = callgrind_annotate(cg, tmp_path)
    key = "%s:burn_c" % burn["file"]
    assert key in ann["funcs"], [k for k in ann["funcs"] if "burn_c" in k]
    assert ann["funcs"][key]["ob"] == burn["module"], ann["funcs"][key]
    assert ann["funcs"][key]["cost"][0] == burn["total"]
    caller = "%s:caller" % func_row(rep, "caller")["file"]
    assert key in ann["tree"][caller], ann["tree"][caller]
    hot = marker_line(EXT_C, "/* HOT */")
    ext_lines = {ln: c[0] for (f, ln), c in ann["lines"].items() if Path(f).name == "ext.c"}
    assert max(ext_lines, key=ext_lines.get) in (hot - 1, hot), ext_lines
    # pprof -> go tool pprof (slow to build the first time: Debian's only)
    if not mixed.path.parent.name.startswith("native-debian"):
        return
    need_go()
    pb = tmp_path / "mixed.pb.gz"
    assert strata("convert", mixed.path, "-f", "pprof", "-o", pb).returncode == 0
    rows, _, _ = pprof_top(pb)
    for f in rep["functions"]:
        if f["kind"] == "native":
            assert rows.get(f["name"], (0, 0)) == (f["self"], f["total"]), f
