"""A thread that waits for a CPU as long as it runs (wall mode's known
answer, test_idle.py): this process and two busy shell loops are pinned
to one CPU, so the kernel gives each about a third of it, and burn() runs
for SECONDS by the wall clock with about a third of that on the CPU. It prints
both times: wall mode counts the wall time (a thread that waits for a CPU
is not idle, and its stack is where it waits), cpu mode the CPU time.

usage: cpu_wait.py SECONDS
"""
import os
import subprocess
import sys
import time


def burn(seconds):
    end = time.perf_counter() + seconds
    s = 0
    while time.perf_counter() < end:
        for i in range(1000):
            s += i * i
    return s


def main(seconds):
    cpu = min(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})
    hogs = [subprocess.Popen(["sh", "-c", "while :; do :; done"], preexec_fn=lambda: os.sched_setaffinity(0, {cpu}))
            for _ in range(2)]
    try:
        time.sleep(0.05)
        c, w = time.thread_time(), time.perf_counter()
        burn(seconds)
        w = time.perf_counter() - w
        c = time.thread_time() - c
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    print("burned wall=%.6f cpu=%.6f" % (w, c))


if __name__ == "__main__":
    main(float(sys.argv[1]))
