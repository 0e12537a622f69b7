"""NumPy workload for --objects's libc hooks: arithmetic on arrays of
16 KiB, so each operation mallocs its result's data (above NumPy's cache
of small blocks) and frees the one before: the most libc malloc/free
calls per second a NumPy program makes, beside Python's own allocations.
usage: numpy_small.py ROUNDS (x 100 000 operations)"""
import sys

import numpy as np

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
a = np.arange(2048, dtype=np.float64)
b = np.ones(2048)
for _ in range(rounds * 100_000):
    c = a * 2.0 + b
