"""A thread that has ended for strata but is still listed by the kernel.

Inside strata.profile(OUT), thread "lingering" burns CPU, then arms
linger.so (LINGER_SO, tests/func/programs/native/linger.c): its exit
sleeps MS milliseconds after strata's thread destructor has run. The main
thread burns meanwhile, so the helper's thread scan runs several times
while the ended thread is still in /proc/PID/task.

usage: linger.py OUT MS
"""
import ctypes
import os
import sys
import threading
import time

import strata


def burn(seconds):
    end = time.thread_time() + seconds
    s = 0
    while time.thread_time() < end:
        for i in range(10_000):
            s += i * i
    return s


def lingering(lib, ms):
    burn(0.3)
    lib.linger_arm(ms)


def main(out, ms):
    lib = ctypes.CDLL(os.environ["LINGER_SO"])
    with strata.profile(out):
        t = threading.Thread(target=lingering, args=(lib, ms), name="lingering")
        t.start()
        t.join()
        # join() returns once the thread's Python state is gone; its exit
        # lingers ms more.
        burn(ms / 1000 + 0.3)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
