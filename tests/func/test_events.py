"""strata record -e: perf events attributed to Python lines, on programs whose
answer is known (software events: these machines expose no hardware
counters), and the errors for events that cannot be recorded."""
import gzip
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import PROGRAMS, STRATA, func_row, need_tool, strata


def marked_line(prog, marker):
    for n, text in enumerate((PROGRAMS / prog).read_text().splitlines(), 1):
        if "# " + marker in text:
            return n
    raise AssertionError("no # %s in %s" % (marker, prog))


def ev(row, name, key="self"):
    return row["events"][name][key]


def have_pmu():
    return any(Path("/sys/bus/event_source/devices", d).exists() for d in ("cpu", "cpu_core", "cpu_atom"))


def paranoid():
    try:
        return int(Path("/proc/sys/kernel/perf_event_paranoid").read_text())
    except (OSError, ValueError):
        return None


def event_split(rep, event):
    """page-faults (or any event) of toucher and arith, and their sum."""
    t = ev(func_row(rep, "toucher"), event)
    a = ev(func_row(rep, "arith"), event) if any(f["name"] == "arith" for f in rep["functions"]) else 0
    return t, a


# ---- known answers -------------------------------------------------------------


@pytest.mark.edge_pythons
def test_page_faults_on_the_toucher(python, record):
    r = record(python, "events_pages.py", "2", opts=["-e", "page-faults"])
    assert r.returncode == 0, r.stderr
    rep = r.report()
    assert [e["name"] for e in rep["events"]] == ["page-faults"]
    assert rep["events"][0]["sampling"] and rep["events"][0]["period"] == 100
    total = rep["events"][0]["total"]
    t, a = event_split(rep, "page-faults")
    assert total > 10000, rep["events"]
    assert t >= 0.9 * total, "toucher has %d of %d page faults (arith %d)" % (t, total, a)
    # The faulting line itself, not just the function.
    line = marked_line("events_pages.py", "FAULT")
    top = max(rep["lines"], key=lambda ln: ev(ln, "page-faults"))
    assert top["function"] == "toucher" and top["line"] == line, top
    # Samples follow the sampling event: about one per 100 faults.
    assert abs(rep["samples"] * 100 - total) <= 0.02 * total + 200


@pytest.mark.edge_pythons
def test_cpu_clock_and_page_faults_columns(python, record):
    r = record(python, "events_pages.py", "2", opts=["-e", "cpu-clock,page-faults"])
    assert r.returncode == 0, r.stderr
    rep = r.report()
    assert [e["name"] for e in rep["events"]] == ["cpu-clock", "page-faults"]
    assert rep["events"][0]["unit"] == "ns" and rep["events"][1]["unit"] == "count"
    # Same CPU time for both: cpu-clock (and samples) split about evenly.
    tc, ac = event_split(rep, "cpu-clock")
    assert 0.35 <= tc / (tc + ac) <= 0.65, "cpu-clock toucher:arith = %d:%d" % (tc, ac)
    ts, as_ = func_row(rep, "toucher")["self"], func_row(rep, "arith")["self"]
    assert 0.35 <= ts / (ts + as_) <= 0.65, "samples toucher:arith = %d:%d" % (ts, as_)
    # cpu-clock counts nanoseconds: about one period per sample.
    assert abs(rep["events"][0]["total"] - rep["samples"] * 1000000) <= 0.1 * rep["events"][0]["total"]
    # Page faults: the same split as when they drive sampling.
    total = rep["events"][1]["total"]
    tp, ap = event_split(rep, "page-faults")
    assert total > 10000 and tp >= 0.9 * total, "toucher has %d of %d page faults (arith %d)" % (tp, total, ap)
    # Per line too, and total >= self everywhere.
    for row in rep["functions"] + rep["lines"]:
        for name in ("cpu-clock", "page-faults"):
            assert ev(row, name, "self") <= ev(row, name, "total"), row
    # The terminal report has one column per event.
    text = strata("report", r.path)
    assert text.returncode == 0, text.stderr
    head = next(ln for ln in text.stdout.splitlines() if ln.strip().startswith("self%") and "function" in ln)
    assert "cpu-clock" in head and "page-faults" in head, head
    assert "Events: cpu-clock" in text.stdout


