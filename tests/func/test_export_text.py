"""Exports read by their real consumers: callgrind (callgrind_annotate),
collapsed stacks (Debian's flamegraph.pl) and pprof (Go's `go tool pprof`,
and `protoc --decode` with our own description of profile.proto).

Every number a consumer prints is compared with the known answer: the
profile's own report (`strata report --json`) for recorded programs, or the
answer computed by tests/tools/synthprof for synthetic profiles (several
events, recursion, native and JIT frames). scripts/deps.sh installs every
consumer; one that is missing fails the tests that need it, naming it.
"""
import codecs
import html
import json
import os
import re
import subprocess
import tempfile
from collections import defaultdict
from pathlib import Path

import pytest

from conftest import BUILD, PROGRAMS, STRATA, chunk_spans, debian_interp, need_tool, strata

FLAMEGRAPH = Path("/usr/share/perl5/Devel/NYTProf/flamegraph.pl")
SYNTHPROF = BUILD / "tests" / "synthprof"
PROTO_DIR = Path(__file__).resolve().parent / "data"
# go tool pprof is built on first use (about a minute, once per machine).
GO_TIMEOUT = 900


# ---- consumers --------------------------------------------------------------


def need_callgrind_annotate():
    need_tool("callgrind_annotate", "Debian package valgrind; scripts/deps.sh")


def need_flamegraph():
    need_tool("perl", "Debian package perl")
    if not FLAMEGRAPH.exists():
        pytest.fail("flamegraph.pl is not installed (%s, Debian package libdevel-nytprof-perl; scripts/deps.sh)"
                    % FLAMEGRAPH)


def need_go():
    need_tool("go", "Debian package golang-go; scripts/deps.sh: `go tool pprof` checks the pprof export")


def need_protoc():
    need_tool("protoc", "Debian package protobuf-compiler; scripts/deps.sh")


def need_synthprof():
    if not SYNTHPROF.exists():
        pytest.fail("%s is missing: build it with `make unit`" % SYNTHPROF)


def run(cmd, cwd=None, timeout=300):
    return subprocess.run([str(c) for c in cmd], capture_output=True, cwd=cwd, timeout=timeout)


def convert(src, fmt, out, *opts):
    r = strata("convert", src, "-f", fmt, "-o", out, *opts)
    assert r.returncode == 0, r.stderr
    return r


# callgrind_annotate --------------------------------------------------------


def _cc_tokens(text):
    """Counts of one callgrind_annotate cost column block: "1,234 (5.6%)",
    "0" or "." per event."""
    text = re.sub(r"\(\s*-?[\d.]+%\)", " ", text)
    return [0 if t == "." else int(t.replace(",", "")) for t in text.split()]


def ca_warned(out):
    """callgrind_annotate's own warnings ("@@ WARNING @@" banners and
    "WARNING: ..." lines); the annotated source it prints may contain the
    word itself (warnings.py does)."""
    return "@@ WARNING @@" in out or re.search(r"^WARNING:", out, re.M) is not None


def callgrind_annotate(path, cwd, inclusive=True):
    """Runs callgrind_annotate the way the issue asks and parses its
    function table (with --tree=both: callers, the function, callees) and
    its annotated source. Fails on any warning."""
    # It strips its working directory (`pwd`, which trusts $PWD) from file
    # names: run it in an empty directory of its own, so names stay whole.
    # Its annotated source shows the lines within --context of a line with
    # self cost, so a call alone further away (split.py's call of main) is
    # left out unless a sample fell on that line too: all lines, always.
    cwd = Path(tempfile.mkdtemp(dir=cwd))
    r = subprocess.run(["callgrind_annotate", "--inclusive=%s" % ("yes" if inclusive else "no"), "--tree=both",
                        "--auto=yes", "--threshold=100", "--context=100000", str(path)], capture_output=True, cwd=cwd,
                       env=dict(os.environ, PWD=str(cwd)), timeout=300)
    out = r.stdout.decode("utf-8")
    err = r.stderr.decode("utf-8")
    assert r.returncode == 0, err
    assert not ca_warned(out) and not err.strip(), "callgrind_annotate warned:\n%s\n%s" % (err, out)
    events = re.search(r"^Events recorded:\s+(.*)$", out, re.M).group(1).split()
    funcs, tree = {}, defaultdict(dict)
    sections = out.split("-" * 80 + "\n")
    # The function table is the section after the "file:function" header.
    idx = next(i for i, s in enumerate(sections) if s.rstrip().endswith("file:function"))
    current = None
    for line in sections[idx + 1].splitlines():
        m = re.match(r"^(.*?)  ([*<>])\s+(.*?)(?: \((\d[\d,]*)x\))?(?: \[(.*)\])?$", line)
        if not m:
            continue
        cost, mark, name, ob = _cc_tokens(m.group(1)), m.group(2), m.group(3), m.group(5)
        cost += [0] * (len(events) - len(cost))
        if mark == "*":
            funcs[name] = {"cost": cost, "ob": ob}
            current = name
        elif mark == ">":
            tree[current][name] = cost
    lines = defaultdict(lambda: [0] * len(events))  # (file, line) -> self cost
    calls = defaultdict(lambda: [0] * len(events))  # (file, line) -> call cost
    for i, sec in enumerate(sections):
        m = re.match(r"^-- Auto-annotated source: (.*)$", sec.strip())
        if not m:
            continue
        fname, body = m.group(1), sections[i + 1].split("\n")
        width = len(body[0])  # the events header is as wide as the cost columns
        lineno, last = 1, None
        for text in body[2:]:
            mk = re.match(r"^-- line (\d+) -+$", text)
            if mk:
                lineno = int(mk.group(1))
                continue
            if re.match(r"^\s*$", text) or text.startswith("--"):
                continue
            # Call lines: their costs may be wider than the file's columns.
            mc = re.match(r"^([\d,.\s()%]+?) => ", text)
            cc, rest = text[:width], text[width:]
            if mc:
                c = _cc_tokens(mc.group(1))
                for e, v in enumerate(c):
                    calls[(fname, last)][e] += v
                continue
            if rest.startswith(" <"):
                continue
            c = _cc_tokens(cc)
            if any(c):
                lines[(fname, lineno)] = c + [0] * (len(events) - len(c))
            last = lineno
            lineno += 1
    return {"events": events, "funcs": funcs, "tree": tree, "lines": dict(lines), "calls": dict(calls), "out": out}


