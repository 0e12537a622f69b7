"""Opens /dev/null until EMFILE, after starting and joining THREADS
threads (each one registers with the agent), then burns CPU in burn().
Prints how many files it could open (the count must not change under
strata: the agent keeps no descriptor of the program's).

    limits_fds.py THREADS CPU_SECONDS
"""
import os
import sys
import threading
import time


def burn(n):
    s = 0
    for i in range(n):
        s += i
    return s


def work(secs):
    t = time.process_time()
    while time.process_time() - t < secs:
        burn(10000)


def main():
    threads = [threading.Thread(target=work, args=(0.02,)) for _ in range(int(sys.argv[1]))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    fds = []
    try:
        while True:
            fds.append(os.open("/dev/null", os.O_RDONLY))
    except OSError:
        pass
    print("opened", len(fds), flush=True)
    for fd in fds:
        os.close(fd)
    work(float(sys.argv[2]))


if __name__ == "__main__":
    main()
