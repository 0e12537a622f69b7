"""Two event loops, each in a thread of its own ("loop-a", "loop-b"), each
with a task that waits ("a-sleeper", "b-sleeper") beside one that
computes (tests/func/test_async.py): a waiting task's samples belong to the
thread that runs its loop. Loop b starts late: its main task exists for
argv[2] seconds (default 0) before its loop runs, so no thread runs that
loop yet (asyncio.run leaves such a moment too, only shorter).
"""
import asyncio
import sys
import threading
import time


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


def run(name, rounds, late):
    if not late:
        asyncio.run(loop_main(name, rounds))
        return
    loop = asyncio.new_event_loop()
    task = loop.create_task(loop_main(name, rounds), name=name + "-main")
    time.sleep(late)
    loop.run_until_complete(task)
    loop.close()


rounds = int(sys.argv[1])
late = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
threads = [threading.Thread(target=run, args=(n, rounds, late if n == "b" else 0), name="loop-" + n)
           for n in "ab"]
for t in threads:
    t.start()
for t in threads:
    t.join()
