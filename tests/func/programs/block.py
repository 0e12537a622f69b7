"""strata.profile() around one part of a program.

before() runs first, then inside() within `with strata.profile(OUT)`, then
after(): only inside() (and the thread it runs alongside) may appear in
OUT. A thread started before the block (`early`) and one started inside it
(`late`) burn CPU during the block, so both must be seen, by name.

usage: block.py OUT [SECONDS]
"""
import sys
import threading
import time

import strata


def burn(seconds):
    end = time.process_time() + seconds
    s = 0
    while time.process_time() < end:
        for i in range(10_000):
            s += i * i
    return s


def before(seconds):
    return burn(seconds)


def inside(seconds):
    return burn(seconds)


def after(seconds):
    return burn(seconds)


def early_worker(go, stop):
    go.wait()
    while not stop.is_set():
        burn(0.05)


def late_worker(seconds):
    # Its own CPU time, not the process's: with three threads taking turns
    # at the GIL, a share of process time can be a few dozen samples.
    end = time.thread_time() + seconds
    s = 0
    while time.thread_time() < end:
        for i in range(10_000):
            s += i * i
    return s


def main(out, seconds):
    go, stop = threading.Event(), threading.Event()
    early = threading.Thread(target=early_worker, args=(go, stop), name="early")
    early.start()
    before(seconds / 2)
    with strata.profile(out):
        go.set()
        late = threading.Thread(target=late_worker, args=(seconds / 2,), name="late")
        late.start()
        inside(seconds)
        late.join()
        stop.set()
        early.join()
    after(seconds / 2)


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 1.0)
