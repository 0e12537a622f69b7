"""Page faults in a thread started after profiling began and in a forked
child, each in toucher(): counters must follow both.

argv[1]: seconds of CPU time per toucher (default 0.5).
"""
import mmap
import os
import sys
import threading
import time

CHUNK = 4 << 20


def toucher(budget):
    end = time.thread_time() + budget
    while time.thread_time() < end:
        m = mmap.mmap(-1, CHUNK)
        for off in range(0, CHUNK, mmap.PAGESIZE):
            m[off] = 1
        m.close()


def main(budget):
    time.sleep(0.05)  # the thread starts well after the agent
    t = threading.Thread(target=toucher, args=(budget,), name="late-toucher")
    t.start()
    t.join()
    pid = os.fork()
    if pid == 0:
        toucher(budget)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    sys.exit(os.waitstatus_to_exitcode(status) if hasattr(os, "waitstatus_to_exitcode") else status >> 8)


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 0.5)
