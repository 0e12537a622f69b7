"""Two functions whose CPU time is 3:1 (heavy does three times light's work).

Each does its own loop, so the split shows in self time as well as total.
Runs for about SECONDS (argv[1], default 2) of CPU time.
"""
import sys
import time


def heavy():
    s = 0
    for i in range(300_000):
        s += i * i
    return s


def light():
    s = 0
    for i in range(100_000):
        s += i * i
    return s


def main(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        heavy()
        light()


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 2.0)
