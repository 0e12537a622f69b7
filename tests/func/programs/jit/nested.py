# Known answer: outer() calls inner() (kept out of line) at the line marked
# CALL; inner()'s line marked WORK does the math; main() calls outer() at
# the line marked CALLER.
import math
import sys
import time

import numpy as np
from numba import njit


@njit(no_cpython_wrapper=True)
def inner(x, r):
    # Branches and a loop keep LLVM from inlining it.
    acc = 0.0
    for k in range(4):
        acc += math.sin(x + k) * math.exp(-x * k) + math.cos(x * 0.5 + r)  # WORK
    if acc > 1e300:
        print("never")
    return acc


@njit
def outer(a, reps):
    s = 0.0
    for r in range(reps):
        for i in range(a.shape[0]):
            s += inner(a[i], r)  # CALL
    return s


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
    a = np.linspace(0.0, 1.0, 10000)
    outer(a, 1)
    t0 = time.process_time()
    while time.process_time() - t0 < seconds:
        outer(a, 20)  # CALLER
    print("done")


main()
