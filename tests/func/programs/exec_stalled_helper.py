"""Execs a program that has no SIGPROF handler while strata's helper for
this process cannot answer: the helper is stopped (SIGSTOP) just before
the exec, so the agent's wait for it to finish the stream (5 s) runs out,
and a child continues it (SIGCONT) after that. The new image computes for
a moment and prints "done". Without strata, or with a helper that left no
live event behind, it exits 0; an event still signalling the thread kills
it with SIGPROF (exit status 155 from a shell: "Profiling timer
expired"). Prints "helper PID" first (None: no helper found, which a test
must treat as a failure). argv[1]: seconds before SIGCONT (default 6).
"""
import os
import signal
import sys
import time

WAIT = float(sys.argv[1]) if len(sys.argv) > 1 else 6.0
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
if helper:
    os.kill(helper, signal.SIGSTOP)
    if os.fork() == 0:
        time.sleep(WAIT)
        os.kill(helper, signal.SIGCONT)
        os._exit(0)
os.execv("/bin/sh", ["sh", "-c", "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; echo done"])
