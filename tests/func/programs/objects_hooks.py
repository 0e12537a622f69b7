"""Whose allocator the object domain has, as the program sees it
(test_objects.py: a stopped agent has no hooks in).

    objects_hooks.py STATEFILE SECONDS

Allocates in a loop and writes "on" to STATEFILE while PyObject_Malloc is
strata's hook, "off" while it is not, until SECONDS have passed.
"""
import ctypes
import os
import sys
import time


class Alloc(ctypes.Structure):
    _fields_ = [("ctx", ctypes.c_void_p), ("malloc", ctypes.c_void_p), ("calloc", ctypes.c_void_p),
                ("realloc", ctypes.c_void_p), ("free", ctypes.c_void_p)]


class DlInfo(ctypes.Structure):
    _fields_ = [("fname", ctypes.c_char_p), ("fbase", ctypes.c_void_p), ("sname", ctypes.c_char_p),
                ("saddr", ctypes.c_void_p)]


libc = ctypes.CDLL(None)
libc.dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(DlInfo)]
get = ctypes.pythonapi.PyMem_GetAllocator
get.argtypes = [ctypes.c_int, ctypes.POINTER(Alloc)]
get.restype = None


def hooked():
    a = Alloc()
    get(2, ctypes.byref(a))  # PYMEM_DOMAIN_OBJ
    d = DlInfo()
    libc.dladdr(a.malloc, ctypes.byref(d))
    return b"libstrata-agent" in (d.fname or b"")


def main(path, seconds):
    end = time.time() + seconds
    while time.time() < end:
        junk = [{"i": i} for i in range(2000)]
        del junk
        state = "on" if hooked() else "off"
        # open() raises an audit event, where a `ctl start` puts the
        # hooks back (docs/objects.md).
        with open(path + ".tmp", "w") as f:
            f.write(state)
        os.replace(path + ".tmp", path)
        time.sleep(0.01)
    print("done")


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]))
