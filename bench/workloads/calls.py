"""Call-heavy pure Python: many small function and method calls, the worst
case for a sampling profiler's per-sample cost relative to useful work."""
import sys


class Vec:
    __slots__ = ("x", "y")

    def __init__(self, x, y):
        self.x = x
        self.y = y

    def add(self, o):
        return Vec(self.x + o.x, self.y + o.y)

    def dot(self, o):
        return self.x * o.x + self.y * o.y


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def walk(n):
    acc = Vec(0, 0)
    s = 0
    for i in range(n):
        v = Vec(i, i + 1)
        acc = acc.add(v)
        s += acc.dot(v) % 7
    return s


def main(scale):
    for _ in range(scale):
        fib(24)
        walk(60_000)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10)
