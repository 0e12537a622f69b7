"""A thread that sleeps in a loop (each sleep is a context switch, on the
line marked SLEEP) while the main thread computes.

argv[1]: number of sleeps (default 400).
"""
import sys
import threading
import time


def sleeper(n):
    s = 0
    for i in range(n):
        time.sleep(0.002)  # SLEEP
        s += i
    return s


def compute(flag):
    s = 0
    while not flag.is_set():
        for i in range(1000):
            s += i * i
    return s


def main(n):
    done = threading.Event()
    t = threading.Thread(target=lambda: (sleeper(n), done.set()), name="sleeper")
    t.start()
    compute(done)
    t.join()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 400)
