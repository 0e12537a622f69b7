#!/usr/bin/env python3
"""check_versions.py: records known-answer programs under every CPython from
3.8 to 3.15 found on this machine and checks what strata recorded against
the interpreter's own answers.

    tests/versions/check_versions.py [--strata build/bin/strata]
        [--python PATH ...] [--only SCENARIO ...] [--repeat N] [-v]

Interpreters: Debian's /usr/bin/python3 and every pyenv interpreter from
3.8 on (under `pyenv root`); a minor version from 3.8 to 3.15 that is not
present is reported as skipped, by name. Exit status 0 if every check
passed on every interpreter present.

It reads profiles through `strata dump --samples` (the report command is
not needed) and asks the interpreter itself, through truth.py, for the
line each recorded instruction offset belongs to, the line table the agent
should have copied and the qualified name of each code object.
"""
import argparse
import collections
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MINORS = ["3.8", "3.9", "3.10", "3.11", "3.12", "3.13", "3.14", "3.15"]

# ---- the programs ------------------------------------------------------------
# Each burns CPU for a known reason. Line numbers that matter are found by
# markers ("# HOT") rather than hard-coded.

SPLIT = """
import time
def work(n):
    s = 0
    for i in range(n):
        s += i * i
    return s
def heavy():
    return work(300000)
def light():
    return work(100000)
t0 = time.process_time()
while time.process_time() - t0 < 3.0:
    heavy()
    light()
"""

HOTLINE = """
import time
def hot():
    data = list(range(2000, 0, -1))
    n = 0
    for i in range(200):
        n += i
        data.sort(); data.reverse(); data = sorted(data)  # HOT
        n -= 1
    return n
t0 = time.process_time()
while time.process_time() - t0 < 2.0:
    hot()
"""

NAMES = """
import functools, time
def work(n):
    s = 0
    for i in range(n):
        s += i
    return s
def deco(f):
    @functools.wraps(f)
    def wrapper(*a, **k):
        return f(*a, **k)
    return wrapper
class K:
    def method(self):
        return work(20000)
    @staticmethod
    @deco
    def decorated(
        x=1,
    ):
        return work(20000)
    class Inner:
        async def amethod(self):
            return work(20000)
def outer():
    def inner():
        return work(20000)
    return inner()
def factory():
    class Local:
        def m(self):
            return work(20000)
    return Local()
def lam():
    f = (lambda n:
         work(n))
    return f(20000)
def comp():
    return [work(2000) for _ in range(10)]
s = '''
def fake():
    pass
'''
t0 = time.process_time()
while time.process_time() - t0 < 3.0:
    K().method(); K.decorated(); outer(); factory().m(); lam(); comp()
    c = K.Inner().amethod()
    try:
        c.send(None)
    except StopIteration:
        pass
"""
NAMES_EXPECT = {  # leaf-but-one frame (the caller of work) -> qualified name
    "method": "K.method",
    "decorated": "K.decorated",
    "amethod": "K.Inner.amethod",
    "inner": "outer.<locals>.inner",
    "m": "factory.<locals>.Local.m",
    "<lambda>": "lam.<locals>.<lambda>",
    "<listcomp>": "comp.<locals>.<listcomp>",
}

GENCORO = """
import asyncio, time
def gen():
    for i in range(30):
        s = 0
        for j in range(3000):
            s += j
        yield s
def consume():
    return sum(gen())
async def crunch():
    s = 0
    for j in range(100000):
        s += j
    await asyncio.sleep(0)
    return s
async def main():
    t0 = time.process_time()
    while time.process_time() - t0 < 1.5:
        await crunch()
t0 = time.process_time()
while time.process_time() - t0 < 1.5:
    consume()
asyncio.run(main())
"""

EXCEPT = """
import time
def handler():
    n = 0
    for i in range(100):
        try:
            raise ValueError(i)
        except ValueError as e:
            x = sorted(range(3000, 0, -1))  # HOT
            n += len(x)
    return n
t0 = time.process_time()
while time.process_time() - t0 < 1.5:
    handler()
"""

