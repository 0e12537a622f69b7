"""Numba workload for the JIT overhead: two @njit kernels (transcendental
math in a loop, and a nested call), compiled at start, then run for
ROUNDS rounds; most samples are in JIT code under two Python lines.
usage: numba_kernels.py ROUNDS"""
import math
import sys

import numpy as np
from numba import njit


@njit
def inner(x, r):
    return math.sin(x + r) * math.exp(-x) + math.cos(x * r)


@njit
def kernel(a, reps):
    s = 0.0
    for r in range(reps):
        for i in range(a.shape[0]):
            s += inner(a[i], r) * math.log1p(a[i] + r)
    return s


rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 20
a = np.linspace(0.0, 1.0, 100_000)
total = 0.0
for _ in range(rounds):
    total += kernel(a, 10)
print(total != 0.0)
