"""Tasks awaited through each of asyncio's ways of awaiting, for `strata
stack` (tests/func/test_async_stack.py): task "by-NAME" awaits task
"NAME-child" (two children for gather and as_completed) through NAME. Every
child sleeps until the program is killed. Prints "ready" once all wait.
"""
import asyncio
import sys


async def child():
    await asyncio.sleep(3600)


def spawn(name):
    return asyncio.ensure_future(asyncio.get_running_loop().create_task(child(), name=name))


async def by_await():
    await spawn("await-child")


async def by_gather():
    await asyncio.gather(spawn("gather-child"), spawn("gather-child-2"))


async def by_wait():
    await asyncio.wait([spawn("wait-child")])


async def by_wait_for():
    await asyncio.wait_for(spawn("wait_for-child"), 3600)


async def by_shield():
    await asyncio.shield(spawn("shield-child"))


async def by_taskgroup():
    async with asyncio.TaskGroup() as tg:
        tg.create_task(child(), name="taskgroup-child")


async def by_as_completed():
    for f in asyncio.as_completed([spawn("as_completed-child"), spawn("as_completed-child-2")]):
        await f


WAYS = ["await", "gather", "wait", "wait_for", "shield", "as_completed"]
if sys.version_info >= (3, 11):
    WAYS.append("taskgroup")


async def main():
    tasks = [asyncio.create_task(globals()["by_" + w](), name="by-" + w) for w in WAYS]
    await asyncio.sleep(0.2)
    print("ready", " ".join(WAYS), flush=True)
    await asyncio.gather(*tasks)


asyncio.run(main())