RECURSE = """
import sys, time
sys.setrecursionlimit(12000)
def rec(n):
    if n == 0:
        t0 = time.process_time()
        s = 0
        while time.process_time() - t0 < 1.5:
            s += 1
        return s
    return rec(n - 1) + 1
print(rec(5000))
"""

EXEC = """
import time
src = '''
def burner():
    s = 0
    for i in range(200000):
        s += i
    return s
t0 = time.process_time()
while time.process_time() - t0 < 1.5:
    burner()
'''
exec(compile(src, '<string>', 'exec'), {'time': time})
"""

THREADS = """
import threading, time
def burn(sec):
    t0 = time.thread_time()
    s = 0
    while time.thread_time() - t0 < sec:
        s += 1
def sleeper(sec):
    time.sleep(sec)
ts = [threading.Thread(target=burn, args=(1.0,), name='busy-%d' % i) for i in range(2)]
ts += [threading.Thread(target=sleeper, args=(1.5,), name='sleepy-%d' % i) for i in range(2)]
for t in ts: t.start()
for t in ts: t.join()
"""

CHILD = """
import subprocess, sys
child = '''
import time
t0 = time.process_time()
def child_burn():
    s = 0
    while time.process_time() - t0 < 1.0:
        s += 1
child_burn()
'''
subprocess.run([sys.executable, '-c', child], check=True)
"""

CHURN = """
import threading, time
def short(k):
    s = 0
    for i in range(2000 * (k % 7 + 1)):
        s += i
    if k % 3 == 0:
        time.sleep(0.001)
def spawner(base):
    for j in range(60):
        ts = [threading.Thread(target=short, args=(base + j * 4 + i,), name='churn-%d' % i)
              for i in range(4)]
        for t in ts: t.start()
        for t in ts: t.join()
ss = [threading.Thread(target=spawner, args=(k * 1000,)) for k in range(2)]
for t in ss: t.start()
for t in ss: t.join()
"""


# ---- reading a profile -------------------------------------------------------

class Profile:
    """What `strata dump --samples` lists, keyed per stream."""

    def __init__(self, text):
        self.processes = {}  # stream -> dict
        self.codes = {}      # (stream, index) -> dict
        self.stacks = {}     # (stream, index) -> dict
        self.threads = {}    # (stream, tid) -> name
        self.samples = []    # dicts with stream, tid, stack, weight, flags
        for line in text.splitlines():
            m = re.match(r"\[([0-9a-f]+)\] (\S+) (.*)$", line)
            if not m:
                continue
            st, kind, rest = m.groups()
            if kind == "process":
                p = dict(re.findall(r"(\w+)=(\S+)", rest.split(" argv=")[0]))
                self.processes[st] = p
            elif kind == "code":
                c = re.match(r"#(\d+) (.*) \((.*):(\d+)\) linetable=(\d+) bytes fmt=(\d+)$", rest)
                if c:
                    self.codes[(st, int(c.group(1)))] = {
                        "qualname": c.group(2), "file": c.group(3), "first": int(c.group(4)),
                        "ltlen": int(c.group(5)), "fmt": int(c.group(6))}
            elif kind == "stack":
                s = re.match(r"#(\d+) flags=(\S+) py=\[(.*?)\](?: \+(\d+) missing)?", rest)
                if s:
                    frames = []
                    for fr in s.group(3).split():
                        f = re.match(r"#(\d+)@(-?\d+)(E?)", fr)
                        frames.append((int(f.group(1)), int(f.group(2)), f.group(3) == "E"))
                    self.stacks[(st, int(s.group(1)))] = {
                        "flags": int(s.group(2), 16), "frames": frames,
                        "missing": int(s.group(4) or 0)}
            elif kind in ("thread", "thread-name"):
                t = re.match(r"tid=(\d+).* name=(.*)$", rest)
                if t:
                    self.threads[(st, int(t.group(1)))] = t.group(2)
            elif kind == "sample":
                d = dict(re.findall(r"(\w+)=#?(\S+)", rest))
                self.samples.append({"stream": st, "tid": int(d["tid"]), "stack": int(d["stack"]),
                                     "weight": int(d["weight"]), "flags": int(d["flags"], 16)})

    def frames(self, sample):
        """The sample's Python frames, leaf first, as (code dict, lasti, entry)."""
        st = sample["stream"]
        stack = self.stacks[(st, sample["stack"])]
        return [(self.codes[(st, c)], l, e) for c, l, e in stack["frames"]]


