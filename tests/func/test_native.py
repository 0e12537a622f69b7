"""--native: C frames merged with the Python frames that called them, read
through the user's interfaces: `strata report --json` (functions and lines
with kind "native" and their module, the native unwinding counts) and
`strata convert -f collapsed` (whole stacks, root first, for the order).

Known answers from tests/func/programs/native: a C extension built here
with -g (burn_c under a known Python line, a C function calling back into
Python, a sorted() key function calling C again), libm's sin under a
Python line, NumPy's C code under its caller; a static function inlined
at -O2 under its caller at the line of its loop; CPython's own work (the
regex engine, list sort) under the line that asked for it, its call
machinery (the eval loop, vectorcall...) never unless --keep-interpreter;
unwinding fails on less than 1% of samples; the target survives threads,
dlopen, fork, wall mode.
"""
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import PROGRAMS, func_row, strata

NATIVE = PROGRAMS / "native"
MIXED = NATIVE / "mixed.py"
EXT_C = NATIVE / "ext.c"
# Interpreter objects: the executable, or libpython of a shared build.
INTERP_RE = re.compile(r"(^|/)(lib)?python\d(\.\d+)?[dmt]*(\.so[.\d]*)?$")
# CPython's call machinery that issue 14 names: never shown without
# --keep-interpreter (src/lib/interp.c holds the whole list).
MACHINERY_RE = re.compile(r"^(_PyEval_EvalFrame|_PyEval_Vector|PyObject_Call(?!oc)|_PyObject_Call(?!oc)|"
                          r"PyObject_Vectorcall|_PyObject_Vectorcall|_PyObject_MakeTpCall|_PyFunction_Vectorcall|"
                          r"method_vectorcall|cfunction_call|cfunction_vectorcall|slot_tp_|wrapperdescr_call|"
                          r"wrapper_call)")


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

    def cpython_work(self, frames):
        """Whether every frame is a CPython function doing work (no call
        machinery)."""
        return all(is_interpreter(self.module_of(x.name)) and not MACHINERY_RE.match(x.name) for x in frames)


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
    only CPython's sort (no call machinery) between the two Python frames:
    where the interpreter has names for it (pyenv's builds), list_sort_impl
    is there."""
    sorted_line, key_line = marker_line(MIXED, "# SORTED"), marker_line(MIXED, "# KEY")
    in_key = [(f, c) for f, c in mixed.stacks() if any(x.at("key", MIXED) for x in f)]
    n = sum(c for _, c in in_key)
    assert n > 0.05 * mixed.report()["samples"], n

    def between(f, outer, inner):
        """The frames between the outer and inner predicates' frames, if
        they are next to each other but for CPython's work."""
        for i, x in enumerate(f):
            if outer(x):
                j = next((j for j in range(i + 1, len(f)) if not mixed.cpython_work([f[j]])), None)
                if j is not None and inner(f[j:]):
                    return f[i + 1:j]
        return None

    def key_burn(rest):
        return len(rest) >= 2 and rest[0].at("key", MIXED, key_line) and rest[1].at("burn_c", EXT_C)

    mid = [(between(f, lambda x: x.at("uses_sorted", MIXED, sorted_line), key_burn), c) for f, c in in_key]
    assert sum(c for m, c in mid if m is not None) > 0.8 * n, in_key[:3]
    named = [m for m, _ in mid if m]
    if named:
        # The sort calls the key: list_sort_impl is the last frame before it.
        assert all(m[-1].name.startswith("list_sort") for m in named), named[:3]
    # map() over a Python function: the function under the map line,
    # with only list() and map()'s own code between them.
    map_line = marker_line(MIXED, "# MAP")
    in_sq = [(f, c) for f, c in mixed.stacks() if any(x.at("square", MIXED) for x in f)]
    n = sum(c for _, c in in_sq)
    assert n > 0.05 * mixed.report()["samples"], n
    adjacent = sum(c for f, c in in_sq
                   if between(f, lambda x: x.at("uses_map", MIXED, map_line), lambda r: r[0].at("square", MIXED))
                   is not None)
    assert adjacent > 0.95 * n, in_sq[:3]


def test_libm_sin_under_python_line(mixed):
    sin_line = marker_line(MIXED, "# SIN")
    rep = mixed.report()
    # sin itself and, with libc6-dbg, what glibc inlined into it (do_sin,
    # reduce_sincos...): every function of libm.
    libm = [f for f in rep["functions"]
            if f["kind"] == "native" and f["module"] and Path(f["module"]).name.startswith("libm.")]
    assert sum(f["self"] for f in libm) > 0.02 * rep["samples"], [f for f in rep["functions"] if f["module"]][:10]
    assert any(re.match(r"(__)?sin(_[a-z0-9]+)?$", f["name"]) or f["name"].startswith("libm.") for f in libm), libm
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
    # No call machinery, and nothing of the interpreter that has no name
    # (Debian's python3.11 names only its exported functions).
    interp = [f for f in rep["functions"] if is_interpreter(f["module"])]
    bad = [f for f in interp if MACHINERY_RE.match(f["name"]) or "+0x" in f["name"]]
    assert not bad, bad
    kept = mixed.report(keep=True)
    assert kept["native"]["keep_interpreter"] is True
    ev = [f for f in kept["functions"] if f["name"].startswith("_PyEval_EvalFrameDefault")]
    assert ev and all(is_interpreter(f["module"]) for f in ev), ev
    assert max(f["total"] for f in ev) > 0.9 * kept["samples"]
    # The same samples, only more frames.
    assert kept["samples"] == rep["samples"]
    # Interpreter code that C calls is shown in both (PyFloat_FromDouble,
    # where it has a name) or is the C caller's self cost when hidden.
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
    if "debian" not in str(mixed.path.parent.name):
        # An interpreter with names: the call machinery of the callback's
        # call (call_back -> PyObject_CallObject... -> callback) is there
        # with --keep-interpreter, and only then.
        machinery = {f["name"] for f in kept["functions"] if MACHINERY_RE.match(f["name"])}
        assert machinery & {"PyObject_CallObject", "_PyObject_MakeTpCall", "_PyFunction_Vectorcall",
                            "PyObject_Call", "_PyObject_Call", "_PyObject_FastCallDict"}, machinery


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


@pytest.mark.edge_pythons
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
    # Functions inlined into others (glibc's do_sin...) are "NAME (inline)".
    rows = {k[:-len(" (inline)")] if k.endswith(" (inline)") else k: v for k, v in rows.items()}
    for f in rep["functions"]:
        if f["kind"] == "native":
            assert rows.get(f["name"], (0, 0)) == (f["self"], f["total"]), f


# ---- inlined functions ------------------------------------------------------

CBURN_C = NATIVE / "cburn.c"
INLINED = NATIVE / "inlined.py"


def build_cburn(python, where):
    """cburn.c built the way wheels are: -O2 (and -g for names and lines)."""
    inc = subprocess.run([str(python.exe), "-c", "import sysconfig; print(sysconfig.get_paths()['include'])"],
                         capture_output=True, text=True, check=True).stdout.strip()
    so = Path(where) / "strata_cburn.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-g", "-O2", "-I" + inc, "-o", str(so), str(CBURN_C)], check=True)
    return so


