"""A multiprocessing pool: N workers (fork), 4 tasks each, each task a
fixed amount of pure-Python CPU work. Prints the workload's own CPU time
(the parent's and its reaped workers') as JSON on the last line, so a
benchmark can tell it from the profiler's.

    python pool.py N [ITERATIONS_PER_TASK]
"""
import json
import multiprocessing
import resource
import sys


def burn(n):
    s = 0
    for i in range(n):
        s += i * i
    return s


def main():
    n = int(sys.argv[1])
    iters = int(sys.argv[2]) if len(sys.argv) > 2 else 2000000
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(n) as pool:
        pool.map(burn, [iters] * (4 * n), chunksize=1)
        pool.close()
        pool.join()
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
    print(json.dumps({"workers": n, "cpu_s": cpu}))


if __name__ == "__main__":
    main()
