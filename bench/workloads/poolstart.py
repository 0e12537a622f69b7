"""A fork pool's start: times from Pool(N) until each of its N workers has
answered a task, and prints it in ms (bench/poolstart.py).

    poolstart.py N
"""
import multiprocessing as mp, os, sys, time
def ready(_):
    return os.getpid()
if __name__ == "__main__":
    mp.set_start_method("fork")
    n = int(sys.argv[1])
    t0 = time.monotonic()
    with mp.Pool(n) as p:
        pids = set()
        while len(pids) < n:
            pids.update(p.map(ready, range(4 * n), chunksize=1))
        t1 = time.monotonic()
    print("%.1f" % ((t1 - t0) * 1000))
