"""A process in one of the states an attach must cope with (issue 21).

usage: attach_states.py SCENARIO DONE [EXTDIR]

Prints "ready" once it is in the state, stays there until the file DONE
exists (stdin: until a line comes), then prints "done" and exits with
status 3. With EXTDIR (where the tests built strata_stale_ext from
native/stale.c), the main thread (and each thread of `threads`) runs
under a C frame whose stack holds stale words into the loader and
malloc, and "stale LD MALLOC" (their counts) comes before "ready".

Scenarios:
  busy       a pure-Python loop
  numpy      a loop of NumPy calls (array arithmetic, a matrix product, a sort)
  sleep      time.sleep, over and over
  stdin      blocked reading stdin
  threads    8 threads: 4 busy, 2 sleeping, 2 waiting on an event; the main thread joins them
  manyext    imported every extension module of the standard library it has (and NumPy's), then busy
  recursion  busy at the bottom of 2000 nested Python calls
"""
import os
import sys
import threading
import time

SCENARIO, DONE = sys.argv[1], sys.argv[2]
EXTDIR = sys.argv[3] if len(sys.argv) > 3 else None

if SCENARIO == "manyext":
    import importlib
    for name in ("_asyncio", "_bisect", "_blake2", "_bz2", "_codecs_cn", "_codecs_hk", "_codecs_iso2022",
                 "_codecs_jp", "_codecs_kr", "_codecs_tw", "_contextvars", "_crypt", "_csv", "_ctypes",
                 "_curses", "_curses_panel", "_datetime", "_dbm", "_decimal", "_elementtree", "_gdbm",
                 "_hashlib", "_heapq", "_json", "_lsprof", "_lzma", "_md5", "_multibytecodec",
                 "_multiprocessing", "_opcode", "_pickle", "_posixshmem", "_posixsubprocess", "_queue",
                 "_random", "_sha1", "_sha256", "_sha3", "_sha512", "_socket", "_sqlite3", "_ssl",
                 "_statistics", "_struct", "_uuid", "_xxsubinterpreters", "_zoneinfo", "array", "audioop",
                 "binascii", "cmath", "fcntl", "grp", "math", "mmap", "nis", "ossaudiodev", "pyexpat",
                 "readline", "resource", "select", "spwd", "syslog", "termios", "unicodedata", "zlib",
                 "numpy", "numpy.linalg", "numpy.fft", "numpy.random"):
        try:
            importlib.import_module(name)
        except Exception:
            pass
elif SCENARIO == "numpy":
    import numpy as np

if EXTDIR:
    sys.path.insert(0, EXTDIR)
    import strata_stale_ext
    under = strata_stale_ext.run
else:
    def under(fn):
        return fn()


def done():
    return os.path.exists(DONE)


def busy():
    n = 0
    while True:
        for _ in range(200):
            n += sum(range(500))
        if done():
            return n


def numpy_loop():
    a = np.linspace(0.0, 1.0, 40000).reshape(200, 200)
    while not done():
        b = a @ a
        c = np.sort(b.ravel())
        a = (a + c.reshape(200, 200) * 1e-9) % 1.0


def sleep():
    while not done():
        time.sleep(0.2)


def ready():
    if EXTDIR:
        print("stale %d %d" % strata_stale_ext.counts(), flush=True)
    print("ready", flush=True)


def main():
    if SCENARIO in ("busy", "manyext"):
        ready()
        busy()
    elif SCENARIO == "numpy":
        ready()
        numpy_loop()
    elif SCENARIO == "sleep":
        ready()
        sleep()
    elif SCENARIO == "stdin":
        ready()
        sys.stdin.readline()
    elif SCENARIO == "recursion":
        sys.setrecursionlimit(2500)
        def rec(n):
            if n:
                return rec(n - 1) + 1
            ready()
            return busy()
        rec(2000)
    elif SCENARIO == "threads":
        ev = threading.Event()
        work = [busy] * 4 + [sleep] * 2 + [lambda: ev.wait()] * 2
        ts = [threading.Thread(target=under, args=(w,), name="w%d" % i) for i, w in enumerate(work)]
        for t in ts:
            t.start()
        ready()
        while not done():
            time.sleep(0.2)
        ev.set()
        for t in ts:
            t.join()
    else:
        raise SystemExit("unknown scenario " + SCENARIO)


SWITCH = sys.getswitchinterval()
under(main)
# strata's PEP 768 loading script shortens the switch interval while it
# runs: the program finds its own again.
if sys.getswitchinterval() != SWITCH:
    print("switch interval %r, was %r" % (sys.getswitchinterval(), SWITCH), file=sys.stderr)
print("done", flush=True)
sys.exit(3)
