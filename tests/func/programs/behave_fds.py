"""The descriptors a program sees: with threads running, after a fork (in
the parent and the child), and the number the first os.open() returns. A
program that checks its own descriptors (CPython's
test_subprocess test_pass_fds_redirected lists a child's) must find
exactly those it would without strata; so must a Python child it starts
with subprocess."""
import os
import subprocess
import sys
import threading


# CPython before 3.9 ends threads with pthread_exit, whose first call
# loads libgcc_s: a descriptor of the program's own for a moment, in a
# thread that join() already let go. Loaded now, it cannot cross a listing.
try:
    import ctypes
    ctypes.CDLL("libgcc_s.so.1")
except OSError:
    pass


def fds():
    # listdir's own directory descriptor is listed too, in both runs alike.
    return sorted(int(x) for x in os.listdir("/proc/self/fd"))


def burn(n):
    s = 0
    for i in range(n):
        s += i * i
    return s


def main():
    first = os.open(os.devnull, os.O_RDONLY)
    print("first open:", first, flush=True)
    os.close(first)
    print("start:", fds(), flush=True)
    stop = threading.Event()
    seen = []
    lock = threading.Lock()
    started = threading.Barrier(3)

    def worker():
        started.wait()  # every worker runs before any lists
        burn(300000)
        with lock:  # one listing (and its directory descriptor) at a time
            seen.append(fds())
        stop.wait()

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(3)]  # no hang if main fails
    for t in threads:
        t.start()
    burn(500000)
    while len(seen) < len(threads):
        burn(10000)
    print("in threads:", seen[0], all(s == seen[0] for s in seen), flush=True)
    with lock:
        print("with threads:", fds(), flush=True)
    r, w = os.pipe()
    print("pipe:", r, w, flush=True)
    os.close(r)
    os.close(w)
    pid = os.fork()
    if pid == 0:
        burn(200000)
        mine = fds()
        t = threading.Thread(target=lambda: seen.append(fds()))
        t.start()
        t.join()
        print("child:", mine, "child thread:", seen[-1], flush=True)
        fd = os.open(os.devnull, os.O_RDONLY)
        print("child open:", fd, flush=True)
        os._exit(0)
    os.waitpid(pid, 0)
    stop.set()
    for t in threads:
        t.join()
    print("after fork:", fds(), flush=True)
    fd = os.open(os.devnull, os.O_RDONLY)
    print("last open:", fd, flush=True)
    os.close(fd)
    # A Python child (profiled too), started the way subprocess does.
    out = subprocess.run([sys.executable, "-c", "import os; os.open(os.devnull, os.O_RDONLY); "
                          "print(sorted(int(x) for x in os.listdir('/proc/self/fd')))"],
                         stdout=subprocess.PIPE, check=True).stdout.decode()
    print("subprocess:", out.strip(), flush=True)


if __name__ == "__main__":
    main()
    sys.exit(0)