# ---- running -----------------------------------------------------------------

class Checker:
    def __init__(self, strata, verbose):
        self.strata = strata
        self.verbose = verbose
        self.failures = 0
        self.checks = 0

    def ok(self, cond, what):
        self.checks += 1
        if not cond:
            self.failures += 1
        if not cond or self.verbose:
            print("    %s %s" % ("ok  " if cond else "FAIL", what))
        return cond

    def record(self, py, prog, tmp, name, mode="cpu", pyflags=(), expect_rc=0, env=None):
        path = os.path.join(tmp, name + ".py")
        with open(path, "w") as f:
            f.write(textwrap.dedent(prog).lstrip("\n"))
        out = os.path.join(tmp, name + "-" + mode + ".strata")
        if os.path.exists(out):
            os.unlink(out)
        cmd = [self.strata, "record", "-q", "-o", out, "--mode", mode, "--", py] + list(pyflags) + [path]
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                           env=dict(os.environ, **env) if env else None)
        if not self.ok(r.returncode == expect_rc, "%s (%s): exit status %d" % (name, mode, r.returncode)):
            print(textwrap.indent(r.stderr[-2000:], "      "))
        d = subprocess.run([self.strata, "dump", "--samples", out], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, universal_newlines=True)
        self.ok(d.returncode == 0, "%s: strata dump reads the file" % name)
        return path, Profile(d.stdout)

    def truth(self, py, prof, files):
        """Asks `py` for the lines of every (code, lasti) recorded in files."""
        want = collections.defaultdict(lambda: collections.defaultdict(set))
        for key, st in prof.stacks.items():
            for c, l, _ in st["frames"]:
                code = prof.codes[(key[0], c)]
                if code["file"] in files:
                    want[code["file"]][(code["qualname"], code["first"])].add(l)
        req = {"files": {}}
        order = {}
        for fn, cs in want.items():
            # truth.py matches by co_name: the last component of the qualname
            req["files"][fn] = [[q.split(".")[-1], first, sorted(ls)] for (q, first), ls in cs.items()]
            order[fn] = [(q, first, sorted(ls)) for (q, first), ls in cs.items()]
        r = subprocess.run([py, os.path.join(HERE, "truth.py")], input=json.dumps(req),
                           stdout=subprocess.PIPE, universal_newlines=True, check=True)
        ans = json.loads(r.stdout)
        table = {}
        for fn, rows in ans.items():
            for (q, first, ls), a in zip(order[fn], rows):
                table[(fn, q, first)] = (a, dict(zip(ls, a["lines"])) if a else {})
        return table

    def line(self, table, code, lasti):
        a = table.get((code["file"], code["qualname"], code["first"]))
        return a[1].get(lasti) if a else None


def marker_line(path, marker):
    with open(path) as f:
        for i, l in enumerate(f, 1):
            if marker in l:
                return i
    raise ValueError(marker)


def has_jit(py):
    """Whether `py` was built with CPython's experimental JIT (3.14+)."""
    r = subprocess.run([py, "-c", "import sys; print(sys._jit.is_available())"], stdout=subprocess.PIPE,
                       stderr=subprocess.DEVNULL, universal_newlines=True)
    return r.returncode == 0 and r.stdout.strip() == "True"


def pyflavour(py):
    out = subprocess.run([py, "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"],
                         stdout=subprocess.PIPE, universal_newlines=True, check=True).stdout
    return out.strip()


