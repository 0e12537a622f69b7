"""Four threads: two burn CPU, two sleep. Each has a known name."""
import sys
import threading
import time


def busy(seconds):
    end = time.time() + seconds
    s = 0
    while time.time() < end:
        for i in range(10_000):
            s += i
    return s


def sleepy(seconds):
    end = time.time() + seconds
    while time.time() < end:
        time.sleep(0.05)


def main(seconds):
    ts = [threading.Thread(target=busy, args=(seconds,), name="busy-1"),
          threading.Thread(target=busy, args=(seconds,), name="busy-2"),
          threading.Thread(target=sleepy, args=(seconds,), name="sleepy-1"),
          threading.Thread(target=sleepy, args=(seconds,), name="sleepy-2")]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 2.0)
