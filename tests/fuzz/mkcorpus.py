#!/usr/bin/python3
"""mkcorpus.py — makes the seed corpus of every fuzz target,
tests/fuzz/corpus/NAME/, from real inputs (`make fuzz-corpus` runs it):

  reader         profiles of the functional tests' programs, recorded with
                 build/bin/strata (cpu, wall, --native, --objects, asyncio
                 tasks, Numba with --jit-lines, CPython 3.12's -X perf) and the unit
                 tests' recordings, each as a file and as pieces
                 (mkcorpus.c), and synthetic records; pprof shares them
  cfi            .eh_frame of libpython, NumPy's and Numba's extension
                 modules and Numba's JIT images (the first entries of
                 each, whole), the same behind an .eh_frame_hdr made for
                 them as the linker makes one, and a .debug_frame
  cfisynth       the machine code of Numba's images and of a C fixture
                 (with and without frame pointers), with their functions
  dwline         .debug_line (with .debug_line_str, .debug_str) of a C
                 fixture built as DWARF 2, 4 and 5, and of Numba's images
  jitelf         Numba's in-memory images: the unit tests' fixtures and
                 those a --jit-lines recording stored
  jitpoll        a target's memory holding a GDB JIT descriptor with one
                 and two registered images
  perfmap        the perf map and jitdump CPython 3.12's -X perf and 3.13's
                 -X perf_jit write, and those strata record --perf-map
                 writes for Numba code, fed in pieces with polls between
  elfsect        small real ELF files (NumPy, Numba, a C fixture)
  ctl            the requests strata sends and the replies a live agent
                 gives (asked over its socket)

Seeds are cut to whole entries, lines or records below 64 KiB (the
targets' -max_len); the whole corpus stays a few hundred KiB. What this
machine lacks (pyenv's 3.12/3.13, Numba) is left out with a line saying
so. Existing seeds are replaced; regress-* files (inputs that once made a
target fail, kept as regression tests) are left alone.

usage: tests/fuzz/mkcorpus.py [TARGET...]   (default: all)
"""
import glob
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests/fuzz/corpus"
BUILD = ROOT / os.environ.get("BUILD", "build")  # relative to the tree, or absolute
STRATA = BUILD / "bin/strata"
MKCORPUS = BUILD / "fuzz/mkcorpus"
PROGRAMS = ROOT / "tests/func/programs"
FIXTURES = ROOT / "tests/unit/fixtures"
PY = "/usr/bin/python3"
MAX = 60 * 1024
WORK = None  # a scratch directory, made by main()


def note(msg):
    print("mkcorpus: %s" % msg)


def pyenv(minor):
    root = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    found = sorted(glob.glob("%s/versions/%s.*/bin/python%s" % (root, minor, minor)))
    return found[-1] if found else None


def have_numba():
    return subprocess.run([PY, "-c", "import numba"], capture_output=True).returncode == 0


def start(target):
    """The target's directory, emptied of everything but regress-*."""
    d = CORPUS / target
    d.mkdir(parents=True, exist_ok=True)
    for f in d.iterdir():
        if not f.name.startswith("regress-"):
            f.unlink()
    return d


def seed(d, name, data):
    data = bytes(data)
    if len(data) > 64 * 1024:
        note("%s/%s: %d bytes, over 64 KiB: left out" % (d.name, name, len(data)))
        return
    (d / name).write_bytes(data)


# ---- ELF -----------------------------------------------------------------------

