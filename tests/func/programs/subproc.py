"""A parent that starts a Python child with subprocess; the child burns CPU
in child_work(), the parent in parent_work()."""
import subprocess
import sys
import time


def parent_work(seconds):
    end = time.process_time() + seconds
    s = 0
    while time.process_time() < end:
        s += sum(range(1000))


def child_work(seconds):
    end = time.process_time() + seconds
    s = 0
    while time.process_time() < end:
        s += sum(range(1000))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "child":
        child_work(1.0)
        print("child done")
    else:
        parent_work(0.5)
        # An explicit environment without LD_PRELOAD: profiling must follow anyway.
        env = {"PATH": "/usr/bin:/bin", "CHILD_MARK": "1"}
        out = subprocess.run([sys.executable, __file__, "child"], env=env, capture_output=True, text=True)
        print(out.stdout.strip(), out.returncode)
        parent_work(0.5)