# ---- scenarios -----------------------------------------------------------------

def check_common(c, prof, table, ver, files):
    """Line tables and qualified names of every code object of our files."""
    fmt = 1 if ver < (3, 10) else 2 if ver < (3, 11) else 3
    bad_fmt = bad_len = bad_q = 0
    n = 0
    for (st, idx), code in prof.codes.items():
        if code["file"] not in files:
            continue
        a = table.get((code["file"], code["qualname"], code["first"]))
        if not a or not a[0]:
            continue
        n += 1
        bad_fmt += code["fmt"] != fmt
        bad_len += code["ltlen"] != a[0]["ltlen"]
        if a[0]["qualname"] and a[0]["qualname"] != code["qualname"]:
            bad_q += 1
            print("      qualname %s, interpreter says %s" % (code["qualname"], a[0]["qualname"]))
    c.ok(n > 0 and bad_fmt == 0, "line table format %d on %d code objects" % (fmt, n))
    c.ok(bad_len == 0, "line table lengths match the interpreter's (%d differ)" % bad_len)
    c.ok(bad_q == 0, "qualified names match the interpreter's (%d differ)" % bad_q)
    lines = [c.line(table, fr[0], fr[1]) for s in prof.samples for fr in prof.frames(s)
             if fr[0]["file"] in files and fr[1] >= 0]
    c.ok(lines.count(None) == 0 and lines.count(0) < 0.01 * len(lines),
         "every recorded offset is an instruction of its code (%d are not; %d of %d on an instruction without a line)"
         % (lines.count(None), lines.count(0), len(lines)))


def caller_of(prof, s, leaf_name):
    fr = prof.frames(s)
    if len(fr) >= 2 and fr[0][0]["qualname"] == leaf_name:
        return fr[1][0]["qualname"]
    return None


def sc_split(c, py, ver, tmp, pyflags=(), tag="split", env=None):
    path, prof = c.record(py, SPLIT, tmp, tag, pyflags=pyflags, env=env)
    table = c.truth(py, prof, {path})
    check_common(c, prof, table, ver, {path})
    cnt = collections.Counter(caller_of(prof, s, "work") for s in prof.samples)
    h, l = cnt["heavy"], cnt["light"]
    share = 100.0 * h / max(1, h + l)
    c.ok(h + l > 1000 and abs(share - 75) <= 7,
         "%s: heavy/light = %d/%d samples = %.1f%% (want 75 +- 7)" % (tag, h, l, share))
    hot = collections.Counter(c.line(table, prof.frames(s)[0][0], prof.frames(s)[0][1])
                              for s in prof.samples if prof.frames(s) and prof.frames(s)[0][0]["qualname"] == "work")
    loop = {marker_line(path, "for i in range(n)"), marker_line(path, "s += i * i")}
    inloop = sum(v for k, v in hot.items() if k in loop)
    c.ok(inloop >= 0.9 * sum(hot.values()), "%s: work()'s samples are on its loop lines %s" % (tag, dict(hot)))
    # Callers' offsets must give the line of the call they are in.
    want = {"heavy": marker_line(path, "return work(300000)"), "light": marker_line(path, "return work(100000)")}
    mod = {"heavy": marker_line(path, "    heavy()"), "light": marker_line(path, "    light()")}
    right = wrong = 0
    for s in prof.samples:
        fr = prof.frames(s)
        if len(fr) == 3 and fr[0][0]["qualname"] == "work" and fr[1][0]["qualname"] in want:
            q = fr[1][0]["qualname"]
            ok = (c.line(table, fr[1][0], fr[1][1]) == want[q] and
                  c.line(table, fr[2][0], fr[2][1]) == mod[q])
            right += ok
            wrong += not ok
    c.ok(right > 1000 and wrong == 0, "%s: callers are on their call lines (%d right, %d wrong)" % (tag, right, wrong))
    entry = all(fr[-1][2] for fr in (prof.frames(s) for s in prof.samples) if fr)
    c.ok(entry, "%s: the outermost frame of every stack is an entry frame" % tag)
    if ver < (3, 11) or pyflags:
        # 3.8-3.10 run each Python frame in its own C-level eval; so do
        # 3.12+ under -X perf/perf_jit, whose trampoline stops the
        # interpreter from inlining Python-to-Python calls.
        # (the program's own frames: CPython installs the trampoline
        # after the start-up imports, which still run inlined)
        c.ok(all(e for s in prof.samples for code, _, e in prof.frames(s) if code["file"] == path),
             "%s: every frame is an entry frame" % tag)
    else:
        inl = sum(1 for s in prof.samples for fr in [prof.frames(s)]
                  if len(fr) >= 2 and fr[0][0]["qualname"] == "work" and not fr[0][2])
        c.ok(inl > 0.9 * h, "%s: Python-to-Python calls are not entry frames (%d)" % (tag, inl))


