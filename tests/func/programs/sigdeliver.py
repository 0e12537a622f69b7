"""A signal sent to the process must reach the thread it reaches without a
profiler, and cut that thread's blocking call short at once (issue 27).

Runs scenarios, each some rounds: the main thread blocks in one call while
other threads run, and a signal comes from one source; its handler raises,
which is how the call ends (the way pytest-timeout and request timeouts
work). Prints one JSON line per scenario: how each round ended, and its
latency from the signal's sending to the call's end.

    sigdeliver.py ROUNDS [alarm=N] [early] [go=PATH] SCENARIO...
    SCENARIO = SOURCE:WAIT:THREADS

early: every handler is installed at the start (else each scenario's,
for its time); go=PATH: the scenarios start once PATH exists (a profiler
attached meanwhile finds the handlers in place).

SOURCE  itimer   SIGALRM from setitimer(ITIMER_REAL), 5-15 ms ahead
        alarm    SIGALRM from alarm(1) (a second a round: ROUNDS/20 rounds,
                 or N with alarm=N)
        usr1     SIGUSR1 from kill(PID) by another process
        int      SIGINT from kill(PID) by another process
        chld     SIGCHLD from a child that ends
WAIT    pause, sleep, select, read (a pipe), event (Event.wait),
        lock (Lock.acquire(timeout=...))
THREADS 0, 1busy, 8busy (pure Python loops), 1sleep, 8sleep (time.sleep
        loops of 1-3 ms)

A round tests the call only if the signal comes once the main thread is
in the call's system call: a signal that comes just before it (after
CPython's last look at its signals, while it hands the GIL over) waits
there for the call to end by itself, with or without a profiler. So the
sender (another process) and the child wait to see the main thread in the
call (/proc/PID/syscall) before they send, and for a timer the sender
looks just before it fires; a round where it was not there is "unsynced"
and tests nothing. A call not cut short ends by itself after LONG seconds
(sleep, select, event, lock; "late") or is rescued by a watchdog (pause,
read; "rescued"), a SIGUSR2 sent to the main thread alone; the sender
looks, a second and a half after the signal, whether the main thread is
still in the call: if it is not, the call was cut short and the thread
only waited to run Python again (the GIL, with busy threads on a loaded
machine): "starved", no failure of the delivery.
"""
import ctypes
import json
import os
import random
import select
import signal
import sys
import threading
import time
import warnings

LONG = 2.0           # a blocking call's own timeout: far past any latency
RESCUE = LONG + 0.5  # the watchdog's
SYS_tgkill = 234     # x86-64
PR_SET_PTRACER, PR_SET_PTRACER_ANY = 0x59616D61, -1

warnings.filterwarnings("ignore", category=DeprecationWarning)  # fork() with threads (3.12+)

# The system call each wait blocks in (x86-64): time.sleep is
# clock_nanosleep from 3.11 on, select (pselect6) before; Event.wait and
# Lock.acquire(timeout) are a futex wait with a timeout (a GIL hand-over
# waits without one).
SYSCALLS = {"pause": {34}, "sleep": {230, 270, 23}, "select": {270, 23}, "read": {0}, "event": {202}, "lock": {202}}


def in_call(pid, kind):
    try:
        with open("/proc/%d/syscall" % pid) as f:
            fields = f.read().split()
    except OSError:
        return False
    if not fields or not fields[0].isdigit() or int(fields[0]) not in SYSCALLS[kind]:
        return False
    return int(fields[0]) != 202 or int(fields[4], 16) != 0


class Fired(Exception):
    pass


class Rescue(Exception):
    pass


waiting = False  # from the round's arming to the call's end
handled = 0


def on_signal(sig, frame):
    global handled
    handled += 1
    if waiting:
        raise Fired()


def on_rescue(sig, frame):
    if waiting:
        raise Rescue()


# ---- the other process: sends kill(PID) once the main thread is in its
# call, looks whether it is in it before a timer fires, and watches every
# round, rescuing the main thread if its call is not cut short.

def wait_in_call(pid, kind, until):
    while time.monotonic() < until:
        if in_call(pid, kind):
            return True
        time.sleep(0.00025)
    return False


