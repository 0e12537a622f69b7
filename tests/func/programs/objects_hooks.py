"""Whose allocator the object domain has, as the program sees it
(test_objects.py: a stopped agent has no hooks in).

    objects_hooks.py STATEFILE SECONDS [EXT_SO]

Allocates in a loop and writes "on" to STATEFILE while PyObject_Malloc is
strata's hook, "off" while it is not, until SECONDS have passed. With
EXT_SO (tests/func/programs/native/ext.c), the extension's malloc must be
strata's too for "on" and libc's for "off"; anything else is written as
"mixed ...".
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
real_malloc = ctypes.cast(libc.malloc, ctypes.c_void_p).value
libc.dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(DlInfo)]
get = ctypes.pythonapi.PyMem_GetAllocator
get.argtypes = [ctypes.c_int, ctypes.POINTER(Alloc)]
get.restype = None


def strata_s(addr):
    d = DlInfo()
    libc.dladdr(addr, ctypes.byref(d))
    return b"libstrata-agent" in (d.fname or b"")


def hooked():
    a = Alloc()
    get(2, ctypes.byref(a))  # PYMEM_DOMAIN_OBJ
    return strata_s(a.malloc)


def load_ext(so):
    import importlib.machinery
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "strata_native_ext", so, loader=importlib.machinery.ExtensionFileLoader("strata_native_ext", so))
    ext = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ext)
    return ext


def state(ext):
    """on, off, or mixed: strata's PyMem hooks, and with ext its GOT
    redirection of the extension's malloc."""
    if ext:
        # Both at once: the ctypes calls of hooked() allocate, and an
        # allocation is where the hooks come out when sampling stops.
        pm, slot = ext.hooks_now()
        py = strata_s(pm)
        got = "strata" if strata_s(slot) else "libc" if slot == real_malloc else "other %#x" % slot
    else:
        py = hooked()
        got = "strata" if py else "libc"
    return "on" if py and got == "strata" else "off" if not py and got == "libc" else \
        "mixed pymem=%s got=%s" % (py, got)


def write_state(path, ext):
    """The state, written whole (the test reads it meanwhile). open()
    raises an audit event, where a `ctl start` puts the hooks back
    (docs/objects.md)."""
    with open(path + ".tmp", "w") as f:
        f.write(state(ext))
    os.replace(path + ".tmp", path)


def main(path, seconds, so=None):
    ext = load_ext(so) if so else None
    end = time.time() + seconds
    while time.time() < end:
        junk = [{"i": i} for i in range(2000)]
        del junk
        write_state(path, ext)
        time.sleep(0.01)
    print("done")


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]), *sys.argv[3:4])
