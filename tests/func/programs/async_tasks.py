"""asyncio known answers (tests/func/test_async.py).

split: tasks "heavy" and "light" run the same coroutine, the same line,
with 3:1 the work; `main` awaits `parent`, which awaits both, so heavy's
samples have the chain main -> parent -> [task heavy] -> work -> burn.
wait: task "sleeper" only awaits a sleep (slow_db's line), beside a task
that computes.
both: split, with "sleeper" awaiting its sleep meanwhile.
late: split, but parent blocks the loop for 0.3 s (time.sleep) between
creating the tasks and awaiting them.

A third argument picks the tasks and the loop: "pure" (no _asyncio: the
pure-Python tasks and futures asyncio falls back on), "pytask" (asyncio's
pure-Python Task class made by a task factory beside the C _asyncio),
"uvloop" (uvloop's event loop), "import-late" (asyncio imported only after
0.6 s of computing, so a profiler has looked for it and not found it
several times, into a sys.modules with room for it).

At the end it prints the time heavy and light spent in burn(), by the wall
clock and by the thread's CPU clock: the known answer a profile's split is
checked against, measured in the same run (under load, a task preempted in
its burn takes more wall time than its work alone says).
"""
import sys
import time

FLAVOUR = sys.argv[3] if len(sys.argv) > 3 else ""
if FLAVOUR == "pure":
    sys.modules["_asyncio"] = None  # what asyncio sees without its C module
if FLAVOUR == "import-late":
    assert "asyncio" not in sys.modules
    # Room in sys.modules' table first (2000 entries added and removed:
    # it grows, and keeps its size), so that asyncio's imports append to
    # it without a resize: a profiler that searches only the entries
    # added since it last looked must find asyncio.tasks among them.
    for i in range(2000):
        sys.modules["_pad%d" % i] = sys
    for i in range(2000):
        del sys.modules["_pad%d" % i]
    t0 = time.process_time()
    while time.process_time() - t0 < 0.6:
        sum(range(1000))

import asyncio


def burn(n):
    x = 0
    for i in range(n):
        x += i * i
    return x


SPENT = {}  # units -> [wall seconds, CPU seconds] in burn()


async def work(units, rounds):
    spent = SPENT.setdefault(units, [0.0, 0.0])
    for _ in range(rounds):
        # The wall clock's window holds no system call (perf_counter is
        # read without one): a thread preempted on its way out of one is
        # sampled at that call's line, outside burn().
        c = time.thread_time()
        w = time.perf_counter()
        burn(units * 40000)  # the line
        w = time.perf_counter() - w
        spent[1] += time.thread_time() - c
        spent[0] += w
        await asyncio.sleep(0)


async def parent(rounds, late=0.0):
    heavy = asyncio.create_task(work(3, rounds), name="heavy")
    light = asyncio.create_task(work(1, rounds), name="light")
    if late:
        # The loop blocked before anything awaits the tasks: they wait
        # to start, and nothing awaits them yet.
        time.sleep(late)
    await asyncio.gather(heavy, light)


async def slow_db():
    await asyncio.sleep(0.02)  # the wait


async def sleeper(n):
    for _ in range(n):
        await slow_db()


async def cruncher(n):
    for _ in range(n):
        burn(20000)
        await asyncio.sleep(0)


async def wait(rounds):
    s = asyncio.create_task(sleeper(rounds), name="sleeper")
    c = asyncio.create_task(cruncher(rounds * 4), name="cruncher")
    await s
    await c


async def sleeper_until(done):
    while not done:
        await slow_db()


async def both(rounds):
    done = []
    s = asyncio.create_task(sleeper_until(done), name="sleeper")
    await parent(rounds)
    done.append(1)
    await s


async def main(what, rounds):
    if what == "split":
        await parent(rounds)
    elif what == "late":
        await parent(rounds, late=0.3)
    elif what == "both":
        await both(rounds)
    else:
        await wait(rounds)


async def start(what, rounds):
    if FLAVOUR == "pytask":
        def factory(loop, coro, **kw):
            return asyncio.tasks._PyTask(coro, loop=loop, **kw)
        asyncio.get_running_loop().set_task_factory(factory)
        # The factory makes the tasks from here on: main's own as well.
        await asyncio.create_task(main(what, rounds), name="Task-main")
    else:
        await main(what, rounds)


if __name__ == "__main__":
    if FLAVOUR == "uvloop":
        import uvloop
        uvloop.install()
    asyncio.run(start(sys.argv[1], int(sys.argv[2])))
    if SPENT:
        h, l = SPENT[3], SPENT[1]
        print("burned wall heavy=%.6f light=%.6f cpu heavy=%.6f light=%.6f" % (h[0], l[0], h[1], l[1]))
