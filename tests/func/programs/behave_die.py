"""Burns CPU, then sends itself a signal whose default action ends the
process: usage behave_die.py TERM|HUP|INT|KILL."""
import os
import signal
import sys


def burn(n):
    s = 0
    for i in range(n):
        s += i * i
    return s


print("burning", flush=True)
burn(8_000_000)
# SIGINT's default action is replaced by Python's KeyboardInterrupt, and a
# signal may come ignored from the parent (nohup ignores SIGHUP): restore
# the default action, as a program that wants to die of it does.
sig = getattr(signal, "SIG" + sys.argv[1])
if sig != signal.SIGKILL:
    signal.signal(sig, signal.SIG_DFL)
os.kill(os.getpid(), sig)
print("not reached")
