"""strata_py_build_check, the per-version module's answer to "can you read
this interpreter?" (docs/versions.md, free-threaded builds): yes for the
build it was made for, no with one line for another minor version and for
a free-threaded build (simulated by setting the flag the interpreter
publishes in _PyRuntime.debug_offsets, since no free-threaded CPython is
installed here). 3.13+, where the interpreter publishes that flag."""
import subprocess

import pytest

from conftest import AGENT_DIR

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