def sc_hotline(c, py, ver, tmp):
    path, prof = c.record(py, HOTLINE, tmp, "hotline")
    table = c.truth(py, prof, {path})
    check_common(c, prof, table, ver, {path})
    hot = marker_line(path, "# HOT")
    lines = collections.Counter(c.line(table, fr[0][0], fr[0][1]) for fr in (prof.frames(s) for s in prof.samples)
                                if fr and fr[0][0]["qualname"] == "hot")
    top = lines.most_common(1)[0][0] if lines else None
    c.ok(top == hot and lines[hot] > 0.8 * sum(lines.values()),
         "hot line %d holds %d of %d samples of hot() %s" % (hot, lines[hot], sum(lines.values()), dict(lines)))


def sc_names(c, py, ver, tmp):
    path, prof = c.record(py, NAMES, tmp, "names")
    table = c.truth(py, prof, {path})
    check_common(c, prof, table, ver, {path})
    seen = collections.Counter(caller_of(prof, s, "work") for s in prof.samples)
    for co_name, q in NAMES_EXPECT.items():
        if co_name == "<listcomp>" and ver >= (3, 12):
            q = "comp"  # PEP 709: comprehensions are inlined
        c.ok(seen[q] > 20, "%s is named %s (%d samples)" % (co_name, q, seen[q]))


def sc_gencoro(c, py, ver, tmp):
    path, prof = c.record(py, GENCORO, tmp, "gencoro")
    table = c.truth(py, prof, {path})
    check_common(c, prof, table, ver, {path})
    chains = collections.Counter(tuple(f[0]["qualname"] for f in prof.frames(s)[:3]) for s in prof.samples)
    g = chains[("gen", "consume", "<module>")]
    c.ok(g > 200, "generator: gen <- consume <- <module> (%d samples)" % g)
    co = sum(v for k, v in chains.items() if k[:2] == ("crunch", "main"))
    c.ok(co > 200, "coroutine: crunch <- main (%d samples)" % co)


def sc_except(c, py, ver, tmp):
    path, prof = c.record(py, EXCEPT, tmp, "except")
    table = c.truth(py, prof, {path})
    check_common(c, prof, table, ver, {path})
    hot = marker_line(path, "# HOT")
    lines = collections.Counter(c.line(table, fr[0][0], fr[0][1]) for fr in (prof.frames(s) for s in prof.samples)
                                if fr and fr[0][0]["qualname"] == "handler")
    c.ok(lines[hot] > 0.7 * sum(lines.values()) and lines[hot] > 100,
         "line %d in the except block holds %d of %d samples" % (hot, lines[hot], sum(lines.values())))


