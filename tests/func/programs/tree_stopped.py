"""Forks while the helper serving its tree is stopped (SIGSTOP: a
debugger, a stopped process group), as a worker pool's parent may. The
child cannot join the stopped helper: it must go on, under a helper of
its own, after a bounded wait. Prints "child S" (seconds from fork()
until the child's first line), "pid P" (the child's), "helpers N" (how
many helpers hold the child's memory while it runs), then the helper is
let go and "done".

    tree_stopped.py
"""
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tree_pool import helpers_of  # noqa: E402


def burn(secs):
    end = time.process_time() + secs
    while time.process_time() < end:
        pass


burn(0.2)
mine = helpers_of(os.getpid())
if len(mine) != 1:
    print("no helper found:", mine, flush=True)
    sys.exit(3)
helper = mine.pop()
r, w = os.pipe()
os.kill(helper, signal.SIGSTOP)
try:
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.write(w, b"%.2f\n" % (time.monotonic() - t0))
        burn(0.3)
        os.write(w, b"%d\n" % len(helpers_of(os.getpid())))
        os._exit(0)
    os.close(w)
    f = os.fdopen(r)
    print("child", f.readline().strip(), flush=True)
    print("pid", pid, flush=True)
    print("helpers", f.readline().strip(), flush=True)
finally:
    os.kill(helper, signal.SIGCONT)
os.waitpid(pid, 0)
burn(0.2)
print("done", flush=True)
