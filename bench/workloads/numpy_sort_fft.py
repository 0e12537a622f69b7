"""NumPy workload for the --native overhead: sorts and FFTs of large
arrays, so most samples are in NumPy's C code under two Python lines.
usage: numpy_sort_fft.py ROUNDS"""
import sys

import numpy as np

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 20
rng = np.random.default_rng(1)
a = rng.random(1_000_000)
for _ in range(rounds):
    np.sort(a)
    np.fft.fft(a[:1 << 19])
