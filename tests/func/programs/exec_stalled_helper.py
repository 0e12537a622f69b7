"""Execs a program that has no SIGPROF handler while strata's helper for
this process cannot answer: the helper is stopped (SIGSTOP) just before
the exec, so the agent's wait for it to finish the stream (5 s) runs out
before the exec is made. The new image computes for a moment, prints
"done" and continues the helper (SIGCONT), which then finishes. Without
strata, or with a helper that left no live event behind, it exits 0; an
event still signalling the thread kills it with SIGPROF (exit status 155
from a shell: "Profiling timer expired"). Prints "helper PID" first (None: no helper found, which a test
must treat as a failure).
"""
import os
import select
import signal
import time

me = os.getpid()
helper = None
for pid in os.listdir("/proc"):
    if not pid.isdigit():
        continue
    try:
        argv = open("/proc/%s/cmdline" % pid, "rb").read().split(b"\0")
    except OSError:
        continue
    # strata-agentd PID ADDR LEN: the helper of process PID.
    if argv[0].endswith(b"strata-agentd") and len(argv) > 1 and argv[1] == str(me).encode():
        helper = int(pid)
print("helper", helper, flush=True)
t = time.process_time()
while time.process_time() - t < 0.3:
    pass
# The new image continues the helper when it is done. Should it be
# killed first (the bug), a guard continues it when the new image is gone
# (or after 15 s at most), so no stopped helper is left behind: the guard
# waits for the end of a pipe the new image holds, and the run is not
# kept waiting for the guard. The guard is forked before the stop: a fork
# child takes the region's lock, which a stopped helper may hold, and it
# says it is past that before the helper is stopped.
cont = "kill -CONT %d" % helper if helper else ":"
if helper:
    r, w = os.pipe()
    gone_r, gone_w = os.pipe()
    if os.fork() == 0:
        os.close(r)
        os.close(gone_w)
        os.write(w, b"x")
        select.select([gone_r], [], [], 15)
        try:
            os.kill(helper, signal.SIGCONT)
        except OSError:
            pass
        os._exit(0)
    os.close(w)
    os.close(gone_r)
    os.set_inheritable(gone_w, True)
    os.read(r, 1)
    os.kill(helper, signal.SIGSTOP)
os.execv("/bin/sh", ["sh", "-c", "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; echo done; " + cont])
