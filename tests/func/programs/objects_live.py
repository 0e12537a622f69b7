"""A steady allocator for strata top --objects (test_top_objects.py).

    objects_live.py SECONDS

For SECONDS, three() makes three times the dicts one() makes (batches of
1000, each dropped after the next is made), and keep() makes Point
instances and keeps the last 50 000. At the end it prints how many dicts
it made: what the live view's estimate is checked against.
"""
import sys
import time


class Point:
    def __init__(self, i):
        self.i = i


KEPT = []


def one():
    return [dict(k=i) for i in range(1000)]


def three():
    return [dict(k=i) for i in range(3000)]


def keep():
    KEPT.extend(Point(i) for i in range(500))
    del KEPT[:-50_000]


def main(seconds):
    end = time.monotonic() + seconds
    made = 0
    while time.monotonic() < end:
        a = three()
        b = one()
        keep()
        made += len(a) + len(b)
        del a, b
    print("made %d dicts" % made)


if __name__ == "__main__":
    main(float(sys.argv[1]))