def sender_main(cmd_r, res_w, pid):
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    libc = ctypes.CDLL(None, use_errno=True)
    rnd = random.Random(2727)
    buf = b""
    kind = None
    check = rescue = None  # times of the round watched
    stuck = -1
    while True:
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            parts = line.decode().split()
            if parts[0] == "watch":
                kind, rescue, check, stuck = parts[1], float(parts[2]), None, -1
            elif parts[0] == "check":
                check = float(parts[1])
            elif parts[0] == "kill":
                # kill SIG: once the main thread is in its call, and a
                # little later (a random phase of the samples).
                sig = int(parts[1])
                synced = wait_in_call(pid, kind, time.monotonic() + 1.0)
                time.sleep(rnd.uniform(0, 0.004))
                synced = synced and in_call(pid, kind)
                t = time.monotonic()
                os.kill(pid, sig)
                check = t + 1.5
                os.write(res_w, b"%r %d\n" % (t, synced))
            elif parts[0] == "look":
                # look WHEN: is the main thread in its call before WHEN,
                # when its timer fires? Once in it, it stays until the
                # signal: one sight is enough.
                when = float(parts[1])
                left = when - 0.003 - time.monotonic()
                if left > 0:
                    time.sleep(left)
                seen = False
                while not seen and time.monotonic() < when - 0.0003:
                    seen = in_call(pid, kind) and time.monotonic() < when - 0.00005
                    if not seen:
                        time.sleep(0.00025)
                os.write(res_w, b"%d\n" % seen)
            elif parts[0] == "done":
                os.write(res_w, b"%d\n" % stuck)
                check = rescue = None
        now = time.monotonic()
        if check is not None and now >= check:
            # Long after the signal: is the main thread still in its call
            # (the signal did not cut it short), or out of it (it was, and
            # the thread waits to run Python: the GIL, the CPU)?
            stuck = int(in_call(pid, kind))
            check = None
            continue
        if rescue is not None and now >= rescue:
            # The main thread alone gets SIGUSR2.
            libc.syscall(SYS_tgkill, pid, pid, signal.SIGUSR2)
            rescue = None
            continue
        times = [t for t in (check, rescue) if t is not None]
        r, _, _ = select.select([cmd_r], [], [], max(0.0, min(times) - now) if times else None)
        if r:
            chunk = os.read(cmd_r, 4096)
            if not chunk:
                os._exit(0)
            buf += chunk


# ---- threads

stop = False


def busy():
    while not stop:
        sum(range(1000))


def sleeper():
    rnd = random.Random(threading.get_ident())
    while not stop:
        time.sleep(rnd.uniform(0.001, 0.003))


THREADS = ["0", "1sleep", "8sleep", "1busy", "8busy"]


def start_threads(spec):
    if spec == "0":
        return []
    n, kind = int(spec[0]), spec[1:]
    ts = [threading.Thread(target=busy if kind == "busy" else sleeper, daemon=True) for _ in range(n)]
    for t in ts:
        t.start()
    return ts


# ---- one round

def wait_call(kind, pipe_r, ev, lock):
    if kind == "pause":
        signal.pause()
    elif kind == "sleep":
        time.sleep(LONG)
    elif kind == "select":
        select.select([pipe_r], [], [], LONG)
    elif kind == "read":
        os.read(pipe_r, 1)
    elif kind == "event":
        ev.wait(LONG)
    elif kind == "lock":
        lock.acquire(timeout=LONG)
    else:
        raise ValueError(kind)


SIGNALS = {"itimer": signal.SIGALRM, "alarm": signal.SIGALRM, "usr1": signal.SIGUSR1, "int": signal.SIGINT,
           "chld": signal.SIGCHLD}

_lines = {}


def readline(fd):
    buf = _lines.get(fd, b"")
    while b"\n" not in buf:
        buf += os.read(fd, 4096)
    line, _lines[fd] = buf.split(b"\n", 1)
    return line.decode()


def one_round(source, kind, cmd_w, res_r, pipe_r, ev, lock, rnd):
    """Returns (how the call ended: interrupted; late, rescued or returned
    when the signal did not cut it short; starved when it did, but the
    thread waited more than a second to run Python again (the GIL, the
    CPU); unsynced when the signal did not come during the call. Latency
    in seconds; whether the handler ran)."""
    global waiting, handled
    handled = 0
    pid = os.getpid()
    child = child_r = None
    delay = 1.0 if source == "alarm" else rnd.uniform(0.005, 0.015)
    outcome = None
    t_call = t_end = None
    t0 = time.monotonic()
    os.write(cmd_w, b"watch %s %r\n" % (kind.encode(), t0 + delay + RESCUE + (1.0 if source != "itimer" else 0)))
    try:
        waiting = True
        if source in ("itimer", "alarm"):
            # Told first: a write lets go of the GIL, which the main
            # thread may then wait long for with busy threads, and the
            # timer is not to fire meanwhile. The call (from about t0)
            # ends by itself after LONG: look before that.
            sent = time.monotonic() + 0.001 + delay
            os.write(cmd_w, b"look %r\ncheck %r\n" % (sent, min(sent + 1.5, t0 + LONG * 0.9)))
            left = sent - time.monotonic()
            if source == "itimer":
                signal.setitimer(signal.ITIMER_REAL, max(left, 0.0001))
            else:
                signal.alarm(1)
                sent = time.monotonic() + 1.0
        elif source in ("usr1", "int"):
            os.write(cmd_w, b"kill %d\n" % SIGNALS[source])
        elif source == "chld":
            os.write(cmd_w, b"check %r\n" % (t0 + 1.6))
            child_r, child_w = os.pipe()
            child = os.fork()
            if child == 0:
                # Ends once the parent is in its call.
                synced = wait_in_call(pid, kind, time.monotonic() + 1.0)
                time.sleep(rnd.uniform(0, 0.004))
                synced = synced and in_call(pid, kind)
                os.write(child_w, b"%r %d\n" % (time.monotonic(), synced))
                os._exit(0)
            os.close(child_w)
        t_call = time.monotonic()
        wait_call(kind, pipe_r, ev, lock)
        waiting = False
        t_end = time.monotonic()
        outcome = "returned"
    except Fired:
        waiting = False
        t_end = time.monotonic()
        outcome = "interrupted"
        # The handler ran, but only once the call had ended by itself.
        if t_call is not None and t_end - t_call >= LONG * 0.95:
            outcome = "late"
    except Rescue:
        waiting = False
        t_end = time.monotonic()
        outcome = "rescued"
    finally:
        waiting = False
    os.write(cmd_w, b"done\n")
    if source in ("itimer", "alarm"):
        synced = readline(res_r) == "1"
    else:
        fd = res_r if child is None else child_r
        t, s = readline(fd).split()
        sent, synced = float(t), s == "1"
        if child is not None:
            os.close(child_r)
            os.waitpid(child, 0)
    stuck = readline(res_r) == "1"
    if outcome != "interrupted":
        # The signal still comes (or came and ran the handler late): let
        # it, outside the measured call.
        end = time.monotonic() + 0.2
        while not handled and time.monotonic() < end:
            try:
                time.sleep(0.01)
            except Fired:
                pass
    if not synced:
        # Then a rescue too is CPython's own race, with or without us.
        outcome = "unsynced"
    elif outcome in ("late", "rescued", "returned") and not stuck:
        # The signal cut the call short in time; the thread then waited
        # that long to run Python again.
        outcome = "starved"
    return outcome, t_end - sent, handled > 0