@pytest.mark.edge_pythons
def test_context_switches_on_the_sleeping_line(python, record):
    r = record(python, "events_sleep.py", "400", opts=["-e", "context-switches"])
    if r.returncode == 2 and "perf_event_paranoid" in r.stderr:
        pytest.skip("context switches cannot be counted by this user here: " + r.stderr.strip())
    assert r.returncode == 0, r.stderr
    rep = r.report()
    tid = next(t["tid"] for t in rep["threads"] if t["name"] == "sleeper")
    mine = r.report("--tid", str(tid))
    total = mine["events"][0]["total"]
    # 400 sleeps: at least one switch each (the GIL adds more).
    assert total >= 400, mine["events"]
    line = marked_line("events_sleep.py", "SLEEP")
    on_line = sum(ev(ln, "context-switches") for ln in mine["lines"] if ln["line"] == line
                  and ln["function"] == "sleeper")
    assert on_line >= 0.9 * total, "%d of %d switches on the sleep line: %s" % (on_line, total, mine["lines"][:5])


@pytest.mark.edge_pythons
def test_counters_follow_threads_and_fork(python, record):
    r = record(python, "events_spread.py", "0.4", opts=["-e", "cpu-clock,page-faults"])
    assert r.returncode == 0, r.stderr
    rep = r.report()
    assert len(rep["processes"]) == 2, rep["processes"]
    late = [t for t in rep["threads"] if t["name"] == "late-toucher"]
    assert late, rep["threads"]
    th = r.report("--tid", str(late[0]["tid"]))
    assert ev(func_row(th, "toucher"), "page-faults") > 5000, th["functions"][:3]
    for p in rep["processes"]:
        mine = r.report("--pid", str(p["pid"]))
        assert ev(func_row(mine, "toucher"), "page-faults") > 5000, (p, mine["functions"][:3])
        assert mine["events"][0]["total"] > 0


@pytest.mark.edge_pythons
def test_annotate_event_columns(python, record):
    r = record(python, "events_pages.py", "1", opts=["-e", "cpu-clock,page-faults"])
    assert r.returncode == 0, r.stderr
    out = strata("annotate", "--json", r.path, "events_pages.py")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert [e["name"] for e in data["events"]] == ["cpu-clock", "page-faults"]
    f = data["files"][0]
    fault = marked_line("events_pages.py", "FAULT")
    lines = {ln["line"]: ln for ln in f["lines"]}
    total = sum(ln["events"]["page-faults"]["self"] for ln in f["lines"])
    # Counted (not sampling) events go to the line the thread is on at the
    # next cpu-clock sample: toucher()'s faults spread over its lines in
    # proportion to their time, the faulting line first.
    assert max(f["lines"], key=lambda ln: ln["events"]["page-faults"]["self"])["line"] == fault
    in_toucher = sum(ln["events"]["page-faults"]["self"] for ln in f["lines"] if ln["function"] == "toucher")
    assert in_toucher >= 0.9 * total, (in_toucher, total)
    assert lines[fault]["source"].strip().startswith("m[off] = 1")
    text = strata("annotate", r.path, "toucher")
    assert text.returncode == 0, text.stderr
    head = next(ln for ln in text.stdout.splitlines() if "self%" in ln)
    assert "cpu-clock" in head and "page-faults" in head, head


# ---- exports -------------------------------------------------------------------


def _converted(path, fmt, tmp_path):
    out = tmp_path / ("out." + fmt)
    res = strata("convert", path, "-f", fmt, "-o", out)
    assert res.returncode == 0, res.stderr
    return out