# flamegraph.pl ---------------------------------------------------------------


def flamegraph(folded, svg):
    """Renders folded stacks with Debian's flamegraph.pl; fails on any
    warning. Returns [(frame, samples)] from the SVG's <title>s."""
    r = run(["perl", "-w", FLAMEGRAPH, folded])
    assert r.returncode == 0 and not r.stderr.strip(), "flamegraph.pl: %s" % r.stderr.decode(errors="replace")
    Path(svg).write_bytes(r.stdout)
    frames = []
    # Titles hold whole names; the text under them is cut by bytes, so it
    # may end in half a UTF-8 character: only titles are decoded.
    for t in re.findall(rb"<title>(.*?)</title>", r.stdout, re.S):
        m = re.match(r"^(.*) \(([\d,]+) samples?, [\d.]+%\)$", html.unescape(t.decode("utf-8")), re.S)
        assert m, t
        if m.group(1) != "all":
            frames.append((m.group(1), int(m.group(2).replace(",", ""))))
    return frames


def fg_label(name):
    """flamegraph.pl shows '<' and '>' as '(' and ')'."""
    return name.translate(str.maketrans("<>", "()"))


def fg_total(frames, name):
    """Samples under frames of function `name` (labels "name (file:line)"):
    for a function that is not recursive, its total."""
    prefix = fg_label(name) + " ("
    return sum(n for f, n in frames if f.startswith(prefix) or f == fg_label(name))


# go tool pprof and protoc -------------------------------------------------------


def pprof_top(path, *opts):
    """`go tool pprof -top` rows: {name: (flat, cum)}."""
    r = run(["go", "tool", "pprof", "-top", "-nodefraction=0", "-nodecount=100000"] + list(opts) + [path],
            timeout=GO_TIMEOUT)
    out = r.stdout.decode("utf-8")
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    rows, started = {}, False
    for line in out.splitlines():
        if re.match(r"^\s+flat\s+flat%\s+sum%\s+cum\s+cum%", line):
            started = True
            continue
        m = re.match(r"^\s*(\d+)\s+[\d.]+%\s+[\d.]+%\s+(\d+)\s+[\d.]+%\s+(.*)$", line)
        if started and m:
            rows[m.group(3)] = (int(m.group(1)), int(m.group(2)))
    return rows, out, r.stderr.decode(errors="replace")


def parse_textproto(text):
    """protoc's text output as nested dicts of lists."""
    root = {}
    stack = [root]
    for line in text.splitlines():
        s = line.strip()
        if not s:
            continue
        if s.endswith("{"):
            node = {}
            stack[-1].setdefault(s[:-1].strip(), []).append(node)
            stack.append(node)
        elif s == "}":
            stack.pop()
        else:
            k, v = s.split(":", 1)
            v = v.strip()
            if v.startswith('"'):
                v = codecs.escape_decode(v[1:-1].encode("ascii"))[0].decode("utf-8")
            elif v in ("true", "false"):
                v = v == "true"
            else:
                v = int(v)
            stack[-1].setdefault(k, []).append(v)
    return root


