"""Forks children that wait (each blocks reading a pipe) until fork fails
(EAGAIN: the cgroup's pids.max), prints how many it made, then lets them
go and reaps them. Burns CPU in burn() first, so its profile has samples.

    limits_pids.py
"""
import os
import time


def burn(n):
    s = 0
    for i in range(n):
        s += i
    return s


def main():
    t = time.process_time()
    while time.process_time() - t < 0.3:
        burn(10000)
    r, w = os.pipe()
    kids = []
    while len(kids) < 4096:
        try:
            pid = os.fork()
        except OSError:
            break
        if pid == 0:
            os.close(w)
            os.read(r, 1)
            os._exit(0)
        kids.append(pid)
    print("forked", len(kids), flush=True)
    os.close(w)
    for pid in kids:
        os.waitpid(pid, 0)


if __name__ == "__main__":
    main()