def sc_recurse(c, py, ver, tmp):
    path, prof = c.record(py, RECURSE, tmp, "recurse")
    deep = [s for s in prof.samples if prof.stacks[(s["stream"], s["stack"])]["missing"]]
    c.ok(len(deep) > 500, "deep stacks are capped (%d samples)" % len(deep))
    if deep:
        # the busy loop at the bottom of the recursion, not the way down
        deep.sort(key=lambda s: prof.stacks[(s["stream"], s["stack"])]["missing"])
        st = prof.stacks[(deep[-1]["stream"], deep[-1]["stack"])]
        fr = prof.frames(deep[-1])
        total = len(fr) + st["missing"]
        c.ok(st["flags"] & 1 and len(fr) == 512 and total == 5002,
             "capped stack: %d frames + %d missing = %d (want 512 + 4490 = 5002), flags %#x"
             % (len(fr), st["missing"], total, st["flags"]))
        c.ok(all(f[0]["qualname"] == "rec" for f in fr), "every kept frame is rec()")


def sc_exec(c, py, ver, tmp):
    path, prof = c.record(py, EXEC, tmp, "exec")
    n = sum(1 for s in prof.samples for fr in [prof.frames(s)]
            if fr and fr[0][0]["qualname"] == "burner" and fr[0][0]["file"] == "<string>")
    c.ok(n > 500, "exec() code: burner in <string> (%d samples)" % n)


def sc_threads(c, py, ver, tmp, mode):
    path, prof = c.record(py, THREADS, tmp, "threads", mode=mode)
    names = collections.Counter()
    idle = collections.Counter()
    leaf = collections.defaultdict(collections.Counter)
    for s in prof.samples:
        n = prof.threads.get((s["stream"], s["tid"]), "?")
        names[n] += 1
        idle[n] += s["flags"] & 1
        fr = prof.frames(s)
        leaf[n][fr[0][0]["qualname"] if fr else None] += 1
    for want in ("busy-0", "busy-1", "sleepy-0", "sleepy-1"):
        c.ok(any(n == want for (_, _), n in prof.threads.items()), "%s: thread %s is named" % (mode, want))
    busy = names["busy-0"] + names["busy-1"]
    c.ok(leaf["busy-0"]["burn"] > 0.9 * names["busy-0"] > 0, "%s: busy-0 runs burn() %s" % (mode, dict(leaf["busy-0"])))
    if mode == "cpu":
        sleepy = names["sleepy-0"] + names["sleepy-1"]
        c.ok(busy > 1500 and sleepy < 0.05 * busy, "cpu: busy threads %d samples, sleeping %d" % (busy, sleepy))
    else:
        for n in ("sleepy-0", "sleepy-1"):
            c.ok(names[n] > 700 and idle[n] > 0.9 * names[n] and leaf[n]["sleeper"] > 0.9 * names[n],
                 "wall: %s has %d samples, %d idle, in sleeper() %d" % (n, names[n], idle[n], leaf[n]["sleeper"]))
        c.ok(names["busy-0"] > 500, "wall: busy-0 has %d samples" % names["busy-0"])


def sc_child(c, py, ver, tmp):
    path, prof = c.record(py, CHILD, tmp, "child")
    per = collections.Counter()
    for s in prof.samples:
        fr = prof.frames(s)
        if fr and fr[0][0]["qualname"] == "child_burn":
            per[s["stream"]] += 1
    pids = {prof.processes[st]["pid"] for st in per}
    parent = [p["pid"] for p in prof.processes.values() if p.get("pid") and p["pid"] not in pids]
    c.ok(len(prof.processes) >= 2 and len(per) == 1 and sum(per.values()) > 500 and parent,
         "child process profiled under its own pid %s (%d samples), parent %s" % (pids, sum(per.values()), parent))


def sc_churn(c, py, ver, tmp, mode, repeat):
    bad = 0
    for i in range(repeat):
        path, prof = c.record(py, CHURN, tmp, "churn", mode=mode)
        bad += not prof.samples
    c.ok(bad == 0, "%s: %d runs with threads starting and ending, none failed" % (mode, repeat))


# ---- interpreters ----------------------------------------------------------------

