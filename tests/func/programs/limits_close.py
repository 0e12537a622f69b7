"""Burns CPU in before(), then does what daemons do to descriptors, then
burns three times as long in after(): the profile must go on to the end.

    limits_close.py closerange        os.closerange(3, RLIMIT_NOFILE)
    limits_close.py closerange-execfail
                                      the same, then an exec that fails
                                      (a path that does not exist), as a
                                      daemon's launcher does when its
                                      program is missing
    limits_close.py dup2              a pipe's read end dup2'd over every
                                      descriptor above 2 that is a perf event
                                      (strata's -e events), data written into
                                      the pipe first: it must all still be
                                      there at the end (never read by strata)
"""
import os
import resource
import sys
import time


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


def after():
    spin(0.9)


def main():
    how = sys.argv[1]
    before()
    if how.startswith("closerange"):
        os.closerange(3, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
        if how == "closerange-execfail":
            try:
                os.execv("/nonexistent/strata-test-program", ["strata-test-program"])
            except OSError as e:
                print("exec failed:", e.strerror, flush=True)
        after()
        return
    r, w = os.pipe()
    payload = b"x" * 4096
    os.write(w, payload)
    hits = 0
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            link = os.readlink("/proc/self/fd/%d" % fd)
        except OSError:
            continue
        if fd > 2 and fd not in (r, w) and link == "anon_inode:[perf_event]":
            os.dup2(r, fd)
            hits += 1
    after()
    os.set_blocking(r, False)
    got = os.read(r, 65536)
    print("replaced", hits, "kept", len(got), "of", len(payload), flush=True)


if __name__ == "__main__":
    main()
