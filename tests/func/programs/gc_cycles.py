"""Known answers for the garbage collector's frame ([gc], issue 14).

    gc_cycles.py N [--measure] [--thread] [--finalizers]

cycles() makes reference cycles, which only the cyclic collector frees:
the allocations on its two ALLOC lines set off a collection every few
hundred objects, and those collections take half or more of its time.
nocycles() makes the same objects without a cycle: reference counting
frees them and the collector never runs there.

--measure   prints the share of cycles()'s CPU time spent in collections,
            timed with gc.callbacks (the known answer; not used while
            profiling, so the profiled run is the plain one)
--thread    also runs a thread that hashes a large buffer (hashlib lets
            the GIL go for it) all the while: it runs while the main
            thread collects, and none of its samples is in the collector
--finalizers  the cycles' objects have a __del__ (a Python loop): the
            collector runs it, so Python frames run inside a collection
"""
import gc
import hashlib
import sys
import threading
import time


class Node:
    __slots__ = ("other", "pad")


class Finalized:
    __slots__ = ("other", "pad")

    def __del__(self):
        for _ in range(20):  # FINALIZER
            pass


def cycles(n, cls):
    for i in range(n):
        a = cls(); b = cls()  # ALLOC
        a.other = b; b.other = a
        a.pad = [i]  # ALLOC


def nocycles(n):
    for i in range(n):
        a = Node(); b = Node()  # NOCYCLE
        a.other = b; b.other = None
        a.pad = [i]


def hasher(stop):
    data = b"x" * (1 << 22)
    while not stop.is_set():
        hashlib.sha256(data).digest()  # HASH


def main():
    n = int(sys.argv[1])
    cls = Finalized if "--finalizers" in sys.argv else Node
    spent, start = [0.0], [0.0]
    if "--measure" in sys.argv:
        def timing(phase, info):
            if phase == "start":
                start[0] = time.thread_time()
            else:
                spent[0] += time.thread_time() - start[0]
        gc.callbacks.append(timing)
    stop = threading.Event()
    t = threading.Thread(target=hasher, args=(stop,), name="hasher") if "--thread" in sys.argv else None
    if t:
        t.start()
    t0 = time.thread_time()
    cycles(n, cls)
    t1 = time.thread_time()
    nocycles(n)
    if t:
        stop.set()
        t.join()
    if "--measure" in sys.argv:
        print("gc share %.4f" % (spent[0] / (t1 - t0)))


main()