def find_pythons():
    found = []
    if os.access("/usr/bin/python3", os.X_OK):
        found.append("/usr/bin/python3")
    root = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    if shutil.which("pyenv"):
        r = subprocess.run(["pyenv", "root"], stdout=subprocess.PIPE, universal_newlines=True)
        if r.returncode == 0 and r.stdout.strip():
            root = r.stdout.strip()
    found += sorted(glob.glob(os.path.join(root, "versions", "*", "bin", "python")))
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--strata", default=os.path.join(ROOT, "build", "bin", "strata"))
    ap.add_argument("--python", action="append", help="interpreter to check (repeatable)")
    ap.add_argument("--only", action="append", help="scenario to run (repeatable)")
    ap.add_argument("--repeat", type=int, default=3, help="runs of the thread churn test per mode")
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args()
    if not os.access(a.strata, os.X_OK):
        sys.exit("check_versions: %s not found: build first (make)" % a.strata)
    c = Checker(a.strata, a.verbose)
    pythons = a.python or find_pythons()
    seen_minor = set()
    summary = []
    for py in pythons:
        try:
            full = pyflavour(py)
        except (OSError, subprocess.CalledProcessError):
            summary.append((py, "skipped: does not run"))
            continue
        ver = tuple(int(x) for x in full.split("."))
        minor = "%d.%d" % ver[:2]
        if minor not in MINORS:
            continue
        seen_minor.add(minor)
        print("== %s (%s)" % (full, py))
        before = c.failures, c.checks
        tmp = tempfile.mkdtemp(prefix="strata-versions-")
        scen = [
            ("split", lambda: sc_split(c, py, ver, tmp)),
            ("hotline", lambda: sc_hotline(c, py, ver, tmp)),
            ("names", lambda: sc_names(c, py, ver, tmp)),
            ("gencoro", lambda: sc_gencoro(c, py, ver, tmp)),
            ("except", lambda: sc_except(c, py, ver, tmp)),
            ("recurse", lambda: sc_recurse(c, py, ver, tmp)),
            ("exec", lambda: sc_exec(c, py, ver, tmp)),
            ("threads", lambda: sc_threads(c, py, ver, tmp, "cpu")),
            ("wall", lambda: sc_threads(c, py, ver, tmp, "wall")),
            ("child", lambda: sc_child(c, py, ver, tmp)),
            ("churn", lambda: (sc_churn(c, py, ver, tmp, "cpu", a.repeat),
                               sc_churn(c, py, ver, tmp, "wall", a.repeat))),
        ]
        if ver >= (3, 12):
            scen.append(("perf", lambda: sc_split(c, py, ver, tmp, ("-X", "perf"), "split -X perf")))
        if ver >= (3, 13):
            scen.append(("perf_jit", lambda: sc_split(c, py, ver, tmp, ("-X", "perf_jit"), "split -X perf_jit")))
        if ver >= (3, 14) and has_jit(py):
            # CPython's own experimental JIT (--enable-experimental-jit=yes-off,
            # as Debian builds 3.14 and 3.15), switched on: traces of machine
            # code run inside the eval loop's activation and keep the frames'
            # instruction pointers where the interpreter would.
            scen.append(("cpython_jit", lambda: sc_split(c, py, ver, tmp, (), "split PYTHON_JIT=1",
                                                         {"PYTHON_JIT": "1"})))
        for name, fn in scen:
            if a.only and name not in a.only:
                continue
            print("  %s" % name)
            fn()
        shutil.rmtree(tmp, ignore_errors=True)
        nf, nc = c.failures - before[0], c.checks - before[1]
        summary.append((py, "%s: %d/%d checks passed" % (full, nc - nf, nc)))
    print()
    for py, s in summary:
        print("%-50s %s" % (py, s))
    for m in MINORS:
        if m not in seen_minor and not a.python:
            print("%-50s skipped: no Python %s on this machine" % ("python" + m, m))
    print("%d checks, %d failed" % (c.checks, c.failures))
    sys.exit(1 if c.failures else 0)


if __name__ == "__main__":
    main()
