"""A pool whose workers each do one task and exit (maxtasksperchild=1),
so TASKS worker processes are forked over the run, POOL at a time (4
unless given; as many as TASKS: all forked at once, a pool's start). Each
worker returns its pid and the pids of the strata-agentd processes that
hold its memory (/proc/PID/mem among their descriptors: the helpers that
serve it). Prints "workers N", then "helpers H1 H2 ..." (every helper
seen by any worker, and the main process's own), and "root H" (the main
process's helper).

    tree_pool.py TASKS [POOL]
"""
import multiprocessing as mp
import os
import sys


def helpers_of(pid):
    want = "/proc/%d/mem" % pid
    found = set()
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                if not f.read().startswith(b"strata-agentd\0"):
                    continue
            fds = os.listdir("/proc/%s/fd" % d)
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink("/proc/%s/fd/%s" % (d, fd)) == want:
                    found.add(int(d))
                    break
            except OSError:
                pass  # closed meanwhile
    return found


def work(i):
    s = 0
    for k in range(200000):
        s += k
    return os.getpid(), sorted(helpers_of(os.getpid()))


def main():
    tasks = int(sys.argv[1])
    pool = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    mp.set_start_method("fork")
    root = helpers_of(os.getpid())
    with mp.Pool(pool, maxtasksperchild=1) as p:
        res = p.map(work, range(tasks), chunksize=1)
    seen = set(root)
    for _, hs in res:
        seen.update(hs)
    print("workers", len({pid for pid, _ in res}))
    print("helpers", *sorted(seen))
    print("root", *sorted(root))
    print("unserved", sum(1 for _, hs in res if not hs))


if __name__ == "__main__":
    main()
