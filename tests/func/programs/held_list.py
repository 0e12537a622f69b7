"""Starts a thread and forks while strata's thread list is held by another
process for HOLD seconds, as a helper stopped (SIGSTOP, a debugger) or
starved while it held the list would: `holdlock` (native/holdlock.c,
path in argv[1]) takes it. A thread's start and a fork child's first
step wait for the list; they must not wait for its holder.

It forks, then starts a thread, while the list is held. Prints "child S"
(the child: seconds from fork() until its first Python line), "thread S"
(seconds Thread.start() and join() took, for 0.3 s of CPU), "fork CODE"
(the child's exit code); then, once the holder let go, a thread named
after-hold computes 0.5 s, and it prints "done".

    held_list.py HOLDLOCK HOLD
"""
import os
import subprocess
import sys
import threading
import time


def burn(secs):
    end = time.process_time() + secs
    while time.process_time() < end:
        pass


holder, hold = sys.argv[1], sys.argv[2]
burn(0.2)
env = {k: v for k, v in os.environ.items() if not k.startswith("STRATA_") and k != "LD_PRELOAD"}
h = subprocess.Popen([holder, str(os.getpid()), hold], stdout=subprocess.PIPE, text=True, env=env)
line = h.stdout.readline().strip()
if line != "held":
    print("holdlock failed:", line, flush=True)
    h.wait()
    sys.exit(3)

t0 = time.monotonic()
pid = os.fork()
if pid == 0:
    print("child %.2f" % (time.monotonic() - t0), flush=True)
    burn(0.2)
    os._exit(7)
t0 = time.monotonic()
th = threading.Thread(target=burn, args=(0.3,), name="during-hold")
th.start()
th.join()
print("thread %.2f" % (time.monotonic() - t0), flush=True)
_, status = os.waitpid(pid, 0)
print("fork %d" % os.WEXITSTATUS(status), flush=True)

burn(0.3)
line = h.stdout.readline().strip()
h.wait()
if line != "released":
    print("holdlock failed:", line, flush=True)
    sys.exit(3)
# The helper drains what the rings held meanwhile.
time.sleep(1)
th = threading.Thread(target=burn, args=(0.5,), name="after-hold")
th.start()
th.join()
print("done", flush=True)
