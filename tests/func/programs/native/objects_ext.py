"""--objects --native known answers: a C extension's PyMem_RawMalloc and
its libc malloc under their native frames (alloc_c and alloc_libc, ext.c's
ALLOC and LIBC lines), under the Python lines that called them.
usage: objects_ext.py EXT_SO"""
import importlib.machinery
import importlib.util
import sys

spec = importlib.util.spec_from_file_location(
    "strata_native_ext", sys.argv[1], loader=importlib.machinery.ExtensionFileLoader("strata_native_ext", sys.argv[1]))
ext = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ext)


def from_c():
    ext.alloc_c(2000, 65536)  # CALLER


def from_libc():
    ext.alloc_libc(3000, 65536)  # LIBC CALLER


def from_python():
    return [bytes(65536) for _ in range(500)]


from_c()
from_libc()
kept = from_python()
print("done")
