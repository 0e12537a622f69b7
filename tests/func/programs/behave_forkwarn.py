"""os.fork() in a program that has no thread of its own: CPython 3.12+
warns about forking a multi-threaded process only if it counts more than
one thread. Under a profiler the output must be the same (no warning)."""
import os
import warnings

warnings.simplefilter("always")  # a DeprecationWarning is shown, not filtered
pid = os.fork()
if pid == 0:
    s = sum(i * i for i in range(100000))
    os._exit(0)
_, status = os.waitpid(pid, 0)
print("forked, child status", status)
