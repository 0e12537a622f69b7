"""Becomes a daemon with python-daemon's DaemonContext (two forks, a new
session, every descriptor closed, the standard ones on /dev/null), after
burning CPU in before(); the daemon burns three times as long in
in_daemon(). OUT.pid holds the daemon's pid while it runs, renamed to
OUT.done at its end.

    limits_daemon.py OUT [WALL_SECONDS_FIRST]
"""
import os
import sys
import time

import daemon


def burn(n):
    s = 0
    for i in range(n):
        s += i
    return s


def spin(secs):
    t = time.process_time()
    while time.process_time() - t < secs:
        burn(10000)


def before():
    spin(0.3)


def in_daemon():
    spin(0.9)


def main():
    out = os.path.abspath(sys.argv[1])
    if len(sys.argv) > 2:
        # Time for an attach (wall clock: the attach is what we wait for).
        t = time.time()
        while time.time() - t < float(sys.argv[2]):
            burn(10000)
    before()
    # detach_process: python-daemon would not fork when it guesses it was
    # started by init or a super-server (standard input a socket).
    with daemon.DaemonContext(working_directory="/", detach_process=True):
        with open(out + ".pid", "w") as f:
            f.write(str(os.getpid()))
        in_daemon()
        os.rename(out + ".pid", out + ".done")


if __name__ == "__main__":
    main()
