"""A process stuck in C holding the GIL, beside a thread asleep in Python.

argv[1]: the directory holding strata_native_ext (tests/func/programs/native/ext.c,
built by the test). Prints "ready" once both threads are where they stay.
"""
import sys
import threading
import time

sys.path.insert(0, sys.argv[1])
import strata_native_ext  # noqa: E402


def sleeper(ev):
    ev.set()
    time.sleep(3600)  # SLEEPER


def spin():
    return strata_native_ext.burn_c(10 ** 15)  # STUCK


def main():
    ev = threading.Event()
    t = threading.Thread(target=sleeper, args=(ev,), name="sleeper-thread", daemon=True)
    t.start()
    ev.wait()
    print("ready", flush=True)
    spin()


if __name__ == "__main__":
    main()
