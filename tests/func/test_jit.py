"""JIT code (Numba): functions named from the images registered through the
GDB JIT interface, lines from their DWARF with --jit-lines, stacks through
them with --native, parallel=True worker threads. Read through the user's
interfaces: `strata report --json`, `strata convert -f collapsed`,
`strata annotate`.

Known answers from tests/func/programs/jit (markers in the source name the
lines): hotline.py's HOT line does ~90% of kernel()'s work; nested.py's
outer() calls inner() at CALL and inner() works at WORK; late.py compiles
its kernel halfway through the run; prange.py's BODY line runs on Numba's
worker threads.

Numba comes from Debian (python3-numba) for /usr/bin/python3, and from PyPI
in the pyenv virtualenvs (3.10+) where scripts/pyenvs.sh installed it.
"""
import re
import subprocess
from pathlib import Path

import pytest

from conftest import PROGRAMS, need_tool, strata

JIT = PROGRAMS / "jit"


def marker_line(name, marker):
    for i, line in enumerate((JIT / name).read_text().splitlines(), 1):
        if line.rstrip().endswith("# " + marker):
            return i
    raise AssertionError("no %s in %s" % (marker, name))


@pytest.fixture
def numba_python(python):
    return python, python.with_module("numba")


def run(record, numba_python, prog, *args, opts=()):
    interp, exe = numba_python
    res = record(interp, "jit/" + prog, *args, opts=list(opts), exe=str(exe))
    assert res.returncode == 0, res.stderr
    return res


def jit_funcs(rep, prefix):
    return [f for f in rep["functions"] if f["kind"] == "jit" and f["name"].startswith(prefix)]


def collapsed(res, *opts):
    out = Path(str(res.path) + ".folded")
    c = strata("convert", str(res.path), "-f", "collapsed", "-o", out, *opts)
    assert c.returncode == 0, c.stderr
    stacks = []
    for line in out.read_text().splitlines():
        path, _, count = line.rpartition(" ")
        stacks.append((path.split(";"), int(count)))
    return stacks


@pytest.mark.edge_pythons
def test_named_without_lines(record, numba_python):
    """Without --jit-lines or --native: the leaf JIT function is named (a
    Numba name demangled with its signature), kind "jit", and holds the
    samples taken in it and in the libm code it calls, under the Python
    line that called it."""
    res = run(record, numba_python, "hotline.py", "3")
    rep = res.report()
    rows = jit_funcs(rep, "__main__.kernel(")
    assert rows, [f["name"] for f in rep["functions"][:20]]
    kernel = rows[0]
    assert kernel["name"] == "__main__.kernel(float64[::1], int64)"
    assert kernel["module"] == "[jit]"
    caller = marker_line("hotline.py", "CALLER")
    under_caller = sum(l["total"] for l in rep["lines"]
                       if l["kind"] == "python" and l["line"] == caller and l["file"].endswith("hotline.py"))
    assert under_caller > 1000, under_caller
    # The kernel runs ~3 s of CPU; its samples are its own (libm's folded in).
    assert kernel["self"] >= 0.9 * under_caller, (kernel, under_caller)
    # Its caller in the stack is the Python line that called it.
    stacks = collapsed(res)
    in_kernel = [(s, n) for s, n in stacks if s[-1].startswith("__main__.kernel(")]
    good = sum(n for s, n in in_kernel if len(s) > 1 and "hotline.py:%d)" % caller in s[-2])
    assert good >= 0.95 * sum(n for _, n in in_kernel)