def assert_inlined(so, names):
    """Each function is compiled only into its callers: no symbol, and a
    DWARF subprogram marked inlined (DW_AT_inline) with instances."""
    syms = subprocess.run(["nm", str(so)], capture_output=True, text=True, check=True).stdout
    dies = re.split(r"\n(?= <\d+><[0-9a-f]+>:)",
                    subprocess.run(["readelf", "--debug-dump=info", str(so)], capture_output=True, text=True,
                                   check=True).stdout)
    for name in names:
        assert not re.search(r"\s%s(\.\w+)*$" % name, syms, re.M), "%s has a symbol: not inlined" % name
        die = [d for d in dies if re.search(r"DW_AT_name\s*:.*\b%s$" % name, d, re.M) and "DW_TAG_subprogram" in d]
        assert die and re.search(r"DW_AT_inline\s*:\s*[13]\b", die[0]), "%s: %s" % (name, die)
    assert "DW_TAG_inlined_subroutine" in "".join(dies)


_INLINED = {}


@pytest.fixture
def inlined(python, tmp_path_factory):
    if python.id not in _INLINED:
        d = tmp_path_factory.mktemp("inlined-%s" % python.id)
        so = build_cburn(python, d)
        assert_inlined(so, ["churn_inner", "churn_mid"])
        out = d / "inlined.strata"
        r = strata("record", "-o", out, "--native", "--", python.exe, INLINED, so, "1.2")
        assert r.returncode == 0, r.stderr
        _INLINED[python.id] = Profile(out)
    return _INLINED[python.id]


