"""strata_py_build_check, the per-version module's answer to "can you read
this interpreter?" (docs/versions.md, free-threaded builds): yes for the
build it was made for, no with one line for another minor version and for
a free-threaded build (simulated by setting the flag the interpreter
publishes in _PyRuntime.debug_offsets, since no free-threaded CPython is
installed here). 3.13+, where the interpreter publishes that flag."""
import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import AGENT_DIR, PROGRAMS, strata

PROBE = r"""
import ctypes, sys
so, mode = sys.argv[1], sys.argv[2]
base = ctypes.addressof(ctypes.c_char.in_dll(ctypes.pythonapi, "_PyRuntime"))
# _Py_DebugOffsets, the first member of _PyRuntimeState: cookie[8], version, free_threaded.
assert ctypes.string_at(base, 8) == b"xdebugpy", ctypes.string_at(base, 8)
flag = ctypes.c_uint64.from_address(base + 16)
lib = ctypes.CDLL(so)
buf = ctypes.create_string_buffer(512)
old = flag.value
if mode == "ft":
    flag.value = 1
rc = lib.strata_py_build_check(buf, len(buf))
flag.value = old
print(rc)
print(buf.value.decode())
"""


def check(python, so, mode="plain"):
    r = subprocess.run([str(python.exe), "-c", PROBE, str(so), mode], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    rc, _, why = r.stdout.partition("\n")
    return int(rc), why.strip()


@pytest.fixture
def module(python):
    if python.minor < (3, 13):
        pytest.skip("Python %s publishes no build flags (_PyRuntime.debug_offsets is 3.13+)" % python.version)
    return AGENT_DIR / ("strata-py-%s.so" % python.version)


def test_own_build_accepted(python, module):
    assert check(python, module) == (0, "")


def test_free_threaded_refused(python, module):
    rc, why = check(python, module, "ft")
    assert rc == -1
    assert why == ("Python %s is a free-threaded build (Py_GIL_DISABLED), which strata does not support; "
                   "this process is not profiled" % python.version), why


def test_other_minor_refused(python, module):
    others = [p for p in AGENT_DIR.glob("strata-py-3.*.so")
              if tuple(int(x) for x in p.name[len("strata-py-"):-3].split(".")[:2]) >= (3, 13)
              and not p.name.startswith("strata-py-%d.%d." % python.minor)]
    if not others:
        pytest.skip("no module for another minor version 3.13+ built here")
    rc, why = check(python, others[0])
    built_for = others[0].name[len("strata-py-"):-3]
    assert rc == -1
    assert why == ("the agent module for Python %s was loaded into Python %s; this process is not profiled"
                   % (built_for, python.version)), why


# ---- the compiled offsets against the interpreter's own table ---------------

# Where _Py_DebugOffsets keeps thread_state.current_frame (and, four fields
# before it, thread_state.size): the head (cookie, version, free_threaded),
# runtime_state (3 fields), interpreter_state (13 fields on 3.13, 16 on
# 3.14 and 3.15; see the interpreters' pycore_runtime.h /
# pycore_debug_offsets.h), then thread_state's size, prev, next, interp.
def current_frame_at(minor):
    interp_fields = 13 if minor == (3, 13) else 16
    return 8 * (3 + 3 + interp_fields + 4)


LOCATE = r"""
import ctypes
addr = ctypes.addressof(ctypes.c_char.in_dll(ctypes.pythonapi, "_PyRuntime"))
for line in open("/proc/self/maps"):
    parts = line.split()
    lo, hi = (int(x, 16) for x in parts[0].split("-"))
    if lo <= addr < hi and len(parts) >= 6:
        print(parts[5], addr - lo + int(parts[2], 16))
        break
"""


@pytest.fixture
def skewed(python, tmp_path):
    """An interpreter like `python` in all but one entry of its
    _Py_DebugOffsets: a copy of the ELF file that holds _PyRuntime (its
    libpython, or the executable itself when libpython is linked in) with
    thread_state.current_frame moved 8 bytes on. The interpreter itself never
    reads its table (it is for tools outside), so the copy runs as the
    original does, and looks to strata exactly like a patch release whose
    thread state changed. Returns (command prefix, env, exe, offsets)."""
    if python.minor < (3, 13):
        pytest.skip("Python %s publishes no offsets (_PyRuntime.debug_offsets is 3.13+)" % python.version)
    r = subprocess.run([str(python.exe), "-c", LOCATE], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout, r.stderr
    path, off = r.stdout.split()
    path, off = Path(path), int(off)
    data = bytearray(path.read_bytes())
    assert data[off:off + 8] == b"xdebugpy", "no _Py_DebugOffsets at %s+%#x" % (path, off)
    at = off + current_frame_at(python.minor)
    size = int.from_bytes(data[at - 32:at - 24], "little")
    have = int.from_bytes(data[at:at + 8], "little")
    assert 0 < have < size, "thread_state.current_frame (%d) not inside thread_state.size (%d)" % (have, size)
    data[at:at + 8] = (have + 8).to_bytes(8, "little")
    env = dict(os.environ)
    copy = tmp_path / path.name
    copy.write_bytes(bytes(data))
    exe = Path(os.path.realpath(python.exe))
    if path.resolve() == exe:
        copy.chmod(0o755)
        exe = copy
        # Where the original finds its standard library.
        home = subprocess.run([str(python.exe), "-c", "import sys; print(sys.prefix)"],
                              capture_output=True, text=True).stdout.strip()
        env["PYTHONHOME"] = home
    else:
        # Its libpython: the loader takes the copy from LD_LIBRARY_PATH
        # (pyenv's executables carry a RUNPATH, which it overrides).
        env["LD_LIBRARY_PATH"] = str(tmp_path)
    return exe, env, have, have + 8


def test_skewed_interpreter_runs(python, skewed):
    exe, env, _, _ = skewed
    r = subprocess.run([str(exe), "-c", "import sys; print(sys.version_info[:2])"], capture_output=True,
                       text=True, env=env)
    assert r.returncode == 0 and r.stdout.strip() == str(python.minor), r.stderr


def test_layout_mismatch_refused(python, skewed, tmp_path):
    """The module's compiled thread_state.current_frame differs from the
    interpreter's: the process is not profiled, with one line that names
    the version, the field, both offsets and the command that builds a
    matching module, and `strata record` says nothing was profiled."""
    exe, env, compiled, published = skewed
    out = tmp_path / "skew.strata"
    r = strata("record", "-o", out, "--", exe, PROGRAMS / "split.py", env=env)
    line = ("strata: Python %s does not lay out its structures as the agent module for Python %s reads "
            "them: thread_state.current_frame is %d in the interpreter, %d in the module; this process is "
            "not profiled. Build a module for this interpreter with: make PYTHONS=%s"
            % (python.version, python.version, published, compiled, os.path.realpath(exe)))
    assert line in r.stderr.splitlines(), r.stderr
    assert r.returncode != 0
    assert "nothing was profiled: the agent module cannot read Python %s" % python.version in r.stderr, r.stderr
    assert "no agent build" not in r.stderr, r.stderr
    rep = strata("report", out)
    assert "which its agent module cannot read" in rep.stderr, rep.stderr


def test_layout_mismatch_reader_refused(python, skewed):
    """The reader (the helper's, and `strata stack`'s) checks the target's
    own table through its memory: a skewed target is refused the same way."""
    exe, env, compiled, published = skewed
    reader = AGENT_DIR / ("strata-pyreader-%s.so" % python.version)
    probe = r"""
import ctypes, os, sys
lib = ctypes.CDLL(sys.argv[1])
READ = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t)
@READ
def read(ctx, dst, src, n):
    ctypes.memmove(dst, src, n)
    return 0
class Syms(ctypes.Structure):
    _fields_ = [(f, ctypes.c_uint64) for f in ("runtime", "code", "frame", "unicode", "bytes")]
class Remote(ctypes.Structure):
    _fields_ = [("read", READ), ("ctx", ctypes.c_void_p), ("syms", Syms)]
rt = ctypes.addressof(ctypes.c_char.in_dll(ctypes.pythonapi, "_PyRuntime"))
r = Remote(read, None, Syms(rt, 0, 0, 0, 0))
lib.strata_pyreader_init.restype = ctypes.c_void_p
api = lib.strata_pyreader_init(ctypes.byref(r))
# struct strata_pyreader: int api_version; const char *built_for; int
# linetable_fmt; then 6 entries, the last one check.
CHECK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t)
check = CHECK(ctypes.c_void_p.from_address(api + 24 + 5 * 8).value)
buf = ctypes.create_string_buffer(1024)
print(check(b"/the/python", buf, len(buf)))
print(buf.value.decode())
"""
    good = subprocess.run([str(python.exe), "-c", probe, str(reader)], capture_output=True, text=True)
    assert good.returncode == 0, good.stderr
    assert good.stdout.splitlines()[0] == "0", good.stdout
    bad = subprocess.run([str(exe), "-c", probe, str(reader)], capture_output=True, text=True, env=env)
    assert bad.returncode == 0, bad.stderr
    rc, why = bad.stdout.splitlines()[:2]
    assert rc == "-1"
    assert ("thread_state.current_frame is %d in the interpreter, %d in the module" % (published, compiled)
            in why), why
    assert why.endswith("make PYTHONS=/the/python"), why


# ---- before 3.13: a module of another patch release, checked on a live frame --

def agent_dir_with(tmp_path, module_version, as_version):
    """An agent directory whose only module is the one built for
    module_version, named as if built for as_version."""
    d = tmp_path / "agent"
    d.mkdir()
    for name in ("libstrata-agent.so", "strata-agentd"):
        (d / name).symlink_to(AGENT_DIR / name)
    for kind in ("py", "pyreader"):
        (d / ("strata-%s-%s.so" % (kind, as_version))).symlink_to(AGENT_DIR / ("strata-%s-%s.so" % (kind, module_version)))
    return d


def other_patch(version):
    """A patch release of the same minor version that is not `version`."""
    major, minor, micro = version.split(".")
    return "%s.%s.%d" % (major, minor, int(micro) + 100)


@pytest.mark.parametrize("malloc", ["", "debug"])
def test_other_patch_checked_and_accepted(python, tmp_path, malloc):
    """Only a module built for another patch release: it is loaded, checked
    on the first live frame, and the profile is as usual. With the debug
    allocator hooks too: the check's audit hook, added before the
    interpreter starts, must not abort the program at its exit."""
    if python.minor >= (3, 13):
        pytest.skip("3.13+ is checked against _Py_DebugOffsets (above)")
    d = agent_dir_with(tmp_path, python.version, other_patch(python.version))
    env = dict(os.environ, STRATA_AGENT_DIR=str(d))
    if malloc:
        env["PYTHONMALLOC"] = malloc
    out = tmp_path / "ok.strata"
    r = strata("record", "-o", out, "--", python.exe, PROGRAMS / "split.py", env=env)
    assert r.returncode == 0, r.stderr
    assert "not profiled" not in r.stderr, r.stderr
    rep = json.loads(strata("report", "--json", out).stdout)
    names = {f["name"] for f in rep["functions"]}
    assert {"heavy", "light"} <= names, names


def test_other_layout_refused_on_live_frame(python, tmp_path):
    """A module whose layout is not the interpreter's (3.12's module,
    named as a 3.11 patch release, in a 3.11 interpreter) is refused at
    the first live frame, with one line, and nothing it read is written."""
    if python.minor != (3, 11):
        pytest.skip("needs a 3.11 interpreter and a 3.12 module")
    mods = sorted(AGENT_DIR.glob("strata-py-3.12.*.so"))
    if not mods:
        pytest.skip("no module for 3.12 built here")
    v12 = mods[0].name[len("strata-py-"):-3]
    d = agent_dir_with(tmp_path, v12, other_patch(python.version))
    env = dict(os.environ, STRATA_AGENT_DIR=str(d))
    out = tmp_path / "bad.strata"
    r = strata("record", "-o", out, "--", python.exe, PROGRAMS / "split.py", env=env)
    lines = [l for l in r.stderr.splitlines() if "does not read Python" in l]
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("strata: the agent module for Python %s does not read Python %s right: "
                               % (v12, python.version)), lines[0]
    assert lines[0].endswith("this process is not profiled. Build a module for this interpreter with: "
                             "make PYTHONS=%s" % os.path.realpath(python.exe)), lines[0]
    assert r.returncode != 0 and "nothing was profiled: the agent module cannot read" in r.stderr, r.stderr
