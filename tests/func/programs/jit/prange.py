# Known answer: par() runs its prange loop on Numba's worker threads; the
# line marked BODY does the work.
import math
import sys
import time

import numpy as np
from numba import njit, prange


@njit(parallel=True)
def par(a, reps):
    out = np.zeros(a.shape[0])
    for i in prange(a.shape[0]):
        v = 0.0
        for r in range(reps):
            v += math.sin(a[i] + r) * math.exp(-a[i]) * math.cos(a[i] * r)  # BODY
        out[i] = v
    return out


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
    a = np.linspace(0.0, 1.0, 20000)
    par(a, 1)
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        par(a, 50)
    print("done")


main()
