"""N threads alive at once, each burning CPU_SECONDS (a barrier holds them
until all have started): more threads than a low RLIMIT_NOFILE leaves
descriptors for their perf events in the agent's helper.

    limits_threads.py N CPU_SECONDS
"""
import sys
import threading
import time


def burn(n):
    s = 0
    for i in range(n):
        s += i
    return s


def main():
    n, secs = int(sys.argv[1]), float(sys.argv[2])
    bar = threading.Barrier(n)

    def work():
        bar.wait()
        t = time.thread_time()
        while time.thread_time() - t < secs:
            burn(1000)

    threads = [threading.Thread(target=work) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


if __name__ == "__main__":
    main()
