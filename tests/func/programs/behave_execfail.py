"""An exec that fails: the program carries on (a new stream, PROC_CONTINUED)
and its threads, the one that tried included, are sampled again at once;
the descriptors it sees are its own."""
import os
import sys
import threading
import time


# CPython before 3.9 ends threads with pthread_exit, whose first call
# loads libgcc_s: a descriptor of the program's own for a moment, in a
# thread that join() already let go. Loaded now, it cannot cross a listing.
try:
    import ctypes
    ctypes.CDLL("libgcc_s.so.1")
except OSError:
    pass


def burn(seconds):
    # CPU time of this thread, not a count of iterations: on a loaded
    # machine a fixed count can end before a sampler that was just started
    # (wall mode's, in the new helper) gets its first turn.
    end = time.thread_time() + seconds
    s = 0
    while time.thread_time() < end:
        for i in range(1000):
            s += i
    return s


def before():
    return burn(0.15)


# After the failed exec, wall mode samples from the new helper, which has
# to start first: under make check's load its first turn once came after
# 0.15 s of after_main()'s CPU time.
def after_main():
    return burn(0.3)


def after_thread():
    return burn(0.3)


before()
try:
    os.execv("/nonexistent/program", ["program"])
except OSError as e:
    print("exec failed:", e.errno == 2, flush=True)
after_main()
t = threading.Thread(target=after_thread)
t.start()
t.join()
print("fds:", sorted(int(x) for x in os.listdir("/proc/self/fd")), flush=True)
sys.exit(0)
