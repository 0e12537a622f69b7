"""strata annotate: the profiled source with a cost per line, on programs
whose hot line is known."""
import json

import pytest

from conftest import PROGRAMS, strata


def marked_line(prog, marker):
    for n, text in enumerate((PROGRAMS / prog).read_text().splitlines(), 1):
        if "# " + marker in text:
            return n
    raise AssertionError("no # %s in %s" % (marker, prog))


@pytest.fixture
def hot_profile(debian_python, record):
    r = record(debian_python, "hotline.py", "1")
    assert r.returncode == 0, r.stderr
    return r


def test_hot_line_is_hottest(python, record):
    r = record(python, "hotline.py", "1.5")
    assert r.returncode == 0, r.stderr
    out = strata("annotate", "--json", r.path, "hotline.py")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert len(data["files"]) == 1
    f = data["files"][0]
    assert f["file"].endswith("hotline.py") and f["source_available"]
    hot = marked_line("hotline.py", "HOT")
    top = max(f["lines"], key=lambda ln: ln["self"])
    assert top["line"] == hot and top["function"] == "work", f["lines"]
    assert top["self"] >= 0.5 * data["samples"]
    assert "# HOT" in top["source"]
    # total >= self per line; work()'s call line carries the work below it
    # (and runs itself only for a moment between calls).
    for ln in f["lines"]:
        assert ln["self"] <= ln["total"] <= data["samples"], ln
    call = next(ln for ln in f["lines"] if ln["function"] == "main" and "work(" in ln["source"])
    assert call["total"] >= top["self"] and call["self"] <= 0.02 * data["samples"]
    # The report agrees on the hot line's self samples.
    rep = r.report()
    row = next(ln for ln in rep["lines"] if ln["line"] == hot and ln["function"] == "work")
    assert row["self"] == top["self"]


def test_text_layout(hot_profile):
    out = strata("annotate", hot_profile.path, "hotline.py")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "\033[" not in text, "color in a pipe"
    hot = marked_line("hotline.py", "HOT")
    row = next(ln for ln in text.splitlines() if "# HOT" in ln)
    m = row.split()
    assert m[0].endswith("%") and float(m[0][:-1]) >= 50, row
    assert str(hot) in m, row
    assert "self%" in text and "total%" in text and "source" in text
    # --full shows every line; --context N shows the costly lines and N
    # lines around each, eliding the rest. Which lines have a cost depends
    # on the run (imports can take a sample), so it is read from --full.
    full = strata("annotate", "--full", hot_profile.path, "hotline.py").stdout
    nsrc = len((PROGRAMS / "hotline.py").read_text().splitlines())
    assert len(full.splitlines()) >= nsrc + 2
    def rows(out):
        """(line number, has a cost) for each source row, read by column."""
        lines = out.splitlines()
        end = lines[1].index(" line") + len(" line")
        for ln in lines[2:]:
            head = ln[:end].split()
            if head and head[-1].isdigit():
                yield int(head[-1]), "%" in ln[:end]

    costly = {n for n, c in rows(full) if c}
    plain = {n for n, c in rows(full) if not c}
    assert hot in costly and plain, full

    def shown(ctx):
        return {n for n, _ in rows(strata("annotate", "-C", str(ctx), hot_profile.path, "hotline.py").stdout)}

    assert shown(0) == costly
    near = {n for n in plain if any(abs(n - c) <= 1 for c in costly)}
    assert shown(1) == costly | near


def test_function_target_and_color(hot_profile):
    out = strata("annotate", "--color", "always", hot_profile.path, "work")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("\033[1mwork (") and "hotline.py" in lines[0]
    hot_row = next(ln for ln in lines if "# HOT" in ln)
    assert hot_row.startswith("\033[1;31m"), repr(hot_row)
    # Only work()'s lines: from its def to its last costly line.
    assert "def work(n):" in out.stdout and "def main" not in out.stdout
    never = strata("annotate", "--color", "never", hot_profile.path, "work")
    assert "\033[" not in never.stdout


def test_all_files_and_errors(hot_profile, tmp_path):
    out = strata("annotate", hot_profile.path)
    assert out.returncode == 0, out.stderr
    assert "hotline.py" in out.stdout.splitlines()[0]
    bad = strata("annotate", hot_profile.path, "no_such_thing")
    assert bad.returncode == 1 and bad.stdout == ""
    assert bad.stderr.count("\n") == 1 and "no profiled source file or function matches 'no_such_thing'" in bad.stderr
    missing = strata("annotate", tmp_path / "nope.strata")
    assert missing.returncode == 1 and missing.stderr.startswith("strata: ")
    assert strata("annotate").returncode == 2
    assert strata("annotate", "--context", "x", hot_profile.path).returncode == 2
    assert strata("annotate", "-e", "cycles", hot_profile.path).returncode == 1


def test_source_changed_or_gone(debian_python, record, tmp_path):
    """A profile outlives its sources: lines are still listed by number."""
    prog = tmp_path / "gone.py"
    prog.write_text((PROGRAMS / "hotline.py").read_text())
    r = record(debian_python, str(prog), "0.5")
    assert r.returncode == 0, r.stderr
    prog.unlink()
    out = strata("annotate", r.path, str(prog))
    assert out.returncode == 0, out.stderr
    assert "source not available" in out.stdout
    data = json.loads(strata("annotate", "--json", r.path, str(prog)).stdout)
    assert data["files"][0]["source_available"] is False
    assert all(ln["source"] is None for ln in data["files"][0]["lines"])
