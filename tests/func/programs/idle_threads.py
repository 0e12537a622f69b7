"""Why threads wait (tests/func/test_idle.py): threads that each block in
one way for the whole run, beside threads that compete for the GIL.

    idle_threads.py SECONDS

burner-0..2  burn CPU in pure Python: they take turns on the GIL, so most
             of the time each waits for it;
sleeper      time.sleep, once for the whole run;
reader       os.read on a pipe nothing is written to until the end;
selector     select.select on another such pipe;
locker       acquires a lock the main thread holds until the end.
"""
import os
import select
import sys
import threading
import time

seconds = float(sys.argv[1])
stop = time.monotonic() + seconds
r1, w1 = os.pipe()
r2, w2 = os.pipe()
held = threading.Lock()
held.acquire()


def burner():
    x = 0
    while time.monotonic() < stop:
        for i in range(20000):
            x += i * i


def sleeper():
    time.sleep(seconds)


def reader():
    os.read(r1, 1)


def selector():
    select.select([r2], [], [], seconds + 5)


def locker():
    held.acquire()


threads = [threading.Thread(target=burner, name="burner-%d" % i) for i in range(3)]
threads += [threading.Thread(target=f, name=f.__name__) for f in (sleeper, reader, selector, locker)]
for t in threads:
    t.start()
time.sleep(seconds)
os.write(w1, b"x")
os.write(w2, b"x")
held.release()
for t in threads:
    t.join()
