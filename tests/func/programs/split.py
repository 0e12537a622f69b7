"""Two functions whose CPU time is 3:1 (heavy does three times light's work).

Each does its own loop, so the split shows in self time as well as total.
Runs for about SECONDS (argv[1], default 2) of CPU time (or STOP_FILE: below).
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
    h = l = 0.0
    while time.process_time() < end and not stop_requested():
        t0 = time.thread_time()
        heavy()
        t1 = time.thread_time()
        light()
        h, l = h + t1 - t0, l + time.thread_time() - t1
    if CPU_OUT:
        with open(CPU_OUT, "w") as f:
            f.write("heavy=%.6f light=%.6f\n" % (h, l))


# Until the file named by $STOP_FILE exists, if it is set: an attach test
# that has what it needs ends the program early, as it would have ended,
# rather than burn a CPU for nothing. (Kept below main: the tests know the
# lines of heavy, light and main.)
import os  # noqa: E402

STOP_FILE = os.environ.get("STOP_FILE")
# With $SPLIT_CPU_OUT set, the CPU time each function took, as the
# thread's clock measured it, is written there at the end: the 3:1 work
# is 3.0-3.3:1 in CPU time, and more on a loaded machine.
CPU_OUT = os.environ.get("SPLIT_CPU_OUT")


def stop_requested():
    return bool(STOP_FILE) and os.path.exists(STOP_FILE)


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 2.0)