@pytest.mark.edge_pythons
def test_jit_lines(record, numba_python):
    """--jit-lines: the HOT line holds >= 80% of the kernel's JIT samples,
    and the lines are reported with kind "jit" in the @njit source file."""
    res = run(record, numba_python, "hotline.py", "3", opts=["--jit-lines"])
    rep = res.report()
    kernel = jit_funcs(rep, "__main__.kernel(")[0]
    assert kernel["file"].endswith("jit/hotline.py")
    src = (JIT / "hotline.py").read_text().splitlines()
    assert kernel["line"] == src.index("def kernel(a, reps):") + 1  # its def line
    lines = [l for l in rep["lines"] if l["function"] == kernel["name"]]
    assert all(l["kind"] == "jit" for l in lines)
    total = sum(l["self"] for l in lines)
    hot = sum(l["self"] for l in lines if l["line"] == marker_line("hotline.py", "HOT"))
    assert total > 1000, total
    assert hot >= 0.80 * total, (hot, total, lines)
    # annotate shows the JIT line with its samples.
    a = strata("annotate", str(res.path), str(JIT / "hotline.py"))
    assert a.returncode == 0, a.stderr
    hot_rows = [l for l in a.stdout.splitlines() if "# HOT" in l]
    assert hot_rows and "%" in hot_rows[0].split("# HOT")[0].split("t =")[0], a.stdout
    # --asm: the HOT line's machine code follows it, instructions with
    # their samples, which add up to about the line's own.
    a = strata("annotate", "--asm", str(res.path), str(JIT / "hotline.py"))
    assert a.returncode == 0, a.stderr
    out = a.stdout.splitlines()
    i = next(k for k, l in enumerate(out) if "# HOT" in l)
    insns = []
    for l in out[i + 1:]:
        if ":  " not in l or "0x" not in l.split(":  ")[0]:
            break
        insns.append(l)
    assert len(insns) >= 5, out[i:i + 10]
    counted = sum(int(l.split()[1]) for l in insns if l.split()[0].endswith("%"))
    assert counted >= 0.9 * hot, (counted, hot, insns)
    assert any(" call " in l or "mulsd" in l for l in insns), insns
    # The heat map marks the HOT line as JIT-compiled, and it is the
    # file's costliest.
    from test_diff import read_heatmap
    heat = Path(str(res.path) + ".heat")
    a = strata("annotate", str(res.path), "-f", "html", "-o", heat)
    assert a.returncode == 0, a.stderr
    index, files = read_heatmap(heat)
    k = next(i for i, f in enumerate(index["files"]) if f[0].endswith("jit/hotline.py"))
    top = max(files[k]["lines"], key=lambda l: l[1])
    assert top[0] == marker_line("hotline.py", "HOT") and top[5] == 1, top


@pytest.mark.edge_pythons
def test_nested_native(record, numba_python):
    """--native --jit-lines: caller line -> outer (CALL line) -> inner (WORK
    line), unwound through the JIT code's own .eh_frame."""
    res = run(record, numba_python, "nested.py", "3", opts=["--native", "--jit-lines"])
    caller, call, work = (marker_line("nested.py", m) for m in ("CALLER", "CALL", "WORK"))
    stacks = collapsed(res)
    in_inner = [(s, n) for s, n in stacks if any(f.startswith("__main__.inner(") for f in s)]
    total = sum(n for _, n in in_inner)
    assert total > 1000, total

    def chained(s):
        i = next(k for k, f in enumerate(s) if f.startswith("__main__.inner("))
        outer = [k for k, f in enumerate(s[:i]) if f.startswith("__main__.outer(") and "nested.py:%d)" % call in f]
        if not outer or outer[-1] != i - 1:
            return False
        return any("nested.py:%d)" % caller in f and f.startswith("main ") for f in s[:outer[-1]])

    good = sum(n for s, n in in_inner if chained(s))
    assert good >= 0.9 * total, [s for s, n in in_inner if not chained(s)][:3]
    at_work = sum(n for s, n in in_inner
                  if any(f.startswith("__main__.inner(") and "nested.py:%d)" % work in f for f in s))
    assert at_work >= 0.6 * total, (at_work, total)


def cut_short(res):
    n = res.report()["native"]
    return (n["failed"] + n["truncated"]) / n["samples"], n


@pytest.mark.edge_pythons
def test_native_without_jit_lines(record, numba_python):
    """--native alone (no debug information, so Numba's functions have no
    CFI): the helper derives their unwind rules from their machine code,
    and stacks go through them: at most 5% cut short (60-87% before), the
    chain caller line -> outer -> inner -> libm whole."""
    res = run(record, numba_python, "nested.py", "3", opts=["--native"])
    share, n = cut_short(res)
    assert share <= 0.05, n
    caller = marker_line("nested.py", "CALLER")
    stacks = collapsed(res)
    in_inner = [(s, c) for s, c in stacks if any(f.startswith("__main__.inner(") for f in s)]
    total = sum(c for _, c in in_inner)
    assert total > 1000, total

    def chained(s):
        i = next(k for k, f in enumerate(s) if f.startswith("__main__.inner("))
        outer = [k for k, f in enumerate(s[:i]) if f.startswith("__main__.outer(") and "[cpython wrapper]" not in f]
        return (outer and outer[-1] == i - 1 and
                any("nested.py:%d)" % caller in f and f.startswith("main ") for f in s[:outer[-1]]))

    good = sum(c for s, c in in_inner if chained(s))
    assert good >= 0.9 * total, [s for s, c in in_inner if not chained(s)][:3]
    # What inner() calls (libm's sin, exp, cos) is under it.
    libm = sum(c for s, c in in_inner if not s[-1].startswith("__main__.inner("))
    assert libm > 0.2 * total, (libm, total)
    res = run(record, numba_python, "hotline.py", "2", opts=["--native"])
    share, n = cut_short(res)
    assert share <= 0.05, n


