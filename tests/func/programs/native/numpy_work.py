"""--native: NumPy's C code under the calling Python line."""
import sys
import time

import numpy as np

SECONDS = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0
rng = np.random.default_rng(1)
a = rng.random(2_000_000)


def sorting():
    end = time.process_time() + SECONDS
    while time.process_time() < end:
        np.sort(a)  # SORT


def fft():
    end = time.process_time() + SECONDS
    while time.process_time() < end:
        np.fft.fft(a[:1 << 20])  # FFT


sorting()
fft()
