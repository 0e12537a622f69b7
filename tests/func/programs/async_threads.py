"""Two event loops, each in a thread of its own ("loop-a", "loop-b"), each
with a task that waits ("a-sleeper", "b-sleeper") beside one that
computes (tests/func/test_async.py): a waiting task's samples belong to the
thread that runs its loop.
"""
import asyncio
import sys
import threading


def burn(n):
    x = 0
    for i in range(n):
        x += i * i
    return x


async def sleeper():
    while True:
        await asyncio.sleep(0.05)


async def cruncher(rounds):
    for _ in range(rounds):
        burn(20000)
        await asyncio.sleep(0.001)


async def loop_main(name, rounds):
    s = asyncio.create_task(sleeper(), name=name + "-sleeper")
    await asyncio.create_task(cruncher(rounds), name=name + "-cruncher")
    s.cancel()


rounds = int(sys.argv[1])
threads = [threading.Thread(target=asyncio.run, args=(loop_main(n, rounds),), name="loop-" + n) for n in "ab"]
for t in threads:
    t.start()
for t in threads:
    t.join()
