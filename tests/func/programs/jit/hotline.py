# Known answer: in kernel(), the line marked HOT (transcendental math) does
# ~90% of the work, the line marked COLD (one add) little.
import math
import sys
import time

import numpy as np
from numba import njit


@njit
def kernel(a, reps):
    s = 0.0
    for r in range(reps):
        for i in range(a.shape[0]):
            t = math.exp(-a[i]) * math.sin(a[i] + r) * math.log1p(a[i] + 1.0) * math.atan(a[i] * r + 0.5) / math.cosh(a[i] * 0.001 + r * 1e-9)  # HOT
            s += t  # COLD
    return s


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
    a = np.linspace(0.0, 1.0, 10000)
    kernel(a, 1)  # compile before the clock starts
    t0 = time.process_time()
    total = 0.0
    while time.process_time() - t0 < seconds:
        total += kernel(a, 50)  # CALLER
    print(total != 0.0)


main()
