"""Known answer for perf trampolines: main -> outer -> middle -> leaf, with
leaf burning (nearly) all the CPU in pure Python, and a C call (sorted with
a Python key) in between so that the stack crosses the eval loop twice.
The merged --native stack must read the same with and without -X perf."""
import sys


def leaf(n):
    s = 0
    for i in range(n):  # LEAF
        s += i * i
    return s


def key(x):
    return leaf(300)  # KEY


def middle():
    return sorted(range(40), key=key)  # SORTED


def outer(seconds):
    import time
    end = time.process_time() + seconds
    while time.process_time() < end:
        middle()  # MIDDLE


if __name__ == "__main__":
    outer(float(sys.argv[1]) if len(sys.argv) > 1 else 1.5)