@pytest.mark.edge_pythons
def test_late_compile(record, numba_python):
    """A function first compiled halfway through the run is named."""
    res = run(record, numba_python, "late.py", "3")
    rep = res.report()
    rows = jit_funcs(rep, "__main__.main.<locals>.late_kernel(")
    assert rows, [f["name"] for f in rep["functions"][:20]]
    caller = marker_line("late.py", "CALLER")
    under_caller = sum(l["total"] for l in rep["lines"]
                       if l["kind"] == "python" and l["line"] == caller and l["file"].endswith("late.py"))
    # ~1.5 s of CPU in the kernel, after ~1.5 s of Python and the import
    # and compile (longer with newer Numba): all of it named.
    assert under_caller > 800, under_caller
    assert rows[0]["self"] >= 0.9 * under_caller, (rows[0], under_caller)


@pytest.mark.edge_pythons
def test_prange_workers(record, numba_python):
    """parallel=True: the worker threads are profiled and their samples
    land on the prange loop's BODY line of the @njit source."""
    res = run(record, numba_python, "prange.py", "3", opts=["--jit-lines"])
    rep = res.report()
    workers = [t for t in rep["threads"] if not t["main"] and t["samples"] > 200]
    assert workers, rep["threads"]
    body = marker_line("prange.py", "BODY")
    for t in workers:
        trep = res.report("--tid", str(t["tid"]))
        jit = [l for l in trep["lines"] if l["kind"] == "jit"]
        on_body = sum(l["self"] for l in jit if l["line"] == body and l["file"].endswith("jit/prange.py"))
        assert on_body >= 0.7 * t["samples"], (t, jit[:5])


@pytest.mark.edge_pythons
def test_cache_true(record, numba_python, tmp_path):
    """cache=True: the second run loads the compiled code from Numba's
    cache instead of compiling it; it is registered all the same, named,
    and its lines are there."""
    prog = tmp_path / "cached.py"
    prog.write_text((JIT / "hotline.py").read_text().replace("@njit", "@njit(cache=True)"))
    hot = marker_line("hotline.py", "HOT")
    for run_no in (1, 2):
        interp, exe = numba_python
        res = record(interp, prog, "1.5", opts=["--jit-lines"], exe=str(exe), cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        rep = res.report()
        kernel = jit_funcs(rep, "__main__.kernel(")[0]
        lines = [l for l in rep["lines"] if l["function"] == kernel["name"]]
        on_hot = sum(l["self"] for l in lines if l["line"] == hot)
        assert on_hot >= 0.8 * sum(l["self"] for l in lines), (run_no, lines)
    assert list(tmp_path.glob("__pycache__/cached.kernel-*.nbi")), "Numba did not cache"


def test_discovery_register_unregister(record, debian_python, tmp_path):
    """Images registered and unregistered at any time through the GDB JIT
    interface (a stand-in JIT driven from Python) are recorded in order:
    three images, the first unloaded in between."""
    need_tool("gcc", "Debian package gcc; scripts/deps.sh")
    lib = tmp_path / "libfake_llvm_jit.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-o", lib, JIT / "fakejit.c"], check=True)
    image = Path(__file__).parent.parent / "unit" / "fixtures" / "numba_kernel.jit.o"
    res = record(debian_python, "jit/fakejit.py", lib, image)
    assert res.returncode == 0, res.stderr
    d = strata("dump", res.path)
    assert d.returncode == 0, d.stderr
    events = re.findall(r"jit-(image|unload) #(\d+)", d.stdout)
    assert events == [("image", "1"), ("unload", "1"), ("image", "2"), ("image", "3")], events
    size = image.stat().st_size
    assert len(re.findall(r"jit-image #\d+ 0x7fd7610d9000-0x7fd7610d93e8 .* image=%d bytes" % size, d.stdout)) == 3