def sections(path):
    """name -> (addr, offset, size, type) of a 64-bit little-endian ELF file."""
    b = Path(path).read_bytes()
    if b[:4] != b"\x7fELF" or b[4] != 2:
        return {}
    shoff, = struct.unpack_from("<Q", b, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", b, 0x3a)
    sh = [struct.unpack_from("<IIQQQQIIQQ", b, shoff + i * shentsize) for i in range(shnum)]
    stroff, strsize = sh[shstrndx][4], sh[shstrndx][5]
    out = {}
    for s in sh:
        end = b.index(b"\0", stroff + s[0])
        out[b[stroff + s[0]:end].decode()] = (s[3], s[4], s[5], s[1])
    return out


def section(path, name):
    s = sections(path).get(name)
    if not s or s[3] == 8:  # SHT_NOBITS
        return None, None
    return s[0], Path(path).read_bytes()[s[1]:s[1] + s[2]]


def functions(path, text):
    """(offset in `text`, size) of the function symbols defined in the
    section called `text`."""
    b = Path(path).read_bytes()
    shoff, = struct.unpack_from("<Q", b, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", b, 0x3a)
    sh = [struct.unpack_from("<IIQQQQIIQQ", b, shoff + i * shentsize) for i in range(shnum)]
    names = sh[shstrndx][4]
    idx = [i for i, h in enumerate(sh) if b[names + h[0]:b.index(b"\0", names + h[0])] == text.encode()]
    out = []
    for h in sh:
        if h[1] != 2 or not idx:  # SHT_SYMTAB
            continue
        for k in range(h[5] // 24):
            _, info, _, shndx, value, size = struct.unpack_from("<IBBHQQ", b, h[4] + 24 * k)
            if info & 0xf == 2 and shndx == idx[0] and size:
                out.append((value - (sh[idx[0]][3] if sh[idx[0]][3] and value >= sh[idx[0]][3] else 0), size))
    return sorted(out)


def uleb(b, i):
    v = shift = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7f) << shift
        shift += 7
        if not c & 0x80:
            return v, i


def entries(eh):
    """(offset, length incl. header, id) of each .eh_frame entry."""
    i = 0
    while i + 8 <= len(eh):
        n, = struct.unpack_from("<I", eh, i)
        if n == 0 or n == 0xffffffff or i + 4 + n > len(eh):
            return
        cid, = struct.unpack_from("<I", eh, i + 4)
        yield i, 4 + n, cid
        i += 4 + n


def cut(eh, limit):
    """The first entries of an .eh_frame, whole, up to `limit` bytes, with
    every FDE's CIE inside the cut, then a terminator."""
    end = 0
    for off, n, cid in entries(eh):
        if off + n > limit or (cid and off + 4 - cid < 0):
            break
        end = off + n
    return eh[:end] + b"\0\0\0\0"


def fde_starts(eh, vaddr):
    """(initial location, FDE address) of each FDE, for an .eh_frame at
    vaddr whose CIEs use pcrel|sdata4 pointers (what gcc and LLVM write)."""
    out = []
    for off, n, cid in entries(eh):
        if not cid:
            continue
        cie = off + 4 - cid
        aug_end = eh.index(b"\0", cie + 9)
        if eh[cie + 9:aug_end] != b"zR":
            continue
        i = aug_end + 1
        _, i = uleb(eh, i)           # code alignment
        _, i = uleb(eh, i)           # data alignment (sleb, same length)
        i += 1                       # return address register
        _, i = uleb(eh, i)           # augmentation length
        if eh[i] != 0x1b:
            continue
        rel, = struct.unpack_from("<i", eh, off + 8)
        out.append(((vaddr + off + 8 + rel) & (2**64 - 1), vaddr + off))
    return sorted(out)


def eh_frame_hdr(eh, base):
    """[.eh_frame_hdr][.eh_frame] at `base`, as a linker lays them out:
    pcrel eh_frame_ptr, udata4 count, datarel sdata4 table."""
    eh_addr = base + 12 + 8 * len(fde_starts(eh, 0))
    starts = fde_starts(eh, eh_addr)
    h = struct.pack("<BBBBiI", 1, 0x1b, 0x03, 0x3b, eh_addr - (base + 4), len(starts))
    for loc, fde in starts:
        h += struct.pack("<ii", loc - base, fde - base)
    return h + eh, starts


# ---- targets -------------------------------------------------------------------

def record(name, opts, cmd, env=None):
    out = WORK / ("%s.strata" % name)
    e = dict(os.environ, **(env or {}))
    r = subprocess.run([str(STRATA), "record", "-q", "-o", str(out)] + opts + ["--"] + cmd,
                       env=e, capture_output=True, text=True, cwd=WORK)
    if r.returncode != 0 or not out.exists():
        note("recording %s failed: %s" % (name, r.stderr.strip()[-300:]))
        return None
    return out


def profiles():
    """The recordings reader and pprof start from."""
    got = []
    split = str(PROGRAMS / "split.py")
    for name, opts, cmd, env in [
        ("cpu", ["-F", "400"], [PY, split, "0.3"], None),
        ("wall", ["--mode", "wall", "-F", "200"], [PY, str(PROGRAMS / "threads4.py"), "0.3"], None),
        ("native", ["--native", "-F", "200"], [PY, split, "0.15"], None),
        ("objects", ["--objects", "-F", "200"], [PY, str(PROGRAMS / "objects.py"), "dicts"], None),
        ("asyncio", ["--mode", "wall", "-F", "200"], [PY, str(PROGRAMS / "async_tasks.py"), "wait", "5"], None),
    ]:
        got.append((name, record(name, opts, cmd, env)))
    if have_numba():
        got.append(("jit", record("jit", ["--jit-lines", "-F", "200"],
                                  [PY, str(PROGRAMS / "jit/hotline.py"), "0.2"])))
    else:
        note("no Numba: no profile with JIT images")
    py312 = pyenv("3.12")
    if py312:
        got.append(("perftramp", record("perftramp", ["--native", "-F", "200"],
                                        [py312, "-X", "perf", str(PROGRAMS / "perftramp.py"), "0.2"])))
    else:
        note("no CPython 3.12 under pyenv: no profile with perf-map records")
    # The unit tests' recordings (small.py, deep.py, wall.py).
    got += [(f.stem, f) for f in sorted(FIXTURES.glob("*.strata"))]
    return [(n, p) for n, p in got if p]


def make_reader(recs):
    """reader's seeds, which pprof shares (fuzz.mk)."""
    d = start("reader")
    subprocess.run([str(MKCORPUS), str(d)] + ["%s=%s" % (n, p) for n, p in recs],
                   check=True, capture_output=True)


def eh_sources():
    """(name, ELF path) of the objects whose CFI seeds cfi and elfsect."""
    libpy = sorted(glob.glob("/usr/lib/x86_64-linux-gnu/libpython3.*.so.1.0"))
    out = [("libpython", libpy[-1])] if libpy else []
    try:
        import numpy
        core = Path(numpy.__file__).parent / "core"
        for pat in ("_multiarray_umath.*.so", "_operand_flag_tests.*.so"):
            out += [("numpy" + pat.split(".")[0], p) for p in sorted(core.glob(pat))[:1]]
    except ImportError:
        note("no NumPy: its extension modules left out")
    spec = subprocess.run([PY, "-c", "import numba, os; print(os.path.dirname(numba.__file__))"],
                          capture_output=True, text=True)
    if spec.returncode == 0:
        nb = Path(spec.stdout.strip())
        for pat in ("_helperlib.*.so", "_dynfunc.*.so"):
            out += [("numba" + pat.split(".")[0], p) for p in sorted(nb.glob(pat))[:1]]
    return out


def fixture_so(name, flags):
    """The native unit tests' C fixture, built with `flags`."""
    out = WORK / name
    subprocess.run(["cc", "-O2", "-fPIC", "-shared", "-o", str(out), str(ROOT / "tests/unit/fixture_cfisynth.c")]
                   + flags, check=True)
    return out


def make_cfi(images):
    d = start("cfi")
    for name, path in eh_sources() + [("jit%d" % i, p) for i, p in enumerate(images[:2])]:
        addr, eh = section(path, ".eh_frame")
        if not eh:
            continue
        part = cut(eh, 6 * 1024)
        seed(d, "%s-eh_frame" % name, b"\0" + part)
        mem, starts = eh_frame_hdr(part, 0x40000000)  # fuzz_cfi.c: VADDR
        if starts:
            pc = starts[len(starts) // 2][0] + 4
            seed(d, "%s-memory" % name, b"\2" + struct.pack("<IQ", 0, pc) + mem)
    dbg = fixture_so("debug_frame.so", ["-g", "-fno-asynchronous-unwind-tables"])
    _, df = section(dbg, ".debug_frame")
    if df:
        seed(d, "fixture-debug_frame", b"\1" + df)


def make_cfisynth(images):
    """Code without CFI and its functions (fuzz_cfisynth.c): Numba's
    .text, and a C fixture's built without frame pointers and with them."""
    d = start("cfisynth")
    objs = [("jit%d" % i, p) for i, p in enumerate(images[:3])]
    objs += [("fixture", fixture_so("synth.so", ["-fno-asynchronous-unwind-tables"])),
             ("fixture-fp", fixture_so("synth-fp.so", ["-fno-omit-frame-pointer"]))]
    for name, path in objs:
        _, text = section(path, ".text")
        funcs = [(o, n) for o, n in functions(path, ".text") if o + n <= min(len(text or b""), 0xffff)][:8]
        if not text or not funcs:
            continue
        end = max(o + n for o, n in funcs)
        seed(d, name, bytes([len(funcs) - 1]) + b"".join(struct.pack("<HH", o, n) for o, n in funcs)
             + text[:end])


def make_dwline(images):
    d = start("dwline")
    objs = [("dwarf%d" % v, fixture_so("dwarf%d.so" % v, ["-g", "-gdwarf-%d" % v])) for v in (2, 4, 5)]
    objs += [("jit%d" % i, p) for i, p in enumerate(images) if section(p, ".debug_line")[1]][:2]
    for name, path in objs:
        _, line = section(path, ".debug_line")
        if not line:
            continue
        _, ls = section(path, ".debug_line_str")
        _, st = section(path, ".debug_str")
        ls, st = ls or b"", st or b""
        if len(ls) + len(st) + len(line) > MAX:
            st = st[:MAX - len(ls) - len(line)] if len(ls) + len(line) < MAX else b""
        seed(d, name, struct.pack("<HH", len(ls), len(st)) + ls + st + line)


def jit_images():
    """Numba's images: the unit tests' fixtures, and what a --jit-lines
    recording stored (the reader's "jit" profile)."""
    imgs = [FIXTURES / n for n in ("numba_kernel.jit.o", "numba-kern-debuginfo.o", "numba-kern.o")]
    prof = WORK / "jit.strata"
    if prof.exists():
        subprocess.run([str(MKCORPUS), "--jit-images", str(WORK), "recorded", str(prof)],
                       check=True, capture_output=True)
        rec = sorted(WORK.glob("recorded-*"), key=lambda p: p.stat().st_size)
        imgs += rec[:3]
    return [p for p in imgs if p.exists()]


def make_jitelf(images):
    d = start("jitelf")
    for p in images:
        seed(d, p.name, p.read_bytes())


def make_jitpoll(images):
    """Memory at BASE: descriptor, entries, images (fuzz_jitpoll.c)."""
    d = start("jitpoll")
    base = 0x10000

    def memory(imgs, flags):
        desc = 0
        entries_at = 32
        img_at = entries_at + 32 * len(imgs)
        mem = bytearray(img_at)
        addrs = []
        for im in imgs:
            img_at = (len(mem) + 7) & ~7
            mem += b"\0" * (img_at - len(mem)) + im
            addrs.append((base + img_at, len(im)))
        for k, (a, n) in enumerate(addrs):
            nxt = base + entries_at + 32 * (k + 1) if k + 1 < len(addrs) else 0
            prev = base + entries_at + 32 * (k - 1) if k else 0
            struct.pack_into("<QQQQ", mem, entries_at + 32 * k, nxt, prev, a, n)
        struct.pack_into("<IIQQ", mem, desc, 1, 1, base + entries_at, base + entries_at)
        return bytes([flags]) + struct.pack("<I", desc) + bytes(mem)

    small = sorted(images, key=lambda p: p.stat().st_size)
    if small:
        seed(d, "one-named", memory([small[0].read_bytes()], 7))
        seed(d, "one-found", memory([small[0].read_bytes()], 6))
    if len(small) > 1:
        seed(d, "two", memory([small[0].read_bytes(), small[1].read_bytes()], 7))


def pieces(parts):
    """fuzz_perfmap.c's input: [op][u16 len][bytes]..."""
    out = b""
    for op, data in parts:
        out += struct.pack("<BH", op, len(data)) + data
    return out


def cut_lines(text, limit):
    return text[:text.rfind(b"\n", 0, limit) + 1] if len(text) > limit else text


def cut_dump(dump, limit):
    """A jitdump's header and its first whole records, up to `limit`."""
    if len(dump) < 40:
        return dump
    hsize, = struct.unpack_from("<I", dump, 8)
    end = i = hsize
    while i + 16 <= len(dump):
        total, = struct.unpack_from("<I", dump, i + 4)
        if total < 16 or i + total > limit:
            break
        i += total
        end = i
    return dump[:end]


def perf_files():
    """(name, perf map, jitdump) written by real programs."""
    out = []
    tramp = str(PROGRAMS / "perftramp.py")
    for minor, flag in (("3.12", "perf"), ("3.13", "perf_jit")):
        py = pyenv(minor)
        if not py:
            note("no CPython %s under pyenv: no -X %s files" % (minor, flag))
            continue
        p = subprocess.Popen([py, "-X", flag, tramp, "0.1"], cwd=WORK)
        p.wait()
        pmap, dump = Path("/tmp/perf-%d.map" % p.pid), Path("/tmp/jit-%d.dump" % p.pid)
        out.append(("py%s" % minor.replace(".", ""), pmap.read_bytes() if pmap.exists() else b"",
                    dump.read_bytes() if dump.exists() else b""))
        for f in (pmap, dump):
            if f.exists():
                f.unlink()
    if have_numba():
        jd = WORK / "jitdumps"
        jd.mkdir(exist_ok=True)
        r = subprocess.run([str(STRATA), "record", "-q", "-o", str(WORK / "perfmap.strata"), "--perf-map",
                            "--jit-lines", "--", PY, str(PROGRAMS / "numba_perf.py"), "0.1"],
                           env=dict(os.environ, STRATA_JITDUMP_DIR=str(jd)), capture_output=True, cwd=WORK)
        dumps = list(jd.glob("jit-*.dump"))
        if r.returncode == 0 and dumps:
            pid = dumps[0].name[4:-5]
            pmap = Path("/tmp/perf-%s.map" % pid)
            out.append(("strata-numba", pmap.read_bytes() if pmap.exists() else b"", dumps[0].read_bytes()))
            if pmap.exists():
                pmap.unlink()
    return out


def make_perfmap(recs):
    d = start("perfmap")
    for name, pmap, dump in perf_files():
        pmap, dump = cut_lines(pmap, 8 * 1024), cut_dump(dump, 24 * 1024)
        half = pmap[:pmap.rfind(b"\n", 0, len(pmap) // 2) + 1]
        first = cut_dump(dump, max(len(dump) // 2, 41))
        seed(d, name, pieces([(0, half), (1, first), (2, b""), (0, pmap[len(half):]),
                              (1, dump[len(first):]), (2, b""), (3, pmap[:len(half)]), (4, dump), (2, b"")]))
        lines = pmap.splitlines()
        if lines:
            seed(d, name + "-line", pieces([(7, lines[0])]))
    # The trampolines the helper names from the target's memory: CPython
    # 3.12's (endbr64; sub $8,%rsp; call *%rcx; add $8,%rsp; ret) and
    # 3.14's (endbr64; push %rbp; mov %rsp,%rbp; call *%rcx; pop %rbp;
    # ret), 16-byte slots, with the return addresses after their calls.
    t312 = bytes.fromhex("f30f1efa4883ec08ffd14883c408c3") + b"\xcc"
    t314 = bytes.fromhex("f30f1efa554889e5ffd15dc3") + b"\xcc" * 4
    mem = t312 + t314
    ras = struct.pack("<QQ", 10, 16 + 10) + b"\0" * 16
    seed(d, "trampolines", pieces([(5, mem + ras)]))
    # REC_PERFMAP bodies as a recording stored them.
    for name, prof in recs:
        if name == "perftramp":
            subprocess.run([str(MKCORPUS), "--bodies", "15", str(WORK), "perfmap", str(prof)],
                           check=True, capture_output=True)
            for f in sorted(WORK.glob("perfmap-*"))[:2]:
                seed(d, "record-" + f.name, pieces([(6, f.read_bytes()[:4000])]))


def make_elfsect():
    d = start("elfsect")
    for name, path in eh_sources():
        if Path(path).stat().st_size <= 64 * 1024:
            seed(d, name, Path(path).read_bytes())
    seed(d, "fixture-debug_frame", fixture_so("elf-debug_frame.so",
                                              ["-g0", "-fno-asynchronous-unwind-tables", "-s"]).read_bytes())
    seed(d, "fixture", fixture_so("elf.so", ["-g0"]).read_bytes())
    for p in (FIXTURES / "numba-kern.o",):
        seed(d, p.name, p.read_bytes())


REQUESTS = ["status\n", "start\n", "stop\n", "flush\n", "detach\n", "dump\n", "bogus\n",
            "attach\npath=/tmp/app.strata\npaused=1\nrate=1000\n", "attach\ncreate=1\npath=/tmp/a b.strata\n",
            "send\ndir=/tmp/spool\nevery=15000\nqueue=8\n", "send\nstop=1\n",
            "attach\npath=/tmp/app.strata\nsend=/tmp/spool\nevery=5000\nqueue=4\n"]


def agent_replies():
    """What a live agent (standby, as STRATA_AGENT=1 starts it) answers."""
    agent = BUILD / "lib/strata/libstrata-agent.so"
    env = dict(os.environ, LD_PRELOAD=str(agent), STRATA_AGENT="1")
    p = subprocess.Popen([PY, "-c", "import time; time.sleep(20)"], env=env)
    replies = []
    try:
        xdg = os.environ.get("XDG_RUNTIME_DIR")
        socks = ([Path(xdg) / "strata" / ("%d.sock" % p.pid)] if xdg else []) + \
            [Path("/tmp/strata-%d/%d.sock" % (os.getuid(), p.pid))]
        for _ in range(100):
            if any(s.exists() for s in socks):
                break
            time.sleep(0.05)
        sock = next((s for s in socks if s.exists()), None)
        if not sock:
            note("the agent's control socket did not appear: no replies")
            return []
        for req in ("status\n", "start\n", "flush\n", "bogus\n", "attach\nrate=0\n"):
            c = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            c.connect(str(sock))
            c.send(req.encode())
            replies.append(c.recv(8192))
            c.close()
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait()
    return replies


def make_ctl():
    d = start("ctl")
    for i, r in enumerate(REQUESTS):
        seed(d, "request-%d" % i, bytes([i & 1]) + r.encode())
    for i, r in enumerate(agent_replies()):
        seed(d, "reply-%d" % i, b"\0" + r)


def main(argv):
    global WORK
    WORK = Path(tempfile.mkdtemp(prefix="strata-corpus-"))
    want = set(argv) or {"reader", "cfi", "cfisynth", "dwline", "jitelf", "jitpoll", "perfmap", "elfsect", "ctl"}
    for tool in (STRATA, MKCORPUS):
        if not tool.exists():
            sys.exit("mkcorpus: %s is missing: run make fuzz-corpus" % tool)
    try:
        recs = profiles() if want & {"reader", "jitelf", "jitpoll", "cfi", "dwline", "perfmap"} else []
        images = jit_images()
        if "reader" in want:
            make_reader(recs)
        if "cfi" in want:
            make_cfi(images)
        if "cfisynth" in want:
            make_cfisynth(images)
        if "dwline" in want:
            make_dwline(images)
        if "jitelf" in want:
            make_jitelf(images)
        if "jitpoll" in want:
            make_jitpoll(images)
        if "perfmap" in want:
            make_perfmap(recs)
        if "elfsect" in want:
            make_elfsect()
        if "ctl" in want:
            make_ctl()
    finally:
        shutil.rmtree(WORK, ignore_errors=True)
    for t in sorted(want):
        files = list((CORPUS / t).iterdir())
        note("%s: %d seeds, %d bytes" % (t, len(files), sum(f.stat().st_size for f in files)))


if __name__ == "__main__":
    main(sys.argv[1:])
