"""One program, many shapes of Python code; each burns CPU in a function
whose qualified name the profile must show:

  Shape.area                    a method
  outer.<locals>.inner          a nested function
  counter (generator)           a generator driven by sum()
  crunch (coroutine)            a coroutine run by asyncio
  handler_work                  code running while an exception is handled
  recurse                       deep recursion (DEPTH frames)
  <module> in <string>          code run by exec()
  latemod.late_work             a function of a module imported mid-run
  short_lived                   a thread started and ended mid-run
"""
import asyncio
import os
import sys
import threading
import time

DEPTH = 3000
sys.setrecursionlimit(DEPTH + 500)


def spin(seconds):
    end = time.process_time() + seconds
    s = 0
    while time.process_time() < end:
        for i in range(2000):
            s += i
    return s


class Shape:
    def area(self):
        return spin(0.3)


def outer():
    def inner():
        return spin(0.3)
    return inner()


def counter():
    end = time.process_time() + 0.3
    while time.process_time() < end:
        yield sum(range(2000))


async def crunch():
    await asyncio.sleep(0)
    return spin(0.3)


def handler_work():
    try:
        raise ValueError("boom")
    except ValueError:
        return spin(0.3)


def recurse(n):
    if n == 0:
        return spin(0.3)
    return recurse(n - 1) + 0


def short_lived():
    spin(0.3)


def main():
    Shape().area()
    outer()
    sum(counter())
    asyncio.run(crunch())
    handler_work()
    recurse(DEPTH)
    exec(compile("end = time.process_time() + 0.3\nwhile time.process_time() < end:\n    sum(range(2000))\n",
                 "<string>", "exec"), {"time": time})
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import latemod
    latemod.late_work()
    t = threading.Thread(target=short_lived, name="short-lived")
    t.start()
    t.join()
    spin(0.1)


if __name__ == "__main__":
    main()
