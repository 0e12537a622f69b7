"""The work of diffapp (app.py): three loops of the same kind, each in its
own function and on its own lines, so each one's cost is its own. Each
runs for the CPU time it is given, so a profile's sample counts are the
same on a fast machine and a slow one."""
import time


def grow(seconds):
    s = 0
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        for i in range(2000):
            s += i * i
    return s


def steady(seconds):
    s = 0
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        for i in range(2000):
            s += i * i
    return s


def shrink(seconds):
    s = 0
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        for i in range(2000):
            s += i * i
    return s
