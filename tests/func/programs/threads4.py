"""Four threads: two burn CPU, two sleep. Each has a known name.

Runs for SECONDS (argv[1], default 2), or until the file named by
$STOP_FILE exists (looked for every 0.1 s by the busy threads, 1 s by
the sleeping ones: an attach test that has what it needs ends the
program early, as it would have ended)."""
import os
import sys
import threading
import time

STOP_FILE = os.environ.get("STOP_FILE")


def stopped():
    return STOP_FILE is not None and os.path.exists(STOP_FILE)


def busy(seconds):
    end = time.time() + seconds
    look = time.time() + 0.1
    s = 0
    while time.time() < end:
        for i in range(10_000):
            s += i
        if STOP_FILE and time.time() >= look:
            if stopped():
                break
            look = time.time() + 0.1
    return s


def sleepy(seconds):
    # One wake-up a second: each one waits for the GIL and, on a loaded
    # machine, for a CPU, which wall mode rightly counts as not idle (at 20
    # a second, 18% of a sleeper's samples under make check's load; at 4,
    # 10%).
    end = time.time() + seconds
    while time.time() < end and not stopped():
        time.sleep(max(0.0, min(1.0, end - time.time())))


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
