"""Raw getppid system calls in a C loop (native/rawsys.c, built by the
test as LIB) while SIGALRM comes every 100 us to a Python handler, which
has no SA_RESTART. Prints how many calls failed: 0 without a profiler,
and it must stay 0 with one. A profiler that takes a `syscall` about to
run for one its signal interrupted, and returns EINTR past it, fails
some; past an rt_sigreturn the same mistake crashes the process.

    rawsys.py LIB BATCHES
"""
import ctypes
import signal
import sys

lib = ctypes.CDLL(sys.argv[1])
lib.rawsys_getppid.restype = ctypes.c_long
lib.rawsys_getppid.argtypes = [ctypes.c_long]
handled = 0


def on_alarm(signum, frame):
    global handled
    handled += 1


signal.signal(signal.SIGALRM, on_alarm)
signal.setitimer(signal.ITIMER_REAL, 1e-4, 1e-4)
failed = 0
for _ in range(int(sys.argv[2])):
    failed += lib.rawsys_getppid(100000)
signal.setitimer(signal.ITIMER_REAL, 0)
print("failed: %d" % failed)
print("handled: %s" % (handled > 0))
