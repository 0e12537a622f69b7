"""--native: C frames merged with the Python frames that called them.

Known answers from tests/func/programs/native: a C extension built here
with -g (burn_c under a known Python function, a C function calling back
into Python), libm's sin under a Python line, NumPy under its caller; the
eval loop never shows unless --keep-interpreter; unwinding fails on less
than 1% of samples; the target survives threads, dlopen, fork, wall mode.

Until the profile model reads native frames, stacks are read with
build/tests/nstacks (symbols.c + merge.c), which prints collapsed stacks.
"""
import re
import subprocess
import sysconfig
from pathlib import Path

import pytest

from conftest import BUILD, PROGRAMS

NSTACKS = BUILD / "tests" / "nstacks"
NATIVE = PROGRAMS / "native"


def marker_line(path, marker):
    for i, line in enumerate(Path(path).read_text().splitlines(), 1):
        if marker in line:
            return i
    raise AssertionError("no %s in %s" % (marker, path))


@pytest.fixture
def ext(python, tmp_path):
    """The test extension, compiled with -g for this interpreter."""
    inc = subprocess.run([str(python.exe), "-c", "import sysconfig; print(sysconfig.get_paths()['include'])"],
                         capture_output=True, text=True, check=True).stdout.strip()
    so = tmp_path / "strata_native_ext.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-g", "-O1", "-I" + inc, "-o", str(so), str(NATIVE / "ext.c")],
                   check=True)
    return so


class Stacks:
    def __init__(self, path, *opts):
        assert NSTACKS.exists(), "build it with make unit"
        out = subprocess.run([str(NSTACKS)] + list(opts) + [str(path)], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        self.rows = []
        self.summary = {}
        for line in out.stdout.splitlines():
            if line.startswith("# "):
                self.summary = {k: int(v) for k, v in (kv.split("=") for kv in line[2:].split())}
                continue
            text, count = line.rsplit(" ", 1)
            self.rows.append((text.split(";"), int(count)))
        self.total = self.summary["samples"]

    def count(self, pred):
        return sum(c for frames, c in self.rows if pred(frames))

    def failure_share(self):
        return (self.summary["failed"] + self.summary["truncated"]) / max(1, self.summary["native"])


def record_native(record, python, prog, *args, opts=()):
    res = record(python, NATIVE / prog, *[str(a) for a in args], opts=["--native"] + list(opts))
    assert res.returncode == 0, res.stderr
    return res


def test_c_function_under_python_caller(python, record, ext):
    res = record_native(record, python, "mixed.py", ext, 1.5)
    st = Stacks(res.path)
    hot = marker_line(NATIVE / "ext.c", "/* HOT */")
    leaf_burn = [(f, c) for f, c in st.rows if f[-1].startswith("c:burn_c ")]
    burn = sum(c for _, c in leaf_burn)
    # caller() runs for 1.5 of 3 CPU seconds, nearly all of it inside burn_c.
    assert burn > 0.35 * st.total, st.rows[:5]
    under_caller = sum(c for f, c in leaf_burn if len(f) >= 2 and f[-2].startswith("py:caller "))
    assert under_caller > 0.95 * burn, leaf_burn[:5]
    lines = {}
    for f, c in leaf_burn:
        m = re.search(r"\(ext\.c:(\d+)\)$", f[-1])
        assert m, "burn_c has no ext.c line: %s" % f[-1]
        lines[int(m.group(1))] = lines.get(int(m.group(1)), 0) + c
    top = max(lines, key=lines.get)
    assert top in (hot - 1, hot), (lines, hot)


def test_python_callback_below_c_frame(python, record, ext):
    res = record_native(record, python, "mixed.py", ext, 1.5)
    st = Stacks(res.path)
    with_cb = [(f, c) for f, c in st.rows if any(x.startswith("py:callback ") for x in f)]
    n = sum(c for _, c in with_cb)
    assert n > 0.1 * st.total

    def ordered(f):
        names = [x.split(" ")[0] for x in f]
        try:
            return names.index("py:uses_callback") < names.index("c:call_into_python") < names.index("py:callback")
        except ValueError:
            return False

    assert sum(c for f, c in with_cb if ordered(f)) > 0.95 * n, with_cb[:3]


def test_libm_sin_under_python_line(python, record, ext):
    res = record_native(record, python, "mixed.py", ext, 1.5)
    st = Stacks(res.path)
    def nearest_py(f):
        return next((x for x in reversed(f) if x.startswith("py:")), "")

    # Between them there may be the math module's own C function, where
    # the build has it as a separate extension (pyenv) rather than in the
    # interpreter (Debian).
    sin = st.count(lambda f: re.match(r"c:(__)?sin(_[a-z0-9]+)?[ *]", f[-1] + " ")
                   and nearest_py(f).startswith("py:sines "))
    assert sin > 0.02 * st.total, [r for r in st.rows if "sines" in r[0][-1] or "sin" in r[0][-1]][:5]


def test_eval_loop_hidden_unless_keep_interpreter(python, record, ext):
    res = record_native(record, python, "mixed.py", ext, 0.5)
    st = Stacks(res.path)
    assert not any("_PyEval_EvalFrameDefault" in x for f, _ in st.rows for x in f)
    kept = Stacks(res.path, "--keep-interpreter")
    assert kept.count(lambda f: any(x.startswith("c:_PyEval_EvalFrameDefault") for x in f)) > 0.5 * kept.total
    # The eval frame sits right above the Python frames it runs.
    for f, _ in kept.rows:
        for i, x in enumerate(f):
            if x.startswith("c:_PyEval_EvalFrameDefault") and i + 1 < len(f):
                assert f[i + 1].startswith("py:") or f[i + 1].startswith("c:"), f


def test_unwinding_rarely_fails(python, record, ext):
    res = record_native(record, python, "mixed.py", ext, 1.5)
    st = Stacks(res.path)
    assert st.summary["native"] == st.total
    assert st.failure_share() < 0.01, st.summary
    assert st.summary["mismatch"] < 0.01 * st.total, st.summary


def test_numpy_c_code_under_python_line(debian_python, record):
    if not debian_python.has_module("numpy"):
        pytest.skip("numpy is not installed for %s" % debian_python.exe)
    res = record_native(record, debian_python, "numpy_work.py", 1.5)
    st = Stacks(res.path)
    assert st.failure_share() < 0.01, st.summary
    for fn, mod in (("sorting", "_multiarray_umath"), ("fft", "_pocketfft_internal")):
        under = [(f, c) for f, c in st.rows if any(x.startswith("py:%s " % fn) for x in f)]
        n = sum(c for _, c in under)
        assert n > 0.2 * st.total, fn
        in_c = sum(c for f, c in under if mod in f[-1])
        assert in_c > 0.6 * n, (fn, under[:3])


@pytest.mark.parametrize("mode", ["cpu", "wall"])
def test_target_survives(python, record, ext, mode):
    res = record(python, NATIVE / "stress.py", str(ext), opts=["--native", "--mode", mode])
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "OK"
    st = Stacks(res.path)
    assert st.summary["native"] > 0
    assert st.count(lambda f: f[-1].startswith("c:burn_c ")) > 0, st.rows[:10]
    assert st.failure_share() < 0.05, st.summary
