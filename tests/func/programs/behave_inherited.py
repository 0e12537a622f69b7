"""Prints the signal dispositions and mask it was started with, as Python
and the kernel see them, in its main thread, in a new thread and in a
child process; then whether _thread.interrupt_main() interrupts it.

Run it with signals ignored or blocked by whatever started it (a shell
without job control ignores SIGINT and SIGQUIT in a background job; a
service manager may block or ignore others): the output must be the same
with and without the profiler.
"""
import _thread
import signal
import subprocess
import sys
import threading
import time

CHILD = ("import signal; print(' '.join(str(int(signal.getsignal(s))) "
         "if isinstance(signal.getsignal(s), int) else 'handler' "
         "for s in (signal.SIGINT, signal.SIGQUIT, signal.SIGHUP, signal.SIGTERM, signal.SIGUSR2)))")


def name_of(s):
    try:
        return signal.Signals(s).name
    except ValueError:  # SIGSTKFLT before 3.11
        return "SIG%d" % s


def dispositions():
    out = []
    for s in sorted(signal.valid_signals()):
        if s in (signal.SIGKILL, signal.SIGSTOP) or s >= signal.SIGRTMIN:
            continue
        h = signal.getsignal(s)
        name = "IGN" if h == signal.SIG_IGN else "DFL" if h == signal.SIG_DFL else \
            "none" if h is None else getattr(h, "__name__", "handler")
        out.append("%s=%s" % (name_of(s), name))
    return " ".join(out)


def blocked():
    return " ".join(sorted(name_of(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])
                           if s < signal.SIGRTMIN))


print("main:", dispositions())
print("main blocked:", blocked())
seen = []
t = threading.Thread(target=lambda: seen.append(blocked()))
t.start()
t.join()
print("thread blocked:", seen[0])
child = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True)
print("child:", child.stdout.strip(), child.returncode)
try:
    _thread.interrupt_main()
    time.sleep(0.2)
    print("interrupt_main: nothing")
except KeyboardInterrupt:
    print("interrupt_main: KeyboardInterrupt")