def test_inlined_function_is_a_frame(inlined):
    """churn() spends its time in churn_inner()'s loop, inlined through
    churn_mid() at -O2: the stack reads caller (CHURN line) -> churn (the
    line calling churn_mid) -> churn_mid (the line calling churn_inner) ->
    churn_inner (its loop), not churn at its call site."""
    rep = inlined.report()
    churn_line = marker_line(INLINED, "# CHURN")
    mid, inner, loop = (marker_line(CBURN_C, m) for m in ("CALL_MID", "CALL_INNER", "INNER_LOOP"))
    caller = func_row(rep, "caller")
    exact = inlined.count(lambda f: len(f) >= 4 and f[-4].at("caller", INLINED, churn_line)
                          and f[-3].at("churn", CBURN_C, mid) and f[-2].at("churn_mid", CBURN_C, inner)
                          and f[-1].at("churn_inner", CBURN_C) and f[-1].line in (loop - 1, loop))
    assert exact > 0.9 * caller["total"], inlined.stacks()[:5]
    row = func_row(rep, "churn_inner")
    assert row["kind"] == "native" and Path(row["module"]).name == "strata_cburn.so", row
    assert Path(row["file"]).name == "cburn.c" and row["line"] == marker_line(CBURN_C, "churn_inner(long n"), row
    assert row["self"] > 0.9 * caller["total"], rep["functions"][:5]
    for name in ("churn", "churn_mid"):
        r = func_row(rep, name)
        assert r["self"] < 0.02 * rep["samples"] and r["total"] >= row["total"], r
    hot = max((ln for ln in rep["lines"] if ln["function"] == "churn_inner"), key=lambda ln: ln["self"])
    assert hot["line"] == loop, hot
    # With --keep-interpreter too.
    kept = inlined.report(keep=True)
    assert func_row(kept, "churn_inner")["self"] == row["self"]
    assert rep["native"]["inline"] is True
    # --no-inline: churn holds the time, at the line that calls churn_mid.
    out = strata("report", "--json", "--no-inline", inlined.path)
    assert out.returncode == 0, out.stderr
    flat = json.loads(out.stdout)
    assert flat["native"]["inline"] is False
    names = {f["name"] for f in flat["functions"]}
    assert "churn_inner" not in names and "churn_mid" not in names, sorted(names)
    own = sum(func_row(rep, n)["self"] for n in ("churn", "churn_mid", "churn_inner"))
    assert func_row(flat, "churn")["self"] == own, func_row(flat, "churn")
    hot = max((ln for ln in flat["lines"] if ln["function"] == "churn"), key=lambda ln: ln["self"])
    assert hot["line"] == mid, hot


def test_inlined_function_in_annotate(inlined, tmp_path):
    """annotate on the C file: the loop line of the inlined function holds
    the self cost, the lines that called it only total; the heat map
    (--native) has the C file too."""
    r = strata("annotate", "--json", inlined.path, "cburn.c")
    assert r.returncode == 0, r.stderr
    ann = json.loads(r.stdout)
    (f,) = ann["files"]
    lines = {ln["line"]: ln for ln in f["lines"]}
    loop, mid, inner = (marker_line(CBURN_C, m) for m in ("INNER_LOOP", "CALL_MID", "CALL_INNER"))
    total = func_row(inlined.report(), "churn")["total"]
    assert max(lines, key=lambda n: lines[n]["self"]) == loop, lines
    assert lines[loop]["self"] + lines.get(loop - 1, {"self": 0})["self"] > 0.9 * total, lines
    for n in (mid, inner):
        assert lines[n]["self"] == 0 and lines[n]["total"] >= 0.98 * total, (n, lines[n])
    # A function's view: churn_mid, from its first line to the call.
    r = strata("annotate", inlined.path, "churn_mid")
    assert r.returncode == 0 and "churn_inner(n, 0.5); /* CALL_INNER */" in r.stdout, r.stdout + r.stderr
    from test_diff import read_heatmap
    r = strata("annotate", inlined.path, "--native", "-f", "html", "-o", tmp_path / "heat")
    assert r.returncode == 0, r.stderr
    index, files = read_heatmap(tmp_path / "heat")
    k = next(i for i, f in enumerate(index["files"]) if f[0].endswith("cburn.c"))
    assert index["files"][k][1] == "native"
    heat = {l[0]: l for l in files[k]["lines"]}
    assert max(heat, key=lambda n: heat[n][1]) == loop, heat
    assert files[k]["src"] and "CALL_INNER" in files[k]["src"][inner - 1]


