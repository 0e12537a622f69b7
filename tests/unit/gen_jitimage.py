"""Saves the in-memory ELF image that Numba's LLVM registers through the GDB
JIT interface (__jit_debug_descriptor) for kern() below, as the agent sees
it: relocatable object, section headers holding run-time addresses.

    NUMBA_DEBUGINFO=1 python3 tests/unit/gen_jitimage.py tests/unit/fixtures/numba-kern-debuginfo.o
    python3 tests/unit/gen_jitimage.py tests/unit/fixtures/numba-kern.o

test_jitdump.c reads them: function names, the line table of kern()
(lines 19-23 of this file), the jitdump written from them.
Made with Debian's python3-numba 0.56.4 / llvmlite 0.39.1 (LLVM 14).
"""
import ctypes
import sys

from numba import njit


@njit
def kern(n):  # line 19: the def
    s = 0.0
    for i in range(n):
        s += (i % 7) * 0.5
    return s  # line 23


class Entry(ctypes.Structure):
    pass


Entry._fields_ = [("next", ctypes.POINTER(Entry)), ("prev", ctypes.POINTER(Entry)),
                  ("addr", ctypes.c_void_p), ("size", ctypes.c_uint64)]


class Desc(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("action", ctypes.c_uint32),
                ("relevant", ctypes.POINTER(Entry)), ("first", ctypes.POINTER(Entry))]


def main(out):
    kern(10)
    # LLVM's own descriptor, in llvmlite's shared library.
    from llvmlite.binding import ffi
    d = Desc.in_dll(ctypes.CDLL(ffi.lib._name), "__jit_debug_descriptor")
    e, image = d.first, None
    while e:
        data = ctypes.string_at(e.contents.addr, e.contents.size)
        if b"4kern" in data:
            image = data
        e = e.contents.next
    if image is None:
        sys.exit("no JIT image for kern() registered")
    with open(out, "wb") as f:
        f.write(image)


if __name__ == "__main__":
    main(sys.argv[1])
