"""strata top --objects: the live objects view (allocations per second by
type, and the lines that make the most), as plain text and on a real
terminal (tmux, 80x24). Known answers from programs/objects_live.py:
three() makes three times the dicts one() makes, and the program says how
many dicts it made in all."""
import re

from conftest import PROGRAMS, strata
from test_top import screen, top_cmd  # noqa: F401 (fixture)

RATE = ["--objects-rate", "16384"]
NUM = r"(\d+(?:\.\d)?[kMG]?)"
BYTES = r"(\d+(?:\.\d)? (?:B|KiB|MiB|GiB|TiB))"
# interval and since-start columns; since-start only (the final block)
LIVE_ROW = re.compile(r"^\s*%s\s+%s\s+%s\s+%s\s+%s  (\S+)(?:  (\S+))?\s*$" % (NUM, BYTES, NUM, BYTES, BYTES))
FINAL_ROW = re.compile(r"^\s*%s\s+%s\s+%s  (\S+)(?:  (\S+))?\s*$" % (NUM, BYTES, BYTES))


def count(s):
    mult = {"k": 1e3, "M": 1e6, "G": 1e9}
    return float(s[:-1]) * mult[s[-1]] if s[-1] in mult else float(s)


def final_tables(out):
    block = out[out.rindex("since start"):]
    types, lines = {}, {}
    which = None
    for line in block.splitlines():
        if line.lstrip().startswith("objects"):
            which = types if line.rstrip().endswith("type") else lines
            continue
        m = FINAL_ROW.match(line)
        if m and which is not None:
            name = m.group(4)
            if which is lines:
                name = m.group(5)  # file:line
            which.setdefault(name, m)
    return types, lines


def test_objects_view_plain(debian_python):
    r = strata("top", "--no-curses", "--objects", *RATE, "-i", "0.5", "-n", "8", "--",
               debian_python.exe, PROGRAMS / "objects_live.py", 3)
    assert r.returncode == 0, r.stderr
    made = int(re.search(r"made (\d+) dicts", r.stdout).group(1))
    blocks = [b for b in r.stdout.split("\n\n") if b.startswith("strata top ")]
    assert len(blocks) >= 4, r.stdout
    # While it runs: dicts made per second, by the lines that make them.
    live = [b for b in blocks if "objects/s" in b]
    assert len(live) >= 3, r.stdout
    rates = []
    for b in live[1:-1]:
        for line in b.splitlines():
            m = LIVE_ROW.match(line)
            if m and m.group(6) == "dict":
                rates.append(count(m.group(1)))
    # (an interval in which a loaded machine gave the program no CPU
    # shows none: most must show some)
    assert rates and sum(x > 0 for x in rates) >= 0.5 * len(rates), (rates, r.stdout)
    types, lines = final_tables(r.stdout)
    assert {"dict", "Point"} <= set(types), types.keys()
    dicts = count(types["dict"].group(1))
    assert 0.85 * made <= dicts <= 1.15 * made, (dicts, made)
    # The Point instances kept (50 000) are live; the dicts are not.
    assert types["Point"].group(3) != "0 B", types["Point"].group(0)


def test_objects_view_one_type(debian_python):
    """--type dict: the types table holds dict alone, and the lines that
    make dicts split 3:1."""
    r = strata("top", "--no-curses", "--type", "dict", "--objects", *RATE, "-i", "0.5", "-n", "8", "--",
               debian_python.exe, PROGRAMS / "objects_live.py", 3)
    assert r.returncode == 0, r.stderr
    types, lines = final_tables(r.stdout)
    assert list(types) == ["dict"], r.stdout[-2000:]
    three = count(lines["objects_live.py:27"].group(1))
    one = count(lines["objects_live.py:23"].group(1))
    assert abs(100.0 * three / (three + one) - 75) <= 7, (three, one)
    assert "allocated dict:" in r.stdout


def test_objects_view_on_screen(debian_python, screen):  # noqa: F811
    s = screen(top_cmd("--objects", *RATE, "--", debian_python.exe, PROGRAMS / "objects_live.py", 60))
    text = s.wait(lambda t: "objects/s" in t and re.search(r"^.*\bdict\s*$", t, re.M) and
                  "objects_live.py:27" in t and t, what="the objects view with dict and line 27")
    assert all(len(line) <= 80 for line in text.splitlines()), text
    assert "objects by lines" in text and "type all" in text
    # 'y': one type at a time (the first by bytes since the start).
    s.keys("y")
    text = s.wait(lambda t: re.search(r"type (?!all)\S+", t.splitlines()[2]) and t, what="a type filter")
    name = re.search(r"type (\S+)", text.splitlines()[2]).group(1)
    s.wait(lambda t: "allocated %s:" % name in t, what="the summary of %s" % name)
    # 'o': back to the time view.
    s.keys("o")
    s.wait(lambda t: "self%" in t and "objects/s" not in t, what="the functions view")
    s.keys("q")
    s.wait(lambda t: "Stop the program?" in t, what="the quit question")
    s.keys("y")
    assert s.exit_status() == 130
    assert s.terminal_restored()


def test_objects_view_attached(debian_python):
    """top --pid --objects on a process started without strata loads its
    agent with --objects: the dicts it makes show, three() above one()."""
    from test_attach import plain
    p = plain(debian_python, PROGRAMS / "objects_live.py", 4)
    try:
        r = strata("top", "--no-curses", "--pid", p.pid, "--objects", *RATE, "-i", "0.5", "-n", "8", timeout=120)
        assert r.returncode == 0, r.stderr
        assert "objects/s" in r.stdout, r.stdout
        types, lines = final_tables(r.stdout)
        assert "dict" in types, r.stdout
    finally:
        o, e = p.communicate(timeout=60)
    assert p.returncode == 0 and "made" in o, (p.returncode, o, e)


def test_objects_options(debian_python):
    bad = strata("top", "--objects-rate", "0", "--pid", "1")
    assert bad.returncode == 2 and "invalid --objects-rate" in bad.stderr, bad.stderr
    # A type not recorded (yet) is said, not an error: it may come.
    # --type records allocations without being told --objects.
    r = strata("top", "--no-curses", "--type", "NoSuchType", "-i", "0.5", "--",
               debian_python.exe, PROGRAMS / "objects_live.py", 1)
    assert r.returncode == 0, r.stderr
    assert "no allocation of type 'NoSuchType' recorded yet" in r.stdout, r.stdout[-1500:]
    assert "no allocation recorded" not in r.stdout, r.stdout[-1500:]