def test_inlined_function_in_top(inlined, python, tmp_path):
    """strata top's function view: churn_inner holds the self time."""
    if python.id not in ("3.12", "debian-3.11"):
        pytest.skip("top is checked on one pyenv interpreter and Debian's")
    so = Path(inlined.path).parent / "strata_cburn.so"
    r = strata("top", "--no-curses", "--native", "-o", tmp_path / "top.strata", "--", python.exe, INLINED, so, "1.5")
    assert r.returncode == 0, r.stderr
    last = r.stdout.split("strata top ")[-1]
    rows = [ln.split() for ln in last.splitlines() if re.match(r"^\s+\d+\.\d\s+\d+\.\d\s+\S", ln)]
    assert rows and rows[0][2] == "churn_inner" and float(rows[0][0]) > 80, last
    assert rows[0][3].startswith("cburn.c:"), rows[0]


def test_inlined_function_in_exports(inlined, python, tmp_path):
    """Every export carries the inlined functions, read by its consumer:
    callgrind_annotate (churn_inner called by churn_mid called by churn),
    flamegraph.pl, go tool pprof (one location, the inlined functions as
    its first lines: pprof marks them "(inline)"), speedscope's importer
    and the Firefox Profiler's CLI."""
    if python.id not in ("3.12", "debian-3.11"):
        pytest.skip("the exports are checked on one pyenv interpreter and Debian's")
    from test_export_text import (callgrind_annotate, fg_total, flamegraph, need_callgrind_annotate, need_flamegraph,
                                  pprof_top)
    rep = inlined.report()
    rows = {n: func_row(rep, n) for n in ("churn", "churn_mid", "churn_inner")}
    need_flamegraph()
    folded = tmp_path / "inl.folded"
    assert strata("convert", inlined.path, "-f", "collapsed", "-o", folded).returncode == 0
    frames = flamegraph(folded, tmp_path / "inl.svg")
    for n, row in rows.items():
        assert fg_total(frames, n) == row["total"], n
    need_callgrind_annotate()
    cg = tmp_path / "inl.callgrind"
    assert strata("convert", inlined.path, "-f", "callgrind", "-o", cg).returncode == 0
    ann = callgrind_annotate(cg, tmp_path)
    key = {n: "%s:%s" % (row["file"], n) for n, row in rows.items()}
    for n, row in rows.items():
        assert ann["funcs"][key[n]]["cost"][0] == row["total"], (n, ann["funcs"][key[n]])
    assert key["churn_mid"] in ann["tree"][key["churn"]], ann["tree"][key["churn"]]
    assert key["churn_inner"] in ann["tree"][key["churn_mid"]], ann["tree"][key["churn_mid"]]
    loop = marker_line(CBURN_C, "INNER_LOOP")
    cl = {ln: c[0] for (f, ln), c in ann["lines"].items() if Path(f).name == "cburn.c"}
    assert max(cl, key=cl.get) == loop, cl
    if shutil.which("go"):
        pb = tmp_path / "inl.pb.gz"
        assert strata("convert", inlined.path, "-f", "pprof", "-o", pb).returncode == 0
        top, _, _ = pprof_top(pb)
        assert top.get("churn_inner (inline)") == (rows["churn_inner"]["self"], rows["churn_inner"]["total"]), top
        assert top.get("churn_mid (inline)") == (rows["churn_mid"]["self"], rows["churn_mid"]["total"]), top
        assert top.get("churn") == (rows["churn"]["self"], rows["churn"]["total"]), top
    from test_export_web import NODE, JS, ProfilerCli, speedscope_check
    ss = tmp_path / "inl.speedscope"
    assert strata("convert", inlined.path, "-f", "speedscope", "-o", ss).returncode == 0
    imp = speedscope_check(ss)
    inner = [f for p in imp["profiles"] for f in p["frames"] if f["name"].startswith("churn_inner (cburn.c:")]
    assert sum(f["self"] for f in inner) == rows["churn_inner"]["self"] * 1000000, inner[:3]
    if NODE and (JS / "node_modules" / "@firefox-devtools" / "profiler-cli" / "package.json").exists():
        gk = tmp_path / "inl.gecko"
        assert strata("convert", inlined.path, "-f", "gecko", "-o", gk).returncode == 0
        cli = ProfilerCli(tmp_path)
        try:
            s = cli.load(gk)
            fn = {f["name"]: f for f in cli.json(s, "thread", "functions")["functions"]}
            assert fn["churn_inner"]["selfSamples"] == rows["churn_inner"]["self"], fn.get("churn_inner")
            assert fn["churn_mid"]["totalSamples"] == rows["churn_mid"]["total"], fn.get("churn_mid")
        finally:
            cli.stop()