def test_callgrind_has_a_column_per_event(debian_python, record, tmp_path):
    r = record(debian_python, "events_pages.py", "1", opts=["-e", "cpu-clock,page-faults"])
    assert r.returncode == 0, r.stderr
    out = _converted(r.path, "callgrind", tmp_path)
    text = out.read_text()
    m = re.search(r"^events:\s*(.*)$", text, re.M)
    assert m, text[:500]
    cols = m.group(1).split()
    assert len(cols) == 3 and any("page" in c.lower() for c in cols) and any("cpu" in c.lower() for c in cols), cols
    tool = need_tool("callgrind_annotate", "Debian package valgrind; scripts/deps.sh")
    pf = next(c for c in cols if "page" in c.lower())
    ann = subprocess.run([tool, "--show=" + pf, "--sort=" + pf, str(out)], capture_output=True, text=True)
    assert ann.returncode == 0, ann.stderr
    rows = [ln for ln in ann.stdout.splitlines() if "toucher" in ln or "arith" in ln]
    assert rows and "toucher" in rows[0], ann.stdout[-2000:]


def _pprof_sample_types(data):
    """sample_type names of a pprof profile.proto (gzipped), decoded by
    hand: Profile.sample_type is field 1 (ValueType: type = 1, unit = 2,
    indices into string_table, field 6)."""
    buf = gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data

    def varint(b, i):
        v = s = 0
        while True:
            c = b[i]
            i += 1
            v |= (c & 0x7F) << s
            s += 7
            if not c & 0x80:
                return v, i

    def fields(b):
        i = 0
        while i < len(b):
            key, i = varint(b, i)
            wt = key & 7
            if wt == 0:
                v, i = varint(b, i)
            elif wt == 2:
                n, i = varint(b, i)
                v, i = b[i:i + n], i + n
            elif wt == 1:
                v, i = b[i:i + 8], i + 8
            elif wt == 5:
                v, i = b[i:i + 4], i + 4
            else:
                raise ValueError("wire type %d" % wt)
            yield key >> 3, v

    types, strings = [], []
    for num, v in fields(buf):
        if num == 1:
            types.append(dict(fields(v)))
        elif num == 6:
            strings.append(v.decode())
    return [strings[t.get(1, 0)] for t in types]


def test_pprof_has_a_sample_type_per_event(debian_python, record, tmp_path):
    r = record(debian_python, "events_pages.py", "1", opts=["-e", "cpu-clock,page-faults"])
    assert r.returncode == 0, r.stderr
    out = _converted(r.path, "pprof", tmp_path)
    names = _pprof_sample_types(out.read_bytes())
    assert len(names) == 3, names
    assert any("page" in n for n in names) and any("cpu" in n for n in names), names


# ---- errors that help ---------------------------------------------------------------


def _fails_before_running(args, tmp_path, python="/usr/bin/python3"):
    """Runs strata record with args on a command that leaves a mark; returns
    the result after checking the command never ran."""
    mark = tmp_path / "ran"
    out = tmp_path / "x.strata"
    res = strata("record", "-o", out, *args, "--", python, "-c", "open(%r, 'w').close()" % str(mark))
    assert not mark.exists(), "the command ran: %s" % res.stderr
    return res


@pytest.mark.parametrize("event", ["cycles", "instructions", "cache-misses", "branch-misses", "r00c0",
                                   "cpu-clock,cycles", "page-faults,cache-references"])
def test_hardware_events_fail_cleanly(event, tmp_path):
    if have_pmu():
        pytest.skip("this machine has a CPU PMU: hardware events are recordable here")
    res = _fails_before_running(["-e", event], tmp_path)
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    hw = event.split(",")[-1]
    assert lines[0].startswith("strata: ") and "'%s'" % hw in lines[0], lines[0]
    assert "no hardware performance counters" in lines[0] and "-e cpu-clock" in lines[0], lines[0]


