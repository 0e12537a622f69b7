"""fork() from a worker thread, as CPython's test_threading
test_3_join_in_forked_from_thread does: in the child, the forking thread
is the only thread; it starts another, joins it, and returns. A process
ends when its last thread does, so the child must end then (with status
0, having run its atexit work): an agent thread of its own would keep it
alive forever and the parent would wait forever."""
import os
import sys
import threading


def child_work():
    s = sum(i * i for i in range(200000))
    print("child thread done", s > 0, flush=True)


def worker():
    pid = os.fork()
    if pid:
        _, status = os.waitpid(pid, 0)
        print("child exit:", os.waitstatus_to_exitcode(status) if hasattr(os, "waitstatus_to_exitcode")
              else status >> 8, flush=True)
        return
    t = threading.Thread(target=child_work)
    t.start()
    t.join()
    print("child worker returns", flush=True)


if __name__ == "__main__":
    w = threading.Thread(target=worker)
    w.start()
    w.join()
    print("parent done")
    sys.stdout.flush()
