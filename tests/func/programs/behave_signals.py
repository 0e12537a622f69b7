"""Uses signals the way real programs do; prints what it observed.

The output must be identical with and without the profiler: handlers run,
interval timers fire, SIGPROF set by the program itself reaches the
program's handler, and a blocking C-level call is not cut short.
"""
import ctypes
import os
import signal
import sys
import threading
import time

got = {"alrm": 0, "usr1": 0, "prof": 0}


def on_alrm(sig, frame):
    got["alrm"] += 1


def on_usr1(sig, frame):
    got["usr1"] += 1


def on_prof(sig, frame):
    got["prof"] += 1


signal.signal(signal.SIGALRM, on_alrm)
signal.signal(signal.SIGUSR1, on_usr1)
old = signal.signal(signal.SIGPROF, on_prof)
print("SIGPROF default before:", old == signal.SIG_DFL)
print("getsignal returns ours:", signal.getsignal(signal.SIGPROF) is on_prof)

# A real interval timer, every 10 ms, for 0.3 s of wall time or until its
# handler has run 6 times (at most 10 s): on a loaded machine the process
# may not run for most of 0.3 s, and the signals that came meanwhile are
# one (make check's sid stage once saw that without strata).
signal.setitimer(signal.ITIMER_REAL, 0.01, 0.01)
start = time.time()
while time.time() < start + 0.3 or (got["alrm"] <= 5 and time.time() < start + 10):
    sum(range(1000))
signal.setitimer(signal.ITIMER_REAL, 0)
print("alarm handler ran:", got["alrm"] > 5)

# The program's own CPU-time profiling timer (as another profiler would use).
signal.setitimer(signal.ITIMER_PROF, 0.01, 0.01)
end = time.process_time() + 0.3
wall_end = time.time() + 10
while time.process_time() < end or (got["prof"] <= 5 and time.time() < wall_end):
    sum(range(1000))
signal.setitimer(signal.ITIMER_PROF, 0)
print("program's SIGPROF handler ran:", got["prof"] > 5)

os.kill(os.getpid(), signal.SIGUSR1)
time.sleep(0.01)
print("usr1:", got["usr1"])

# The blocking calls below run with SIGPROF back at its default: a program
# that keeps its own SIGPROF handler can see an EINTR from strata's samples
# in nanosleep, select and the like (README, "Limits").
signal.signal(signal.SIGPROF, signal.SIG_DFL)

# Blocking libc calls made from C must complete, not fail with EINTR.
libc = ctypes.CDLL(None, use_errno=True)
r, w = os.pipe()


def later():
    time.sleep(0.3)
    os.write(w, b"x")


t = threading.Thread(target=later)
t.start()
buf = ctypes.create_string_buffer(1)
n = libc.read(r, buf, 1)
print("libc read:", n, ctypes.get_errno() if n < 0 else "ok")
t.join()

class timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


req = timespec(0, 300_000_000)
rc = libc.nanosleep(ctypes.byref(req), None)
print("libc nanosleep:", rc, ctypes.get_errno() if rc else "ok")

# A C-level busy loop interrupted by nothing but our samples must still
# see no EINTR from a following select() with a timeout.
import select
start = time.time()
select.select([], [], [], 0.2)
print("select slept:", time.time() - start >= 0.19)
sys.exit(7)