def protoc_decode(path):
    """Decodes a gzipped profile.proto with protoc and checks pprof's
    validity rules. Returns the decoded profile with strings resolved where
    convenient."""
    import gzip
    raw = gzip.decompress(Path(path).read_bytes())
    r = subprocess.run(["protoc", "--decode=strata.pprofcheck.Profile", "--proto_path=%s" % PROTO_DIR,
                        "pprof.proto"], input=raw, capture_output=True)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    p = parse_textproto(r.stdout.decode("ascii"))
    strings = p.get("string_table", [])
    assert strings and strings[0] == "", "string_table[0] must be empty"

    def s(i):
        assert 0 <= i < len(strings), "string index %d out of range" % i
        return strings[i]

    def one(msg, key, default=0):
        return msg.get(key, [default])[0]

    types = [(s(one(t, "type")), s(one(t, "unit"))) for t in p["sample_type"]]
    ids = {}
    for table in ("mapping", "location", "function"):
        seen = set()
        for m in p.get(table, []):
            i = one(m, "id")
            assert i != 0, "%s with reserved id 0" % table
            assert i not in seen, "duplicate %s id %d" % (table, i)
            seen.add(i)
        ids[table] = seen
    for m in p.get("mapping", []):
        s(one(m, "filename"))
        s(one(m, "build_id"))
    for f in p.get("function", []):
        for k in ("name", "system_name", "filename"):
            s(one(f, k))
    for loc in p.get("location", []):
        mid = one(loc, "mapping_id")
        assert mid == 0 or mid in ids["mapping"], "location %d: unknown mapping %d" % (one(loc, "id"), mid)
        assert loc.get("line"), "location without a line"
        for ln in loc["line"]:
            assert one(ln, "function_id") in ids["function"]
    for smp in p.get("sample", []):
        assert len(smp.get("value", [])) == len(types), "one value per sample type"
        assert smp.get("location_id"), "sample without locations"
        for lid in smp["location_id"]:
            assert lid in ids["location"], "sample references unknown location %d" % lid
        for lab in smp.get("label", []):
            s(one(lab, "key"))
            s(one(lab, "str"))
    for c in p.get("comment", []):
        s(c)
    s(one(p, "default_sample_type"))
    p["types"] = types
    p["s"] = s
    p["one"] = one
    return p


# ---- recordings shared by the tests --------------------------------------------------


class Recorded:
    def __init__(self, path, cwd):
        self.path = path
        self.cwd = cwd
        r = strata("report", "--json", path)
        assert r.returncode == 0, r.stderr
        self.report = json.loads(r.stdout)

    def func(self, name, file_part=None):
        rows = [f for f in self.report["functions"]
                if f["name"] == name and (file_part is None or file_part in f["file"])]
        assert len(rows) == 1, (name, [f["name"] for f in self.report["functions"][:30]])
        return rows[0]

    def line_self(self):
        """{(file, line): self} summed over functions (what a per-line
        source annotation shows)."""
        out = defaultdict(int)
        for ln in self.report["lines"]:
            out[(ln["file"], ln["line"])] += ln["self"]
        return out


def _record(python, tmp, prog, *args):
    out = tmp / (Path(prog).stem + ".strata")
    r = strata("record", "-o", out, "--", python.exe, PROGRAMS / prog, *args, cwd=tmp)
    assert r.returncode == 0, r.stderr
    return Recorded(out, tmp)


@pytest.fixture(scope="module")
def debian():
    return debian_interp().require()


