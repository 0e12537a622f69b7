"""Alternates a little CPU work with C-level calls that a signal handler
always cuts short (nanosleep, clock_nanosleep, select, poll, epoll_wait),
called through ctypes so that no Python retry hides an EINTR. Prints how
many calls failed with EINTR: 0 without a profiler, and must stay 0 with
one. Runs for at least SECONDS and at least 2000 calls, so a loaded
machine makes it longer, never less thorough."""
import ctypes
import select
import sys
import time

libc = ctypes.CDLL(None, use_errno=True)


class timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class timeval(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_usec", ctypes.c_long)]


def spin(n):
    s = 0
    for i in range(n):
        s += i
    return s


ep = select.epoll()
ev = ctypes.create_string_buffer(12 * 4)
req = timespec(0, 200_000)
calls = eintr = 0
end = time.monotonic() + (float(sys.argv[1]) if len(sys.argv) > 1 else 1.5)
while time.monotonic() < end or calls < 2000:
    for call in (lambda: libc.nanosleep(ctypes.byref(req), None),
                 lambda: -1 if libc.clock_nanosleep(1, 0, ctypes.byref(req), None) else 0,
                 lambda: libc.select(0, None, None, None, ctypes.byref(timeval(0, 200))),
                 lambda: libc.poll(None, 0, 1),
                 lambda: libc.epoll_wait(ep.fileno(), ev, 4, 1)):
        spin(300)
        ctypes.set_errno(0)
        if call() < 0 and ctypes.get_errno() in (0, 4):  # clock_nanosleep returns the error
            eintr += 1
        calls += 1
print("calls>=2000:", calls >= 2000)
print("eintr:", eintr)
