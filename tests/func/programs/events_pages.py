"""Two functions given the same CPU time: one touches fresh pages (every
touch of a new page is a page fault), the other does arithmetic (no page
faults once warm).

They alternate in phases of PHASE seconds of the thread's CPU time each,
so both get the same CPU time whatever the machine's speed, and the page
faults all happen in toucher(). Runs for about SECONDS (argv[1], default
2) of CPU time.
"""
import mmap
import sys
import time

PHASE = 0.05
PAGE = mmap.PAGESIZE
CHUNK = 4 << 20  # a new anonymous mapping: every page is fresh


def toucher(budget):
    end = time.thread_time() + budget
    while time.thread_time() < end:
        m = mmap.mmap(-1, CHUNK)
        for off in range(0, CHUNK, PAGE):
            m[off] = 1  # FAULT
        m.close()


def arith(budget):
    end = time.thread_time() + budget
    s = 0
    while time.thread_time() < end:
        for i in range(2000):
            s += i * i  # ARITH
    return s


def main(seconds):
    for _ in range(max(1, int(seconds / (2 * PHASE)))):
        toucher(PHASE)
        arith(PHASE)


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 2.0)
