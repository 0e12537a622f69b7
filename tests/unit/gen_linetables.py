#!/usr/bin/env python3
"""gen_linetables.py — regenerates tests/unit/fixtures/linetables.txt.

For every interpreter present (Debian's /usr/bin/python3 and pyenv's 3.8 to
3.13), compiles a set of functions chosen to exercise the awkward corners of
CPython's line tables (multi-line expressions, loops, exception handlers,
comprehensions, decorators, line jumps beyond one byte in both directions,
code large enough for EXTENDED_ARG jumps, columns past 127, no-location
instructions) and writes, for every code object, the raw table bytes, its
co_firstlineno and the line CPython itself gives for every instruction
offset: from co_lines() on 3.10+, from dis.findlinestarts() on 3.8/3.9.
The C test (test_linetable.c) decodes each table and checks every offset.

Run by hand when an interpreter is added or changed; the output is
committed. Not part of `make check`:

    tests/unit/gen_linetables.py > tests/unit/fixtures/linetables.txt
"""
import glob
import os
import subprocess
import sys

# Runs inside each interpreter: prints the fixture records for that version.
CHILD = r'''
import dis, sys, types

def src_main():
    return """
import functools

def simple(a, b):
    c = a + b
    return c * 2

def multiline(a, b):
    x = (a +
         b *
         a)
    y = simple(
        a,
        b,
    )
    return {
        'x': x,
        'y': y,
    }

def loops(n):
    total = 0
    for i in range(n):
        if i % 3 == 0:
            continue
        while total > 100:
            total -= 7
            if total == 50:
                break
        total += i
    else:
        total += 1
    return total

def exceptions(x):
    try:
        y = 1 / x
    except ZeroDivisionError as e:
        y = 0
    except (TypeError, ValueError):
        raise
    else:
        y += 1
    finally:
        x = None
    with open(__file__) as f:
        f.read(1)
    return y

def comprehensions(xs):
    a = [x * 2 for x in xs if x]
    b = {x: [y for y in range(x)] for x in xs}
    c = (x for x in xs)
    d = lambda q: q + 1
    return a, b, list(c), d(1)

def deco(f):
    @functools.wraps(f)
    def inner(*args, **kw):
        return f(*args, **kw)
    return inner

@deco
@functools.lru_cache(maxsize=None)
def decorated(
        x,
        y=2):
    return x ** y

class Klass:
    attr = 1

    @property
    def prop(self):
        return self.attr

    def method(self, v):
        def nested():
            return v + self.attr
        return nested()

async def coro(x):
    await x
    return x

def gen(n):
    for i in range(n):
        yield i
    yield from range(n)

def wide(aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa, bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb):
    return aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa + bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb + aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa * bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb + aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa
"""

def src_far():
    # Line deltas > 127 forward, and back again (the call's line is its
    # first line, after evaluating arguments hundreds of lines later).
    s = "def far(a):\n    x = a\n" + "\n" * 300 + "    y = x + 1\n"
    s += "    z = max(\n        x,\n" + "\n" * 400 + "        y)\n"
    s += "    return z\n"
    return s

def src_big():
    # Enough code that jumps need EXTENDED_ARG, address deltas overflow a
    # byte, and one statement spans over a thousand lines.
    lines = ["def big(n):", "    t = 0", "    for i in range(n):"]
    for k in range(300):
        lines.append("        if i == %d: t += %d" % (k, k))
    lines.append("    s = (1 +")
    for k in range(1200):
        lines.append("        %d +" % k)
    lines.append("        0)")
    lines.append("    return t + s")
    return "\n".join(lines) + "\n"

def src_version():
    v = sys.version_info
    s = ""
    if v >= (3, 10):
        s += """
def matcher(cmd):
    match cmd:
        case [x, y]:
            return x + y
        case {'k': v}:
            return v
        case _:
            return None
"""
    if v >= (3, 11):
        s += """
def groups():
    try:
        raise ExceptionGroup('g', [ValueError(1)])
    except* ValueError as eg:
        r = eg
    return r
"""
    return s

def expected(co):
    n = len(co.co_code) // 2
    lines = [None] * n
    if sys.version_info >= (3, 10):
        for start, end, line in co.co_lines():
            for off in range(start, end, 2):
                if 0 <= off // 2 < n:
                    lines[off // 2] = line
    else:
        starts = list(dis.findlinestarts(co))
        cur = None
        j = 0
        for i in range(n):
            while j < len(starts) and starts[j][0] <= 2 * i:
                cur = starts[j][1]
                j += 1
            lines[i] = cur
    return lines

def table(co):
    v = sys.version_info
    if v >= (3, 11):
        return 3, co.co_linetable
    if v >= (3, 10):
        return 2, co.co_linetable
    return 1, co.co_lnotab

def walk(co, prefix):
    yield prefix + co.co_name, co
    for c in co.co_consts:
        if isinstance(c, types.CodeType):
            yield from walk(c, prefix + co.co_name + ".")

ver = "%d.%d.%d" % sys.version_info[:3]
print("# python %s %s" % (ver, sys.executable))
for label, src, first in (("main", src_main(), 1), ("far", src_far(), 1),
                          ("big", src_big(), 1), ("version", src_version(), 1),
                          ("shifted", "\n" * 70000 + "def shifted(x):\n    return x\n", 1)):
    if not src.strip():
        continue
    mod = compile(src, "<%s>" % label, "exec")
    for name, co in walk(mod, label + ":"):
        fmt, tab = table(co)
        lines = expected(co)
        print("code %s %d %s %d %s" % (ver, fmt, name.replace(" ", "_"), co.co_firstlineno,
                                       tab.hex() if tab else "-"))
        print("lines %d %s" % (len(lines), " ".join("-" if l is None else str(l) for l in lines)))
'''


def interpreters():
    found = []
    if os.access("/usr/bin/python3", os.X_OK):
        found.append("/usr/bin/python3")
    try:
        root = subprocess.run(["pyenv", "root"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    for minor in range(8, 14):
        found += sorted(glob.glob("%s/versions/3.%d*/bin/python" % (root, minor)))
    return found


def main():
    print("# Generated by tests/unit/gen_linetables.py; do not edit.")
    print("# code VERSION FORMAT NAME FIRSTLINENO TABLE_HEX")
    print("# lines N LINE_AT_OFFSET_0 ... (per 2-byte code unit; - = no line)")
    for py in interpreters():
        out = subprocess.run([py, "-c", CHILD], capture_output=True, text=True)
        if out.returncode != 0:
            sys.stderr.write("%s failed:\n%s" % (py, out.stderr))
            sys.exit(1)
        sys.stdout.write(out.stdout)


if __name__ == "__main__":
    main()