# ---- CPython's own work -------------------------------------------------------

CPYTHON_WORK = NATIVE / "cpython_work.py"


def test_cpython_work_under_its_line(python, record):
    """re.findall: the regex engine's frames under the line; sorted() of a
    big list: list sort's frames under the line; and no call machinery
    between (vectorcall, method and builtin wrappers) unless
    --keep-interpreter. Debian's python3.11 has names only for its exported
    functions, and the regex engine and the sort are static functions: the
    test checks there that no unnamed interpreter frame is shown instead
    (pyenv's interpreters, built with symbols, show the names)."""
    res = record(python, CPYTHON_WORK, "2", opts=["--native"])
    assert res.returncode == 0, res.stderr
    prof = Profile(res.path)
    rep = prof.report()
    regex_line, sort_line = marker_line(CPYTHON_WORK, "# REGEX"), marker_line(CPYTHON_WORK, "# SORT")

    def under(line, keep=False):
        """(frames below the line, count) for stacks through that line."""
        out = []
        for f, c in prof.stacks(keep):
            i = next((i for i, x in enumerate(f) if x.at("regex" if line == regex_line else "sorting",
                                                         CPYTHON_WORK, line)), None)
            if i is not None:
                out.append((f[i + 1:], c))
        return out

    regex, sort = under(regex_line), under(sort_line)
    assert sum(c for _, c in regex) > 0.3 * rep["samples"] and sum(c for _, c in sort) > 0.3 * rep["samples"]
    for rows in (regex, sort):
        # Nothing below the line is call machinery or an interpreter
        # function without a name.
        assert not [b for b, _ in rows if any(MACHINERY_RE.match(x.name) or x.name.startswith("python3") for x in b)]
    if python.id.startswith("debian"):
        assert not [f for f in rep["functions"] if "+0x" in f["name"] and is_interpreter(f["module"])]
        return
    for rows in (regex, sort):
        # What the line called first is CPython's own work.
        assert all(prof.cpython_work(below[:1]) for below, _ in rows if below), [b for b, _ in rows][:5]
    n = sum(c for _, c in regex)
    engine = sum(c for below, c in regex if any(x.name.startswith("sre_") for x in below))
    assert engine > 0.4 * n, regex[:5]
    # The engine is what the pattern's findall method called.
    assert all(below[0].name.startswith("_sre_SRE_Pattern_findall") for below, _ in regex
               if any(x.name.startswith("sre_") for x in below)), regex[:5]
    n = sum(c for _, c in sort)
    in_sort = [(below, c) for below, c in sort if any(x.name == "list_sort_impl" for x in below)]
    assert sum(c for _, c in in_sort) > 0.6 * n, sort[:5]
    work = {"merge_at", "merge_lo", "merge_hi", "binarysort", "count_run", "gallop_left", "gallop_right",
            "unsafe_long_compare", "unsafe_object_compare", "merge_collapse", "merge_force_collapse"}
    assert sum(c for below, c in in_sort if work & {x.name for x in below}) > 0.4 * n, in_sort[:5]
