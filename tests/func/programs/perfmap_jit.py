"""A tiny "JIT": machine code copied into an anonymous executable mapping,
announced in /tmp/perf-PID.map the way JITs do, and called from Python
(spin() runs it for nearly all of the run). Known answer: the profiler
names the code `strata_test_spin` from the perf map. x86-64 only."""
import ctypes
import mmap
import os
import sys
import time

# rdi = n: 1: dec rdi; jnz 1b; ret
CODE = bytes([0x48, 0xff, 0xcf, 0x75, 0xfb, 0xc3])


def make():
    buf = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    buf.write(CODE)
    addr = ctypes.addressof(ctypes.c_char.from_buffer(buf))
    with open("/tmp/perf-%d.map" % os.getpid(), "a") as f:
        f.write("%x %x strata_test_spin\n" % (addr, len(CODE)))
    fn = ctypes.CFUNCTYPE(ctypes.c_uint64, ctypes.c_uint64)(addr)
    return buf, fn


def spin(fn, seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        fn(20000000)  # SPIN


if __name__ == "__main__":
    buf, fn = make()
    try:
        spin(fn, float(sys.argv[1]) if len(sys.argv) > 1 else 1.0)
    finally:
        os.unlink("/tmp/perf-%d.map" % os.getpid())
