"""Known answer for --mode wall: nap() sleeps SECONDS (argv[1]) in all and
burn() uses as much CPU time, alternating in five rounds. Wall mode samples
nap() (marked idle) at the wall-clock rate; cpu mode would not."""
import sys
import time


def nap(seconds):
    time.sleep(seconds)


def burn(seconds):
    end = time.process_time() + seconds
    s = 0
    while time.process_time() < end:
        for i in range(10_000):
            s += i
    return s


def main(seconds):
    for _ in range(5):
        nap(seconds / 5)
        burn(seconds / 5)


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 1.0)
