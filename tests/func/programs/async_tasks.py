"""asyncio known answers (tests/func/test_async.py).

split: tasks "heavy" and "light" run the same coroutine, the same line,
with 3:1 the work; `main` awaits `parent`, which awaits both, so heavy's
samples have the chain main -> parent -> [task heavy] -> work -> burn.
wait: task "sleeper" only awaits a sleep (slow_db's line), beside a task
that computes.
"""
import asyncio
import sys


def burn(n):
    x = 0
    for i in range(n):
        x += i * i
    return x


async def work(units, rounds):
    for _ in range(rounds):
        burn(units * 40000)  # the line
        await asyncio.sleep(0)


async def parent(rounds):
    heavy = asyncio.create_task(work(3, rounds), name="heavy")
    light = asyncio.create_task(work(1, rounds), name="light")
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


async def main(what, rounds):
    if what == "split":
        await parent(rounds)
    else:
        await wait(rounds)


if __name__ == "__main__":
    if len(sys.argv) > 3 and sys.argv[3] == "uvloop":
        import uvloop
        uvloop.install()
    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
