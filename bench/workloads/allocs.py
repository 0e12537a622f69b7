"""Allocation-heavy pure Python: every iteration makes dicts, lists,
tuples, strings, floats and instances, keeps some and drops most; the
worst case for allocation hooks relative to useful work."""
import sys


class Point:
    def __init__(self, x, y):
        self.x = x
        self.y = y


def step(i, keep):
    d = {"i": i, "s": str(i), "f": i * 0.5}
    l = [i, i + 1, (i, "x" * (i % 50))]
    p = Point(i, [i] * 4)
    if i % 64 == 0:
        keep.append((d, l, p))
    return len(d) + len(l)


def main(n):
    keep = []
    total = 0
    for i in range(n):
        total += step(i, keep)
        if len(keep) > 20000:
            keep.clear()
    print(total)


if __name__ == "__main__":
    main(int(sys.argv[1]) * 100_000 if len(sys.argv) > 1 else 2_000_000)
