"""fork, exec, subprocess and multiprocessing; prints what happened."""
import multiprocessing as mp
import os
import subprocess
import sys
import time


def square(x):
    s = 0
    for i in range(20000):
        s += i
    return x * x


def alone():
    """Waits until this process has no thread but this one: a pool's
    threads are joined when its `with` block ends, but each goes on for a
    moment in the C library after that, and CPython 3.12+ counts the
    process's threads (/proc/self/stat) to decide its fork() warning. So
    does this program, without strata as with it; threads that never end
    (the agent's, if it had any) would still make the warning appear."""
    end = time.monotonic() + 10
    while len(os.listdir("/proc/self/task")) > 1 and time.monotonic() < end:
        time.sleep(0.01)


def main():
    pid = os.fork()
    if pid == 0:
        s = sum(i * i for i in range(200000))
        os._exit(3)
    _, status = os.waitpid(pid, 0)
    print("fork child exit:", os.waitstatus_to_exitcode(status) if hasattr(os, "waitstatus_to_exitcode") else status >> 8)

    out = subprocess.run([sys.executable, "-c", "print('subprocess ok')"], capture_output=True, text=True)
    print(out.stdout.strip(), out.returncode)
    out = subprocess.run(["/bin/echo", "echo ok"], capture_output=True, text=True)
    print(out.stdout.strip())
    out = subprocess.run("echo shell ok; exit 4", shell=True, capture_output=True, text=True)
    print(out.stdout.strip(), out.returncode)

    for method in ("fork", "spawn", "forkserver"):
        ctx = mp.get_context(method)
        with ctx.Pool(2) as pool:
            print(method, sum(pool.map(square, range(50))))

    r, w = os.pipe()
    alone()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.dup2(w, 1)
        os.execv(sys.executable, [sys.executable, "-c", "print('exec ok')"])
    os.close(w)
    print(os.read(r, 100).decode().strip())
    os.waitpid(pid, 0)


if __name__ == "__main__":
    main()
    sys.stdout.flush()
    os.execv(sys.executable, [sys.executable, "-c", "import sys; print('final exec'); sys.exit(5)"])
