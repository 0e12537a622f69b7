"""fork, exec, subprocess and multiprocessing; prints what happened."""
import multiprocessing as mp
import os
import subprocess
import sys


def square(x):
    s = 0
    for i in range(20000):
        s += i
    return x * x


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
