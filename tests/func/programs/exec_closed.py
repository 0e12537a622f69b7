"""Children started the way subprocess starts them before Python 3.10
(and after, with preexec_fn): fork, close every descriptor above 2, exec.
Each child must run as it would without a profiler; prints how many of
them died and of what."""
import os
import signal
import subprocess
import sys

N = int(sys.argv[1]) if len(sys.argv) > 1 else 20


def by_hand():
    pid = os.fork()
    if pid == 0:
        try:
            os.closerange(3, 1 << 16)
            os.execv(sys.executable, [sys.executable, "-c", "pass"])
        finally:
            os._exit(127)
    _, st = os.waitpid(pid, 0)
    return st


def by_subprocess():
    # preexec_fn keeps subprocess off vfork (3.10+): fork, close, exec.
    rc = subprocess.call([sys.executable, "-c", "pass"], preexec_fn=lambda: None)
    return rc << 8 if rc >= 0 else -rc


deaths = {}
for i in range(N):
    for how in (by_hand, by_subprocess):
        st = how()
        if st:
            why = signal.Signals(os.WTERMSIG(st)).name if os.WIFSIGNALED(st) else "exit %d" % os.WEXITSTATUS(st)
            deaths[why] = deaths.get(why, 0) + 1
print("children:", 2 * N, "died:", sorted(deaths.items()), flush=True)
