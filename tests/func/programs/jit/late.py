# Known answer: late_kernel() is first compiled halfway through the run,
# after a second of pure Python; then it does the work.
import math
import sys
import time

import numpy as np


def python_phase(seconds):
    t0 = time.process_time()
    x = 0
    while time.process_time() - t0 < seconds:
        x += sum(i * i for i in range(1000))
    return x


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 2.0
    python_phase(seconds / 2)
    from numba import njit  # nothing JIT-compiled before this point

    @njit
    def late_kernel(a):
        s = 0.0
        for i in range(a.shape[0]):
            s += math.sin(a[i]) * math.exp(-a[i])
        return s

    a = np.linspace(0.0, 1.0, 100000)
    late_kernel(a[:10])  # compiled here, halfway through the run
    t0 = time.process_time()
    while time.process_time() - t0 < seconds / 2:
        late_kernel(a)  # CALLER
    print("done")


main()
