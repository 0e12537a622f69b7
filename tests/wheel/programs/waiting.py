"""For strata stack: prints "ready", then waits forever in wait_here()
(blocked in C, on a lock) until killed."""
import threading


def wait_here(ev):
    print("ready", flush=True)
    ev.wait()


def main():
    wait_here(threading.Event())


main()
