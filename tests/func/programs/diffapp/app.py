"""diffapp: one program run twice with different amounts of work, for
`strata diff` (tests/func/test_diff.py).

    python app.py GROW STEADY SHRINK ROUNDS

Each round calls the three kernels of work/kernels.py with GROW, STEADY and
SHRINK units of work. The rounds are short and interleave the three, so a
change in the machine's load during a run hits all three alike. The test
runs it as 1 1 2 (base) and 2 1 1 (new): grow's work doubles, steady's
stays, shrink's halves, and the total stays about the same, so shares and
times tell the same story.

With DIFFAPP_TURNS=RFD,WFD in the environment each round waits for a byte
on RFD and passes one on to WFD when done: two runs joined in a ring take
turns round by round, so whatever the machine does meanwhile (other
programs, frequency changes) falls on both alike.

At the end it prints each kernel's CPU time as the thread's clock measured
it ("cpu grow=S steady=S shrink=S"): the answer the profiles' ratios are
checked against, from the same runs.
"""
import os
import sys
import time

from work import kernels

UNIT = 0.010  # CPU seconds per unit of work: several sampling periods

SPENT = {"grow": 0.0, "steady": 0.0, "shrink": 0.0}


def one_round(g, s, c):
    t0 = time.thread_time()
    kernels.grow(g * UNIT)
    t1 = time.thread_time()
    kernels.steady(s * UNIT)
    t2 = time.thread_time()
    kernels.shrink(c * UNIT)
    t3 = time.thread_time()
    SPENT["grow"] += t1 - t0
    SPENT["steady"] += t2 - t1
    SPENT["shrink"] += t3 - t2


def main():
    g, s, c, rounds = (int(a) for a in sys.argv[1:5])
    turns = os.environ.get("DIFFAPP_TURNS")
    rfd, wfd = (int(x) for x in turns.split(",")) if turns else (-1, -1)
    for _ in range(rounds):
        if rfd >= 0 and not os.read(rfd, 1):
            rfd = wfd = -1  # the other run ended: carry on alone
        one_round(g, s, c)
        if wfd >= 0:
            try:
                os.write(wfd, b"t")
            except BrokenPipeError:
                rfd = wfd = -1
    print("cpu " + " ".join("%s=%.6f" % kv for kv in SPENT.items()))


if __name__ == "__main__":
    main()