def main():
    rounds = int(sys.argv[1])
    args = sys.argv[2:]
    alarm_rounds = max(1, rounds // 20)
    early = False
    go = None
    while args and ":" not in args[0]:
        opt = args.pop(0)
        if opt.startswith("alarm="):
            alarm_rounds = int(opt[6:])
        elif opt == "early":
            early = True
        elif opt.startswith("go="):
            go = opt[3:]
        else:
            raise SystemExit("unknown option " + opt)
    scenarios = [s.split(":") for s in args]
    # The sender reads this process's /proc/PID/syscall (Yama's ptrace
    # scope 1 would refuse a child).
    ctypes.CDLL(None).prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0)
    cmd_r, cmd_w = os.pipe()
    res_r, res_w = os.pipe()
    pid = os.getpid()
    sender = os.fork()
    if sender == 0:
        os.close(cmd_w)
        os.close(res_r)
        sender_main(cmd_r, res_w, pid)
        os._exit(0)
    os.close(cmd_r)
    os.close(res_w)
    signal.signal(signal.SIGUSR2, on_rescue)
    pipe_r, pipe_w = os.pipe()
    rnd = random.Random(27)
    ev = threading.Event()
    lock = threading.Lock()
    lock.acquire()
    if early:
        for sig in set(SIGNALS.values()):
            signal.signal(sig, on_signal)
    print("ready", flush=True)
    if go:
        # Waited for in a thread running Python code: a safe point for an
        # attach to borrow (a blocked thread's stack can keep stale words
        # of the allocator or stdio, which an attach refuses).
        def spin():
            n = 0
            while not os.path.exists(go):
                n += 1
        t = threading.Thread(target=spin)
        t.start()
        t.join()
    global stop
    # The scenarios with the same threads run together: starting and
    # joining eight busy threads costs the main thread a wait for the GIL
    # each.
    scenarios.sort(key=lambda sc: THREADS.index(sc[2]))
    ts, running = [], None
    for source, kind, threads in scenarios:
        sig = SIGNALS[source]
        if not early:
            signal.signal(sig, on_signal)
        if threads != running:
            stop = True
            for t in ts:
                t.join()
            stop = False
            ts, running = start_threads(threads), threads
            time.sleep(0.02)
        res = {"scenario": "%s:%s:%s" % (source, kind, threads), "outcomes": {}, "lat_ms": [], "handled": 0}
        t_start = time.monotonic()
        for _ in range(rounds if source != "alarm" else alarm_rounds):
            outcome, lat, ran = one_round(source, kind, cmd_w, res_r, pipe_r, ev, lock, rnd)
            res["outcomes"][outcome] = res["outcomes"].get(outcome, 0) + 1
            if outcome not in ("unsynced", "starved"):
                res["lat_ms"].append(round(lat * 1000, 3))
            res["handled"] += ran
        res["secs"] = round(time.monotonic() - t_start, 3)
        if not early:
            signal.signal(sig, signal.SIG_DFL if sig != signal.SIGINT else signal.default_int_handler)
        print(json.dumps(res), flush=True)
    stop = True
    for t in ts:
        t.join()
    os.close(cmd_w)
    os.waitpid(sender, 0)


if __name__ == "__main__":
    main()
