"""An aiohttp server whose handler awaits a 20 ms sleep (a stand-in for a
database call) and then hashes for a millisecond or two
(tests/func/test_async.py). Prints its port, then serves until a request
to /quit.
"""
import asyncio
import hashlib
import sys

from aiohttp import web


async def handle(request):
    await asyncio.sleep(0.02)  # the database
    digest = hashlib.sha256(b"query" * 200000).hexdigest()  # the work
    return web.Response(text=digest)


async def main():
    done = asyncio.Event()

    async def quit_(request):
        done.set()
        return web.Response(text="bye")

    app = web.Application()
    app.add_routes([web.get("/", handle), web.get("/quit", quit_)])
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    print(runner.addresses[0][1], flush=True)
    await done.wait()
    await runner.cleanup()


asyncio.run(main())
