"""Known allocation answers for strata record --objects (test_objects.py).

    objects.py dicts    three() creates three times as many dicts as one()
    objects.py keep     keep() keeps every bytes object it makes (~60 MB);
                        churn() makes as many and drops each at once
    objects.py classes  instances of a nested user class, Outer.Inner
    objects.py threads  four threads allocate at once
    objects.py tracemalloc  one() as usual, then three() while the program
                        hooks the allocator itself (tracemalloc, on top of
                        strata's hooks), then one() again after it stops
    objects.py fork     one() in the parent, three() in a forked child

Each prints "done" at the end: the program's output must be unchanged.
"""
import sys
import threading

KEPT = []


def one(n):
    for _ in range(n):
        batch = [dict(k=i) for i in range(1000)]
        del batch


def three(n):
    for _ in range(3 * n):
        batch = [dict(k=i) for i in range(1000)]
        del batch


def keep(n):
    for i in range(n):
        KEPT.append(bytes(1000))


def churn(n):
    for i in range(n):
        x = bytes(1000)
        del x


class Outer:
    class Inner:
        def __init__(self, i):
            self.i = i


def classes(n):
    return [Outer.Inner(i) for i in range(n)]


def worker(n, out):
    out.append(len([[i] * 4 for i in range(n)]))


def main(what):
    if what == "dicts":
        for _ in range(20):
            three(20)
            one(20)
    elif what == "keep":
        for _ in range(6):
            keep(10_000)
            churn(10_000)
    elif what == "classes":
        KEPT.append(classes(200_000))  # alive at the end
    elif what == "threads":
        out = []
        ts = [threading.Thread(target=worker, args=(300_000, out)) for _ in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert out == [300_000] * 4
    elif what == "tracemalloc":
        import tracemalloc
        for _ in range(10):
            one(10)
        tracemalloc.start()
        for _ in range(10):
            three(10)
        assert tracemalloc.get_traced_memory()[1] > 100_000  # it saw them too
        tracemalloc.stop()
        for _ in range(10):
            one(10)
    elif what == "fork":
        import os
        pid = os.fork()
        if pid == 0:
            for _ in range(10):
                three(10)
            os._exit(0)
        for _ in range(10):
            one(10)
        _, status = os.waitpid(pid, 0)
        assert status == 0, status
    print("done")


if __name__ == "__main__":
    main(sys.argv[1])
