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
burn(3_000_000)
# SIGINT's default action is replaced by Python's KeyboardInterrupt:
# restore it, as a program that wants to die on ^C does.
signal.signal(signal.SIGINT, signal.SIG_DFL)
os.kill(os.getpid(), getattr(signal, "SIG" + sys.argv[1]))
print("not reached")
