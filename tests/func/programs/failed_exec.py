"""Children that run Python after fork and then fail to exec, the way
subprocess does with a preexec_fn and a command searched along PATH: the
child tries one directory after another (one failed exec each) and then
reports the error to the parent and _exits. Prints what happened.

usage: failed_exec.py [ROUNDS]
"""
import os
import subprocess
import sys
import time


def in_child():
    # Samples in the child before its first exec attempt.
    end = time.process_time() + 0.02
    while time.process_time() < end:
        sum(range(1000))


def main(rounds):
    env = dict(os.environ, PATH=os.pathsep.join(["/usr/local/bin", "/usr/bin", "/bin", "/nonexistent"]))
    failed = 0
    for _ in range(rounds):
        try:
            subprocess.Popen(["strata-no-such-command"], preexec_fn=in_child, env=env).wait()
        except OSError:
            failed += 1
    print("failed to start:", failed, "of", rounds)
    r = subprocess.run([sys.executable, "-c", "print('then one that starts')"], preexec_fn=in_child,
                       capture_output=True, text=True)
    print(r.stdout.strip(), r.returncode)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