@pytest.fixture(scope="module")
def split(debian, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("split")
    return _record(debian, tmp, "split.py", "3")


@pytest.fixture(scope="module")
def unusual(debian, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("unusual")
    return _record(debian, tmp, "unusual.py", str(tmp))


@pytest.fixture(scope="module")
def synth_events(tmp_path_factory):
    """The multi-event .strata written with the format encoders, its source
    file (for annotation) and its expected answer."""
    need_synthprof()
    tmp = tmp_path_factory.mktemp("synth")
    src = tmp / "synthetic.py"
    src.write_text("".join("# synthetic source line %d\n" % i for i in range(1, 100)))
    out = tmp / "events.strata"
    r = run([SYNTHPROF, "events", out, src])
    assert r.returncode == 0, r.stderr
    return out, src, json.loads(r.stdout), tmp


def synth_native(fmt, tmp):
    need_synthprof()
    out = tmp / ("native." + fmt)
    r = run([SYNTHPROF, "native", fmt, out])
    assert r.returncode == 0, r.stderr
    return out, json.loads(r.stdout)


def assert_split(heavy, light, what):
    assert heavy > 0 and light > 0, (what, heavy, light)
    pct = 100.0 * heavy / (heavy + light)
    assert 68 <= pct <= 82, "%s: heavy:light = %d:%d (%.1f%%), expected 75%% +- 7" % (what, heavy, light, pct)


# ---- callgrind -------------------------------------------------------------------------


def test_callgrind_split(split, tmp_path):
    need_callgrind_annotate()
    out = tmp_path / "split.callgrind"
    convert(split.path, "callgrind", out)
    text = out.read_text()
    assert text.startswith("# callgrind format\n")
    assert "\npositions: line\n" in text and "\nevents: samples\n" in text
    # Exactly the command of the issue: no warning either.
    r = run(["callgrind_annotate", "--inclusive=yes", "--tree=both", "--auto=yes", out], cwd=tmp_path)
    assert r.returncode == 0 and not r.stderr and not ca_warned(r.stdout.decode()), r.stderr
    ann = callgrind_annotate(out, tmp_path)
    heavy = split.func("heavy")
    light = split.func("light")
    prog = heavy["file"]
    # The function table: inclusive cost, through calls= lines, equals the
    # report's total; self (annotated without --inclusive) its self.
    assert ann["funcs"]["%s:heavy" % prog]["cost"][0] == heavy["total"]
    assert ann["funcs"]["%s:light" % prog]["cost"][0] == light["total"]
    assert ann["funcs"]["%s:main" % prog]["cost"][0] == split.func("main", "split.py")["total"]
    assert_split(ann["funcs"]["%s:heavy" % prog]["cost"][0], ann["funcs"]["%s:light" % prog]["cost"][0],
                 "callgrind_annotate")
    assert ann["tree"]["%s:main" % prog]["%s:heavy" % prog][0] == heavy["total"]
    # The object of Python code is the interpreter.
    assert ann["funcs"]["%s:heavy" % prog]["ob"] == os.path.realpath("/usr/bin/python3")
    selfs = callgrind_annotate(out, tmp_path, inclusive=False)
    for f in split.report["functions"]:
        if f["file"] == prog:
            assert selfs["funcs"]["%s:%s" % (prog, f["name"])]["cost"][0] == f["self"], f
    # The annotated source: each line's cost is the report's self cost of
    # that line, and a line's calls add up to its total.
    want = {k: v for k, v in split.line_self().items() if k[0] == prog and v}
    got = {k: v[0] for k, v in ann["lines"].items() if k[0] == prog}
    assert got == want
    for ln in split.report["lines"]:
        if ln["file"] == prog:
            key = (prog, ln["line"])
            assert ann["lines"].get(key, [0])[0] + ann["calls"].get(key, [0])[0] == ln["total"], ln


def test_callgrind_unusual(unusual, tmp_path):
    need_callgrind_annotate()
    out = tmp_path / "unusual.callgrind"
    convert(unusual.path, "callgrind", out)
    ann = callgrind_annotate(out, tmp_path)
    odd = unusual.func("weird_name_in_odd_file")
    assert "odd dir; ünïcode/mod ;name.py" in odd["file"]
    for name, part in (("größe_berechnen", None), ("func2024", None), ("main.<locals>.<lambda>", None),
                       ("Outer.Inner_Very_Long_Class_Name_That_Goes_On_And_On_For_A_While.method_with_a_long_name_too",
                        None), ("weird_name_in_odd_file", None), ("<module>", "mod ;name.py")):
        f = unusual.func(name, part)
        row = ann["funcs"].get("%s:%s" % (f["file"], name))
        assert row, (name, sorted(ann["funcs"])[:40])
        assert row["cost"][0] == f["total"], (name, row, f)
    # The oddly named file is annotated line by line.
    want = {k: v for k, v in unusual.line_self().items() if k[0] == odd["file"] and v}
    got = {k: v[0] for k, v in ann["lines"].items() if k[0] == odd["file"]}
    assert want and got == want


def _check_consistent(ann, selfs, skip=()):
    """For every function outside a recursion cycle: its inclusive cost
    (what callgrind_annotate derives from the calls into it) equals its self
    cost plus its outgoing calls, for every event."""
    for name, row in ann["funcs"].items():
        if any(s in name for s in skip):
            continue
        out = [sum(c[e] for c in ann["tree"].get(name, {}).values()) for e in range(len(ann["events"]))]
        want = [a + b for a, b in zip(selfs["funcs"][name]["cost"], out)]
        assert row["cost"] == want, (name, row["cost"], selfs["funcs"][name]["cost"], out)


def test_callgrind_events(synth_events, tmp_path):
    need_callgrind_annotate()
    src_strata, src, exp, _ = synth_events
    out = tmp_path / "events.callgrind"
    convert(src_strata, "callgrind", out)
    text = out.read_text()
    assert "\nevents: samples cycles cache_misses\n" in text
    assert "\nevent: cache_misses : cache-misses\n" in text
    # Name compression: every fl=/fn= name is spelled out once.
    specs = re.findall(r"^c?(fl|fi|fn|ob)=\((\d+)\) (.+)$", text, re.M)
    assert len(specs) == len({(k if k != "fi" else "fl", i) for k, i, _ in specs})
    ann = callgrind_annotate(out, tmp_path)
    selfs = callgrind_annotate(out, tmp_path, inclusive=False)
    assert ann["events"] == ["samples", "cycles", "cache_misses"]
    for f in exp["functions"]:
        key = "%s:%s" % (f["file"] or "???", f["name"])
        # Every function's inclusive cost counts each sample once, through
        # direct (rec) and mutual (ping, pong) recursion too.
        assert ann["funcs"][key]["cost"] == f["total"], (key, ann["funcs"][key], f)
        assert selfs["funcs"][key]["cost"] == f["self"], (key, selfs["funcs"][key], f)
    _check_consistent(ann, selfs, skip=(":ping", ":pong"))
    # heavy:light is 3:1 in samples and cycles, 1:1 in cache misses.
    h, l = ann["funcs"]["%s:heavy" % src]["cost"], ann["funcs"]["%s:light" % src]["cost"]
    assert (h[0], h[1], h[2]) == (3 * l[0], 3 * l[1], l[2])
    want = {(ln["file"], ln["line"]): ln["self"] for ln in exp["lines"] if ln["file"] and any(ln["self"])}
    assert ann["lines"] == want


def test_callgrind_native(tmp_path):
    need_callgrind_annotate()
    out, exp = synth_native("callgrind", tmp_path)
    ann = callgrind_annotate(out, tmp_path)
    selfs = callgrind_annotate(out, tmp_path, inclusive=False)
    assert ann["events"] == ["samples", "instructions", "L1_dcache_load_misses"]
    for f in exp["functions"]:
        key = "%s:%s" % (f["file"] or "???", f["name"])
        assert ann["funcs"][key]["cost"] == f["total"], (key, ann["funcs"][key], f)
        assert selfs["funcs"][key]["cost"] == f["self"], (key, selfs["funcs"][key], f)
        # ob= is the module of native and JIT code, the interpreter for
        # Python code, a marker object for marker frames.
        want_ob = {"python": "/usr/bin/python3.11", "other": "[strata]"}.get(f["kind"], f["module"])
        assert ann["funcs"][key]["ob"] == want_ob, (key, ann["funcs"][key])
    # visit -> qsort_r -> visit is a cycle: the rest is consistent.
    _check_consistent(ann, selfs, skip=(":visit", ":qsort_r"))


# ---- collapsed / flamegraph.pl --------------------------------------------------------------


def test_collapsed_split(split, tmp_path):
    need_flamegraph()
    out = tmp_path / "split.folded"
    convert(split.path, "collapsed", out)
    lines = out.read_text().splitlines()
    assert all(re.match(r"^.+ \d+$", ln) for ln in lines)
    assert sum(int(ln.rsplit(" ", 1)[1]) for ln in lines) == split.report["samples"]
    frames = flamegraph(out, tmp_path / "split.svg")
    heavy, light = fg_total(frames, "heavy"), fg_total(frames, "light")
    assert heavy == split.func("heavy")["total"] and light == split.func("light")["total"]
    assert_split(heavy, light, "flamegraph.pl")


def test_collapsed_unusual(unusual, tmp_path):
    need_flamegraph()
    out = tmp_path / "unusual.folded"
    convert(unusual.path, "collapsed", out)
    text = out.read_text(encoding="utf-8")
    for ln in text.splitlines():
        stack, count = ln.rsplit(" ", 1)
        assert count.isdigit()
        # No frame can be misread as a second (differential) count column.
        assert not re.search(r"\s\d+$", stack), ln
    frames = flamegraph(out, tmp_path / "unusual.svg")
    for name in ("größe_berechnen", "func2024", "main.<locals>.<lambda>", "weird_name_in_odd_file",
                 "Outer.Inner_Very_Long_Class_Name_That_Goes_On_And_On_For_A_While.method_with_a_long_name_too"):
        assert fg_total(frames, name) == unusual.func(name)["total"], name
    # ';' in a path is shown as ':' (it separates frames), the rest as is.
    odd = [f for f, _ in frames if "odd dir: ünïcode/mod :name.py" in f]
    assert any(f.startswith("(module) (") for f in odd), odd
    assert sum(n for f, n in frames if f.startswith("(module) (") and "mod :name.py" in f) == \
        unusual.func("<module>", "mod ;name.py")["total"]


def test_collapsed_events(synth_events, tmp_path):
    """-e picks the event a single-valued format shows."""
    need_flamegraph()
    src_strata, src, exp, _ = synth_events
    want = {f["name"]: f["total"] for f in exp["functions"]}
    for e, event in enumerate(exp["events"]):
        out = tmp_path / ("events-%d.folded" % e)
        convert(src_strata, "collapsed", out, "-e", event)
        frames = flamegraph(out, tmp_path / ("events-%d.svg" % e))
        for name in ("heavy", "light", "main"):
            assert fg_total(frames, name) == want[name][e], (event, name)


def test_collapsed_native(tmp_path):
    need_flamegraph()
    out, exp = synth_native("collapsed", tmp_path)
    frames = flamegraph(out, tmp_path / "native.svg")
    for f in exp["functions"]:
        if f["name"] in ("visit", "qsort_r"):
            continue  # recursive: its frames overlap
        assert fg_total(frames, f["name"]) == f["total"][0], f
        if f["kind"] == "native" and not f["file"]:
            # Native code without a source file is named with its module.
            mine = [fr for fr, _ in frames if fr.startswith(fg_label(f["name"]) + " (")]
            assert mine and all(fr.endswith(" (%s)" % os.path.basename(f["module"])) for fr in mine), mine


# ---- pprof --------------------------------------------------------------------------------------


def test_pprof_split(split, tmp_path):
    need_go()
    need_protoc()
    out = tmp_path / "split.pb.gz"
    convert(split.path, "pprof", out)
    assert out.read_bytes()[:2] == b"\x1f\x8b", "not gzip"
    p = protoc_decode(out)
    assert p["types"] == [("samples", "count")]
    s, one = p["s"], p["one"]
    assert (s(one(p["period_type"][0], "type")), s(one(p["period_type"][0], "unit"))) == ("cpu", "nanoseconds")
    assert one(p, "period") == 1000000
    # Every sample carries its thread and process.
    for smp in p["sample"]:
        keys = {s(one(lab, "key")) for lab in smp["label"]}
        assert {"thread_name", "thread_id", "pid", "process"} <= keys, keys
    rows, out_text, err = pprof_top(out)
    heavy, light = split.func("heavy"), split.func("light")
    assert rows["heavy"] == (heavy["self"], heavy["total"])
    assert rows["light"] == (light["self"], light["total"])
    assert_split(rows["heavy"][1], rows["light"][1], "go tool pprof")
    assert "Type: samples" in out_text
    # Line-level locations: -lines shows each line's self and total.
    rows, _, _ = pprof_top(out, "-lines")
    for ln in split.report["lines"]:
        if ln["file"] == heavy["file"]:
            key = "%s %s:%d" % (ln["function"], ln["file"], ln["line"])
            assert rows.get(key) == (ln["self"], ln["total"]), (key, rows.get(key))


def test_pprof_unusual(unusual, tmp_path):
    need_go()
    need_protoc()
    out = tmp_path / "unusual.pb.gz"
    convert(unusual.path, "pprof", out)
    p = protoc_decode(out)
    names = {p["s"](p["one"](f, "name")) for f in p["function"]}
    assert {"größe_berechnen", "func2024", "main.<locals>.<lambda>", "<module>"} <= names
    rows, _, _ = pprof_top(out)
    for name in ("größe_berechnen", "func2024", "main.<locals>.<lambda>", "weird_name_in_odd_file",
                 "Outer.Inner_Very_Long_Class_Name_That_Goes_On_And_On_For_A_While.method_with_a_long_name_too"):
        f = unusual.func(name)
        assert rows.get(name) == (f["self"], f["total"]), (name, rows.get(name), f)
    rows, _, _ = pprof_top(out, "-lines")
    odd = unusual.func("<module>", "mod ;name.py")
    for ln in unusual.report["lines"]:
        if ln["file"] == odd["file"]:
            key = "%s %s:%d" % (ln["function"], ln["file"], ln["line"])
            assert rows.get(key) == (ln["self"], ln["total"]), (key, rows.get(key))


def test_pprof_events(synth_events, tmp_path):
    need_go()
    need_protoc()
    src_strata, src, exp, _ = synth_events
    out = tmp_path / "events.pb.gz"
    convert(src_strata, "pprof", out, "-e", "cycles")
    p = protoc_decode(out)
    assert p["types"] == [(e, "count") for e in exp["events"]]
    assert p["s"](p["one"](p, "default_sample_type")) == "cycles"
    tids = {p["one"](lab, "num") for smp in p["sample"] for lab in smp["label"]
            if p["s"](p["one"](lab, "key")) == "thread_id"}
    assert tids == {4000, 4001}
    for e, event in enumerate(exp["events"]):
        rows, _, _ = pprof_top(out, "-sample_index=%s" % event)
        for f in exp["functions"]:
            # pprof leaves out what costs nothing in that sample type.
            got = rows.get(f["name"], (0, 0))
            assert got == (f["self"][e], f["total"][e]), (event, f["name"], got)


def test_pprof_native(tmp_path):
    need_go()
    need_protoc()
    out, exp = synth_native("pprof", tmp_path)
    p = protoc_decode(out)
    s, one = p["s"], p["one"]
    maps = {one(m, "id"): s(one(m, "filename")) for m in p["mapping"]}
    # The interpreter first (pprof's main binary), then each module once.
    assert maps[1] == "/usr/bin/python3.11"
    modules = {f["module"] for f in exp["functions"] if f["module"]}
    assert set(maps.values()) == modules | {"/usr/bin/python3.11"}
    assert all(one(m, "has_functions") for m in p["mapping"])
    funcs = {one(f, "id"): f for f in p["function"]}
    kind = {f["name"]: f for f in exp["functions"]}
    for loc in p["location"]:
        fn = funcs[one(loc["line"][0], "function_id")]
        want = kind[s(one(fn, "name"))]
        if want["kind"] in ("native", "jit"):
            assert maps[one(loc, "mapping_id")] == want["module"]
            assert one(loc, "address") != 0
        elif want["kind"] == "python":
            assert one(loc, "mapping_id") == 1
    # Functions inlined into a native function are lines of its
    # location, innermost first, the function they are inlined into last.
    chains = [[s(one(funcs[one(ln, "function_id")], "name")) for ln in loc["line"]] for loc in p["location"]]
    assert ["dot_inner", "DOUBLE_dot", "PyArray_MatrixProduct2"] in chains, chains
    assert ["DOUBLE_dot", "PyArray_MatrixProduct2"] in chains, chains
    assert all(len(c) == 1 for c in chains if c[-1] != "PyArray_MatrixProduct2"), chains
    numpy = next(m for m in p["mapping"] if "_multiarray_umath" in s(one(m, "filename")))
    assert one(numpy, "has_inline_frames")
    for e, event in enumerate(exp["events"]):
        rows, _, _ = pprof_top(out, "-sample_index=%s" % event)
        # pprof marks the functions it read as inlined.
        inline = {k[:-len(" (inline)")] for k in rows if k.endswith(" (inline)")}
        rows = {k[:-len(" (inline)")] if k.endswith(" (inline)") else k: v for k, v in rows.items()}
        if e == 0:
            assert inline == {"dot_inner", "DOUBLE_dot"}, inline
        for f in exp["functions"]:
            # pprof leaves out what costs nothing in that sample type.
            got = rows.get(f["name"], (0, 0))
            assert got == (f["self"][e], f["total"][e]), (event, f["name"], got)


# ---- every interpreter: the 3:1 split in every format ------------------------------------------


@pytest.mark.edge_pythons
def test_split_every_format(python, tmp_path):
    """The 3:1 split shows as 3:1 in each of these formats, under every
    interpreter, read by each format's consumer."""
    rec = _record(python, tmp_path, "split.py", "2")
    heavy, light = rec.func("heavy")["total"], rec.func("light")["total"]
    assert_split(heavy, light, "report")
    prog = rec.func("heavy")["file"]
    need_callgrind_annotate()
    convert(rec.path, "callgrind", tmp_path / "s.callgrind")
    ann = callgrind_annotate(tmp_path / "s.callgrind", tmp_path)
    assert (ann["funcs"]["%s:heavy" % prog]["cost"][0], ann["funcs"]["%s:light" % prog]["cost"][0]) == \
        (heavy, light)
    need_flamegraph()
    convert(rec.path, "collapsed", tmp_path / "s.folded")
    frames = flamegraph(tmp_path / "s.folded", tmp_path / "s.svg")
    assert (fg_total(frames, "heavy"), fg_total(frames, "light")) == (heavy, light)
    need_go()
    convert(rec.path, "pprof", tmp_path / "s.pb.gz")
    rows, _, _ = pprof_top(tmp_path / "s.pb.gz")
    assert (rows["heavy"][1], rows["light"][1]) == (heavy, light)


@pytest.mark.edge_pythons
def test_unusual_every_format(python, tmp_path):
    """Awkward names (unicode, spaces, ';', <lambda>, <module>, digits at
    the end) pass every consumer under every interpreter."""
    rec = _record(python, tmp_path, "unusual.py", str(tmp_path))
    names = ("größe_berechnen", "func2024", "main.<locals>.<lambda>", "weird_name_in_odd_file")
    need_callgrind_annotate()
    convert(rec.path, "callgrind", tmp_path / "u.callgrind")
    ann = callgrind_annotate(tmp_path / "u.callgrind", tmp_path)
    for name in names:
        f = rec.func(name)
        assert ann["funcs"]["%s:%s" % (f["file"], name)]["cost"][0] == f["total"], name
    need_flamegraph()
    convert(rec.path, "collapsed", tmp_path / "u.folded")
    frames = flamegraph(tmp_path / "u.folded", tmp_path / "u.svg")
    for name in names:
        assert fg_total(frames, name) == rec.func(name)["total"], name
    need_go()
    convert(rec.path, "pprof", tmp_path / "u.pb.gz")
    rows, _, _ = pprof_top(tmp_path / "u.pb.gz")
    for name in names:
        f = rec.func(name)
        assert rows.get(name) == (f["self"], f["total"]), name


def test_wall_mode_idle(debian, tmp_path):
    """Wall mode: pprof marks samples idle or running (a label), and
    --no-idle leaves the idle ones out of every format."""
    prog = tmp_path / "sleepy.py"
    prog.write_text("import time\ntime.sleep(0.6)\nend = time.process_time() + 0.6\n"
                    "while time.process_time() < end:\n    pass\n")
    out = tmp_path / "wall.strata"
    r = strata("record", "--mode", "wall", "-o", out, "--", debian.exe, prog)
    assert r.returncode == 0, r.stderr
    rep = json.loads(strata("report", "--json", out).stdout)
    idle = sum(t.get("idle", 0) for t in rep["threads"])
    assert 0 < idle < rep["samples"], rep["threads"]
    convert(out, "collapsed", tmp_path / "busy.folded", "--no-idle")
    lines = (tmp_path / "busy.folded").read_text().splitlines()
    assert sum(int(ln.rsplit(" ", 1)[1]) for ln in lines) == rep["samples"] - idle
    need_go()
    convert(out, "pprof", tmp_path / "wall.pb.gz")
    _, text, _ = pprof_top(tmp_path / "wall.pb.gz", "-tagfocus=state=idle")
    assert re.search(r"Total samples = %d\b" % rep["samples"], text), text
    assert re.search(r"Showing nodes accounting for %d, " % idle, text), text
    convert(out, "callgrind", tmp_path / "busy.callgrind", "--no-idle")
    assert re.search(r"^totals: %d$" % (rep["samples"] - idle), (tmp_path / "busy.callgrind").read_text(), re.M)


# ---- strata record -f ------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["callgrind", "collapsed", "pprof"])
def test_record_format(debian, tmp_path, fmt):
    out = tmp_path / ("out." + fmt)
    raw = tmp_path / "raw.strata"
    r = strata("record", "-f", fmt, "-o", out, "--raw", raw, "--", debian.exe, PROGRAMS / "split.py", "1",
               cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert out.exists() and raw.exists()
    assert "-> %s" % out in r.stderr
    # The same as converting the kept profile afterwards.
    again = tmp_path / ("again." + fmt)
    convert(raw, fmt, again)
    if fmt == "pprof":
        import gzip
        assert gzip.decompress(out.read_bytes()) == gzip.decompress(again.read_bytes())
    else:
        assert out.read_bytes() == again.read_bytes()


def test_record_format_stdout(debian, tmp_path):
    r = strata("record", "-q", "-f", "collapsed", "-o", "-", "--", debian.exe, PROGRAMS / "split.py", "0.5",
               cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert re.search(r"^.*heavy \(.*\) \d+$", r.stdout, re.M)
    assert not (tmp_path / "-").exists()
    assert list(tmp_path.iterdir()) == []


# ---- bad input ---------------------------------------------------------------------------------------------


def known_formats():
    r = strata("convert", "--help")
    assert r.returncode == 0
    fmts = r.stdout.split("\nformats:\n", 1)[1]
    return [ln.split()[0] for ln in fmts.splitlines() if ln.strip()]


def test_unknown_format_lists_known(split, tmp_path):
    fmts = known_formats()
    assert {"callgrind", "collapsed", "pprof"} <= set(fmts)
    r = strata("convert", split.path, "-f", "kcachegrind", "-o", tmp_path / "x")
    assert r.returncode == 2
    m = re.match(r"^strata: unknown format 'kcachegrind'; known formats: (.*)\n$", r.stderr)
    assert m, r.stderr
    assert m.group(1).split(", ") == fmts
    assert not (tmp_path / "x").exists()
    # record -f refuses before running anything.
    marker = tmp_path / "ran"
    r = strata("record", "-f", "kcachegrind", "-o", tmp_path / "y", "--", "/usr/bin/python3", "-c",
               "open(%r, 'w')" % str(marker))
    assert r.returncode == 2 and "known formats: " in r.stderr
    assert not marker.exists()


@pytest.mark.parametrize("fmt", ["callgrind", "collapsed", "pprof"])
def test_unwritable_output(split, tmp_path, fmt):
    blocker = tmp_path / "file"
    blocker.write_text("")
    for target, reason in ((tmp_path / "missing" / "out", "No such file or directory"),
                           (blocker / "out", "Not a directory"), (tmp_path, "Is a directory")):
        r = strata("convert", split.path, "-f", fmt, "-o", target)
        assert r.returncode == 1
        assert r.stderr == "strata: cannot write %s: %s\n" % (target, reason), r.stderr
    # A device that fails every write: the error names the cause, and the
    # device is left alone.
    if os.path.exists("/dev/full"):
        r = strata("convert", split.path, "-f", fmt, "-o", "/dev/full")
        assert r.returncode == 1
        assert r.stderr == "strata: cannot write /dev/full: No space left on device\n", r.stderr
        assert os.path.exists("/dev/full")
    # record -f fails before running the command, leaving nothing behind.
    marker = tmp_path / "ran"
    r = strata("record", "-f", fmt, "-o", tmp_path / "missing" / "out", "--", "/usr/bin/python3", "-c",
               "open(%r, 'w')" % str(marker))
    assert r.returncode == 2
    assert "cannot write %s: No such file or directory" % (tmp_path / "missing" / "out") in r.stderr
    assert not marker.exists()


def test_truncated_file(split, tmp_path):
    """A file cut short converts what it holds, says so, and the consumer
    reads the result. The cut falls inside a chunk's payload, about two
    thirds in, then inside a chunk's header; one that falls between two
    chunks leaves whole chunks of a process that did not finish, and
    says that instead."""
    data = Path(split.path).read_bytes()
    start, end = next((s, e) for s, e in chunk_spans(data) if e > len(data) * 2 // 3)
    cut = tmp_path / "cut.strata"
    cut.write_bytes(data[: start + 40 + (end - start - 40) // 2])
    rep = json.loads(strata("report", "--json", cut).stdout)
    assert rep["truncated"] and 0 < rep["samples"] < split.report["samples"]
    for fmt in ("callgrind", "collapsed", "pprof"):
        out = tmp_path / ("cut." + fmt)
        r = strata("convert", cut, "-f", fmt, "-o", out)
        assert r.returncode == 0, r.stderr
        assert re.search(r"^strata: warning: .*cut\.strata: .*cut short", r.stderr, re.M), r.stderr
        if fmt == "callgrind":
            need_callgrind_annotate()
            ann = callgrind_annotate(out, tmp_path)
            assert ann["funcs"]["%s:heavy" % split.func("heavy")["file"]]["cost"][0] == \
                [f for f in rep["functions"] if f["name"] == "heavy"][0]["total"]
            assert re.search(r"^totals: %d$" % rep["samples"], out.read_text(), re.M)
        if fmt == "collapsed":
            need_flamegraph()
            frames = flamegraph(out, tmp_path / "cut.svg")
            assert fg_total(frames, "heavy") == [f for f in rep["functions"] if f["name"] == "heavy"][0]["total"]
        if fmt == "pprof":
            need_go()
            _, text, _ = pprof_top(out)
            assert "Total samples = %d" % rep["samples"] in text
    # Cut inside a chunk's header: the same.
    cut.write_bytes(data[: start + 20])
    r = strata("convert", cut, "-f", "collapsed", "-o", tmp_path / "hdr.collapsed")
    assert r.returncode == 0, r.stderr
    assert re.search(r"^strata: warning: .*cut\.strata: .*cut short", r.stderr, re.M), r.stderr
    # Cut between two chunks: nothing is cut short, but the process's
    # stream has no end.
    cut.write_bytes(data[:start])
    r = strata("convert", cut, "-f", "collapsed", "-o", tmp_path / "whole.collapsed")
    assert r.returncode == 0, r.stderr
    assert "cut short" not in r.stderr, r.stderr
    assert re.search(r"^strata: warning: .*cut\.strata: process \d+ stopped without finishing its profile",
                     r.stderr, re.M), r.stderr
    # Nothing readable at all: a clear error, no output.
    head = tmp_path / "head.strata"
    head.write_bytes(data[:40])
    r = strata("convert", head, "-f", "callgrind", "-o", tmp_path / "head.out")
    assert r.returncode == 1 and r.stderr.startswith("strata: %s: " % head), r.stderr
    assert not (tmp_path / "head.out").exists()
