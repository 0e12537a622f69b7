"""A small asyncio server and its clients in one program, for the README's
asyncio example (docs/async.md): each request's handler awaits a 20 ms
sleep (a stand-in for a database call), then hashes for a millisecond or
two; four client tasks send requests for a few seconds.

    strata record --mode wall -o server.strata -- python examples/async_server.py
    strata report server.strata
"""
import asyncio
import hashlib
import sys


async def handle(reader, writer):
    while line := await reader.readline():
        await asyncio.sleep(0.02)  # the database
        digest = hashlib.sha256(line * 20000).hexdigest()  # the work
        writer.write(digest.encode() + b"\n")
        await writer.drain()
    writer.close()


async def client(port, until):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    loop = asyncio.get_running_loop()
    while loop.time() < until:
        writer.write(b"query\n")
        await reader.readline()
    writer.close()


async def main(seconds):
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    until = asyncio.get_running_loop().time() + seconds
    async with server:
        await asyncio.gather(*(asyncio.create_task(client(port, until), name="client-%d" % i) for i in range(4)))


if __name__ == "__main__":
    asyncio.run(main(float(sys.argv[1]) if len(sys.argv) > 1 else 5))
