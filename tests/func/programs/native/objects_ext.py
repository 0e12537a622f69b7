"""--objects --native known answer: a C extension's PyMem_RawMalloc under
its native frame (alloc_c, ext.c's ALLOC line), under the Python line that
called it. usage: objects_ext.py EXT_SO"""
import importlib.machinery
import importlib.util
import sys

spec = importlib.util.spec_from_file_location(
    "strata_native_ext", sys.argv[1], loader=importlib.machinery.ExtensionFileLoader("strata_native_ext", sys.argv[1]))
ext = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ext)


def from_c():
    ext.alloc_c(2000, 65536)  # CALLER


def from_python():
    return [bytes(65536) for _ in range(500)]


from_c()
kept = from_python()
print("done")
