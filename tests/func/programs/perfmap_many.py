"""Many tiny "JITs" in a row: each round copies machine code into a new
anonymous executable page, names it strata_code_K in /tmp/perf-PID.map,
and at once runs it for a few milliseconds. Code is announced, run and
sampled within one writer pass again and again, so a sample can reach
the agent's rings after the pass read the map: the profile must name it
anyway (no [unknown] leaf). x86-64 only.

    perfmap_many.py ROUNDS
"""
import ctypes
import mmap
import os
import sys

# rdi = n: 1: dec rdi; jnz 1b; ret
CODE = bytes([0x48, 0xff, 0xcf, 0x75, 0xfb, 0xc3])


def main(rounds):
    path = "/tmp/perf-%d.map" % os.getpid()
    keep = []
    try:
        for k in range(rounds):
            buf = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
            buf.write(CODE)
            addr = ctypes.addressof(ctypes.c_char.from_buffer(buf))
            with open(path, "a") as f:
                f.write("%x %x strata_code_%d\n" % (addr, len(CODE), k))
            fn = ctypes.CFUNCTYPE(ctypes.c_uint64, ctypes.c_uint64)(addr)
            fn(3000000)
            keep.append((buf, fn))
    finally:
        os.unlink(path)


if __name__ == "__main__":
    main(int(sys.argv[1]))