@pytest.mark.parametrize("args,expect", [
    (["-e", ""], "empty event list"),
    (["-e", "page-faults,,cpu-clock"], "empty event name"),
    (["-e", "page-faults,"], "empty event name"),
    (["-e", "pagefaults"], "unknown event 'pagefaults'"),
    (["-e", "page-faults:u"], "modifiers"),
    (["-e", "page-faults,faults"], "listed twice"),
    (["-e", "page-faults", "-c", "0"], "invalid period '0'"),
    (["-e", "page-faults", "-c", "-5"], "invalid period '-5'"),
    (["-e", "page-faults", "-c", "ten"], "invalid period 'ten'"),
    (["-c", "100"], "give -e too"),
    (["-e", "page-faults", "--mode", "wall"], "--mode wall"),
    (["-e", "context-switches", "-c", "1"], "too small"),
])
def test_bad_event_options(args, expect, tmp_path):
    res = _fails_before_running(args, tmp_path)
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("strata: ") and expect in lines[0], res.stderr


def test_event_list():
    res = strata("record", "-e", "list")
    assert res.returncode == 0, res.stderr
    for name in ("cycles", "instructions", "cache-references", "cache-misses", "branch-instructions",
                 "branch-misses", "cpu-clock", "task-clock", "page-faults", "minor-faults", "major-faults",
                 "context-switches", "cpu-migrations", "rNNNN"):
        assert re.search(r"^\s+%s\b" % re.escape(name), res.stdout, re.M), name
    row = next(ln for ln in res.stdout.splitlines() if ln.strip().startswith("page-faults"))
    assert "yes" in row, row
    if not have_pmu():
        row = next(ln for ln in res.stdout.splitlines() if ln.strip().startswith("cycles"))
        assert "no (no PMU)" in row, row


@pytest.fixture
def nobody_dir():
    """A directory the unprivileged user `nobody` can write, outside pytest's
    own (private) temporary directory."""
    if os.geteuid() != 0 or not shutil.which("runuser"):
        pytest.skip("needs root and runuser to run strata as an unprivileged user")
    if not os.path.exists("/usr/bin/python3"):
        pytest.skip("needs /usr/bin/python3 (readable by nobody)")
    # nobody must reach the build and the programs through every directory above them.
    for path in (STRATA.resolve(), PROGRAMS.resolve() / "events_pages.py"):
        for parent in path.parents:
            if not parent.stat().st_mode & 0o001:
                pytest.skip("%s is not searchable by other users" % parent)
    d = Path(tempfile.mkdtemp(prefix="strata-nobody-"))
    d.chmod(0o777)
    yield d
    shutil.rmtree(str(d), ignore_errors=True)


def test_paranoid_too_strict_for_the_user(nobody_dir):
    """As nobody, with perf_event_paranoid at this machine's value: events
    that happen in the kernel need paranoid <= 1, others <= 2."""
    par = paranoid()
    if par is None:
        pytest.skip("no /proc/sys/kernel/perf_event_paranoid")
    d = nobody_dir
    mark = d / "ran"
    cmd = ["runuser", "-u", "nobody", "--", str(STRATA), "record", "-o", str(d / "n.strata"), "-e",
           "context-switches", "--", "/usr/bin/python3", "-c", "open(%r, 'w').close()" % str(mark)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if par <= 1:
        assert res.returncode == 0, res.stderr
        pytest.skip("perf_event_paranoid is %d: an unprivileged user may count kernel events here" % par)
    assert res.returncode == 2 and not mark.exists(), res.stderr
    line = res.stderr.strip()
    assert len(line.splitlines()) == 1, line
    assert "kernel.perf_event_paranoid" in line and "at most 1" in line and "(it is %d)" % par in line, line
    # A user-space event still works, counted in user space only.
    if par <= 2:
        cmd = ["runuser", "-u", "nobody", "--", str(STRATA), "record", "-q", "-o", str(d / "u.strata"), "-e",
               "page-faults", "--", "/usr/bin/python3", str(PROGRAMS / "events_pages.py"), "0.5"]
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stderr
        rep = json.loads(strata("report", "--json", d / "u.strata").stdout)
        assert rep["events"][0]["user_only"] is True
        assert ev(func_row(rep, "toucher"), "page-faults") >= 0.9 * rep["events"][0]["total"]
