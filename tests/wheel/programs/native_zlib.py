"""Known answer for --native: squeeze() spends its time in zlib.compress,
that is in libz (a native library every CPython links), for about SECONDS
(argv[1]) of CPU time."""
import os
import sys
import time
import zlib

DATA = os.urandom(1 << 16) * 4


def squeeze():
    return zlib.compress(DATA, 6)


def main(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        squeeze()


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 1.0)
