"""The program handles SIGPROF itself (an ITIMER_PROF profiler of its own,
as CPython's test_signal.test_itimer_prof leaves it) and waits in
signal.pause() for an interval timer's SIGALRM, N times (argv[1], default
100), computing for 10 ms before each. Each pause() must end by its
SIGALRM, never early (a profiler's own signal landing in it); prints how
many did. Without strata: 0 early.
"""
import signal
import sys
import time

N = int(sys.argv[1]) if len(sys.argv) > 1 else 100
alarms = profs = alarmed = 0


def on_alarm(signum, frame):
    global alarms
    alarms += 1


def on_prof(signum, frame):
    global profs
    profs += 1


signal.signal(signal.SIGALRM, on_alarm)
signal.signal(signal.SIGPROF, on_prof)
early = 0
for i in range(N):
    before = alarms
    # Some work first, so a sampler sees this thread running just before
    # it blocks.
    t = time.process_time()
    while time.process_time() - t < 0.01:
        pass
    # Repeating every 0.5 s: a SIGALRM that comes before pause() (this
    # thread preempted for 5 ms on a loaded machine, with or without a
    # profiler) leaves the next one to end it, not a wait forever.
    signal.setitimer(signal.ITIMER_REAL, 0.005, 0.5)
    signal.pause()
    if alarms == before:
        early += 1
        signal.pause()  # the SIGALRM still comes: wait for it
    signal.setitimer(signal.ITIMER_REAL, 0)
    alarmed += alarms > before
print("pauses:", N, "early:", early, "alarmed:", alarmed, "profs:", profs)
