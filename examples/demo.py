"""strata's demo: one program that spends its time in three layers.

  word_stats()        pure Python: dict and string work, line by line
  spectrum()          NumPy: FFTs and a sort, running in NumPy's C code
  simulate()          Numba: a JIT-compiled loop whose line marked HOT does
                      most of the arithmetic

`make demo` records it and prints the report: each part shows up under its
own Python function and line. About 4 seconds of CPU time.
"""
import math
import random
import sys

import numpy as np
from numba import njit


def word_stats(n_lines):
    rng = random.Random(1)
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]
    counts = {}
    for _ in range(n_lines):
        line = " ".join(rng.choice(words) for _ in range(12))
        for w in line.split():
            counts[w] = counts.get(w, 0) + 1
    return counts


def spectrum(n, rounds):
    rng = np.random.default_rng(1)
    total = 0.0
    for _ in range(rounds):
        x = rng.standard_normal(n)
        f = np.fft.fft(x)
        s = np.sort(np.abs(f))
        total += float(s[-1])
    return total


@njit(cache=False)
def simulate(steps, dt):
    x, v = 1.0, 0.0
    energy = 0.0
    for i in range(steps):
        a = -math.sin(x) * math.exp(-0.001 * v * v) + 0.1 * math.cos(i * dt)  # HOT
        v += a * dt
        x += v * dt
        energy += 0.5 * v * v
    return energy


def main(scale=1.0):
    word_stats(int(60_000 * scale))
    spectrum(1 << 18, int(16 * scale))
    simulate(1000, 0.01)  # compile
    simulate(int(20_000_000 * scale), 0.001)


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 1.0)
