"""The largest anonymous mapping this process can make, in MB (bisection
up to MAX_MB): under RLIMIT_AS it tells how much address space is left
to the program. Mappings are never touched, so it costs no memory. Then
burns CPU in burn() so the profile has samples.

    limits_as.py MAX_MB CPU_SECONDS
"""
import mmap
import sys
import time


def burn(n):
    s = 0
    for i in range(n):
        s += i
    return s


def largest(hi):
    lo = 0
    while hi - lo > 1:
        mid = (lo + hi) // 2
        try:
            m = mmap.mmap(-1, mid << 20)
            m.close()
            lo = mid
        except (OSError, ValueError, OverflowError):
            hi = mid
    return lo


def main():
    print("largest", largest(int(sys.argv[1])), flush=True)
    t = time.process_time()
    while time.process_time() - t < float(sys.argv[2]):
        burn(10000)


if __name__ == "__main__":
    main()
