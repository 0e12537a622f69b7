"""Known answer for `perf report` of a --perf-map run: the @njit function
hot_kernel spends nearly all of the run in line HOT (transcendental math),
called from Python for argv[1] CPU seconds."""
import math
import sys
import time

from numba import njit


@njit(cache=False)
def hot_kernel(n):
    s = 0.0
    for i in range(n):
        s += math.sin(i * 0.001) * math.cos(i * 0.002) + math.sqrt(i + 1.0)  # HOT
    return s


def main(seconds):
    hot_kernel(10)  # compile
    end = time.process_time() + seconds
    total = 0.0
    while time.process_time() < end:
        total += hot_kernel(2000000)
    print(total > 0)


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 2.0)
