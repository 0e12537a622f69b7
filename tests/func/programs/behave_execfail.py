"""An exec that fails: the program carries on (a new stream, PROC_CONTINUED)
and its threads, the one that tried included, are sampled again at once;
the descriptors it sees are its own."""
import os
import sys
import threading
import time


# CPython before 3.9 ends threads with pthread_exit, whose first call
# loads libgcc_s: a descriptor of the program's own for a moment, in a
# thread that join() already let go. Loaded now, it cannot cross a listing.
try:
    import ctypes
    ctypes.CDLL("libgcc_s.so.1")
except OSError:
    pass


def burn(seconds):
    # CPU time of this thread, not a count of iterations: on a loaded
    # machine a fixed count can end before a sampler that was just started
    # (wall mode's, in the new helper) gets its first turn.
    end = time.thread_time() + seconds
    s = 0
    while time.thread_time() < end:
        for i in range(1000):
            s += i
    return s


def before():
    return burn(0.15)


def uptime():
    with open("/proc/uptime") as f:
        return float(f.read().split()[0])


def helper_up_for(seconds, since):
    """Whether a helper (strata-agentd) of this process, started after
    `since` (seconds of /proc/uptime: the old helper may still be ending
    its stream), has been up for `seconds` and has had a clock tick of CPU
    (up is not running: under make check's load a helper up for 0.1 s
    had not sampled yet once): never without strata."""
    me = str(os.getpid()).encode()
    tick = os.sysconf("SC_CLK_TCK")
    now = uptime()
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                argv = f.read().split(b"\0")
            if argv[0] != b"strata-agentd" or len(argv) < 2 or argv[1] != me:
                continue
            with open("/proc/%s/stat" % d) as f:
                st = f.read().rpartition(")")[2].split()
            start, cpu = int(st[19]) / tick, int(st[11]) + int(st[12])
        except (OSError, IndexError, ValueError):
            continue
        if start >= since and now - start >= seconds and cpu >= 1:
            return True
    return False


# After the failed exec, wall mode samples from the new helper, which has
# to start first: under make check's load its first turn came after 0.15 s
# of after_main()'s CPU time once, after 0.3 s another time
# (docs/agent.md says so). So under strata, after_main() also goes on
# until the new helper has been up 0.1 s and had CPU (at most 5 s more): what is
# tested is that the thread is sampled again, not how soon on a loaded
# machine. The program's output is the same either way.
def after_main(failed_at):
    s = burn(0.3)
    if "libstrata-agent" in os.environ.get("LD_PRELOAD", ""):
        end = time.monotonic() + 5
        while not helper_up_for(0.1, failed_at) and time.monotonic() < end:
            s += burn(0.02)
    return s


def after_thread():
    return burn(0.3)


before()
# A tick of /proc/uptime early: the new helper starts after the exec.
failed_at = uptime() - 0.01
try:
    os.execv("/nonexistent/program", ["program"])
except OSError as e:
    print("exec failed:", e.errno == 2, flush=True)
after_main(failed_at)
t = threading.Thread(target=after_thread)
t.start()
t.join()
print("fds:", sorted(int(x) for x in os.listdir("/proc/self/fd")), flush=True)
sys.exit(0)
