"""Forks twelve children that spin, a few milliseconds apart, kills them
all and ends (a pool torn down as its workers start): when it has ended,
the helpers of the children killed last may still be writing their
streams (the first chunk, or the last), and `strata record` must wait
for them before it reads the profile or returns."""
import os
import random
import signal
import time

kids = []
for i in range(12):
    pid = os.fork()
    if pid == 0:
        s = 0
        while True:
            s += 1
    kids.append(pid)
    time.sleep(random.random() * 0.01)
for pid in kids:
    os.kill(pid, signal.SIGKILL)
for pid in kids:
    os.waitpid(pid, 0)
print("killed", len(kids))
