"""The Python entry points: `python -m strata` and `strata.profile()`, found
through PYTHONPATH=<prefix>/lib/strata/python or a copy elsewhere (the wheel's
pip-installed package is tested by tests/wheel)."""
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import AGENT_DIR, BUILD, PROGRAMS, ROOT, STRATA, func_row, plain_env, strata
from test_control import agent_env

PYPATH = AGENT_DIR / "python"


def clean_env(**extra):
    return plain_env(**dict({"PYTHONPATH": str(PYPATH)}, **extra))


def run(cmd, env, cwd=None, timeout=300):
    return subprocess.run([str(c) for c in cmd], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


def report(path):
    r = strata("report", "--json", path)
    assert r.returncode == 0, r.stderr
    assert "warning" not in r.stderr, r.stderr
    return json.loads(r.stdout)


def names(rep):
    return {f["name"] for f in rep["functions"]}


def test_python_m_strata(python, tmp_path):
    out = tmp_path / "m.strata"
    r = run([python.exe, "-m", "strata", "-o", out, "-F", "500", PROGRAMS / "split.py", "2"], clean_env())
    assert r.returncode == 0, r.stderr
    assert re.search(r"strata: \d+ samples, 1 process", r.stderr), r.stderr
    rep = report(out)
    assert rep["rate_hz"] == 500
    assert rep["python_version"] == python.version
    heavy, light = func_row(rep, "heavy")["self"], func_row(rep, "light")["self"]
    assert 0.68 <= heavy / (heavy + light) <= 0.82, (heavy, light)
    # The same interpreter runs the program.
    assert rep["command"].startswith(str(python.exe))


def test_python_m_strata_exit_status_and_forms(python, tmp_path):
    r = run([python.exe, "-m", "strata", "-q", "-o", tmp_path / "c.strata", "-c", "import sys; sys.exit(5)"],
            clean_env())
    assert r.returncode == 5, r.stderr
    # -m MODULE, and `--` before the program.
    r = run([python.exe, "-m", "strata", "-o", tmp_path / "mod.strata", "-m", "split", "0.5"], clean_env(),
            cwd=PROGRAMS)
    assert r.returncode == 0, r.stderr
    assert "heavy" in names(report(tmp_path / "mod.strata"))
    r = run([python.exe, "-m", "strata", "-o", tmp_path / "dd.strata", "--", PROGRAMS / "split.py", "0.3"],
            clean_env())
    assert r.returncode == 0, r.stderr
    r = run([python.exe, "-m", "strata", "-o"], clean_env())
    assert r.returncode != 0 and "needs a value" in r.stderr
    r = run([python.exe, "-m", "strata"], clean_env())
    assert r.returncode == 2 and "no program" in r.stderr


def check_block(rep, threads=True):
    """Only the block: inside() and the threads that ran during it."""
    fn = names(rep)
    assert "inside" in fn and "burn" in fn, sorted(fn)[:20]
    assert "before" not in fn and "after" not in fn, sorted(fn)
    assert func_row(rep, "inside")["total"] > 100
    if threads:
        by_name = {}
        for t in rep["threads"]:
            by_name[t["name"]] = by_name.get(t["name"], 0) + t["samples"]
        # early predates the block (and, without a preloaded agent, the
        # agent itself); late starts inside it.
        for name in ("MainThread", "early", "late"):
            assert by_name.get(name, 0) > 30, by_name


def test_profile_block_dlopen(python, tmp_path):
    """No agent in the process: strata.profile() loads it."""
    out = tmp_path / "b.strata"
    r = run([python.exe, PROGRAMS / "block.py", out, "1.0"], clean_env())
    assert r.returncode == 0, r.stderr
    assert r.stderr == "", r.stderr
    check_block(report(out))


def test_profile_block_preloaded_standby(python, tmp_path):
    out = tmp_path / "b.strata"
    env = agent_env(PYTHONPATH=str(PYPATH))
    r = run([python.exe, PROGRAMS / "block.py", out, "1.0"], env)
    assert r.returncode == 0, r.stderr
    check_block(report(out))


def test_profile_block_under_record(python, tmp_path):
    """Under strata record --paused the block goes to the recording."""
    out = tmp_path / "rec.strata"
    ignored = tmp_path / "ignored.strata"
    r = run([STRATA, "record", "--paused", "-o", out, "--", python.exe, PROGRAMS / "block.py", ignored, "1.0"],
            clean_env())
    assert r.returncode == 0, r.stderr
    assert "already recorded to %s" % out in r.stderr, r.stderr
    assert not ignored.exists()
    check_block(report(out))


def test_profile_twice_and_status(debian_python, tmp_path):
    prog = tmp_path / "twice.py"
    prog.write_text(
        "import sys, time, strata\n"
        "def one():\n"
        "    t = time.process_time() + 0.4\n"
        "    while time.process_time() < t: pass\n"
        "def two():\n"
        "    t = time.process_time() + 0.4\n"
        "    while time.process_time() < t: pass\n"
        "st = strata.status()\n"
        "assert st['sampling'] == 'off' and st['output'] == '', st\n"
        "with strata.profile(sys.argv[1]):\n"
        "    assert strata.status()['sampling'] == 'on'\n"
        "    try:\n"
        "        strata.profile(sys.argv[1] + '.x').start()\n"
        "    except strata.AgentError as e:\n"
        "        print('nested:', e)\n"
        "    one()\n"
        "with strata.profile(sys.argv[2], rate=200):\n"
        "    two()\n"
        "print(strata.status()['loaded'])\n")
    a, b = tmp_path / "one.strata", tmp_path / "two.strata"
    r = run([debian_python.exe, prog, a, b], clean_env())
    assert r.returncode == 0, r.stderr
    assert "nested: a strata.profile block is already running" in r.stdout
    assert r.stdout.strip().endswith("dlopen")
    ra, rb = report(a), report(b)
    assert "one" in names(ra) and "two" not in names(ra)
    assert "two" in names(rb) and "one" not in names(rb)
    assert rb["rate_hz"] == 200
    # 0.4 s of CPU at 200 Hz.
    assert 40 <= rb["samples"] <= 120, rb["samples"]


def test_package_elsewhere(debian_python, tmp_path):
    """A copy of the package away from the agent (installed by hand, or with
    another tool than the wheel, which tests/wheel covers) finds strata on
    PATH and its agent beside it."""
    src = tmp_path / "site"
    shutil.copytree(ROOT / "python" / "strata", src / "strata")
    env = clean_env(PATH="%s:%s" % (BUILD / "bin", os.environ.get("PATH", "")), PYTHONPATH=str(src))
    where = run([debian_python.exe, "-c", "import strata; print(strata.__file__)"], env)
    assert str(src) in where.stdout, where
    out = tmp_path / "pip.strata"
    r = run([debian_python.exe, PROGRAMS / "block.py", out, "0.6"], env)
    assert r.returncode == 0, r.stderr
    check_block(report(out), threads=False)
    r = run([debian_python.exe, "-m", "strata", "-o", tmp_path / "pm.strata", PROGRAMS / "split.py", "0.5"], env)
    assert r.returncode == 0, r.stderr
    assert "heavy" in names(report(tmp_path / "pm.strata"))


@pytest.mark.edge_pythons
def test_ended_thread_still_listed(python, tmp_path):
    """A thread that has ended for strata but lingers in the kernel's list
    (its exit held by a later thread destructor) is not found again by the
    helper's thread scan: its samples keep its name, and the recording
    announces it once."""
    so = tmp_path / "linger.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-pthread", "-o", str(so),
                    str(PROGRAMS / "native" / "linger.c")], check=True)
    out = tmp_path / "l.strata"
    r = run([python.exe, PROGRAMS / "linger.py", out, "500"], clean_env(LINGER_SO=str(so)))
    assert (r.returncode, r.stderr) == (0, ""), r.stderr
    rep = report(out)
    tids = [t["tid"] for t in rep["threads"] if t["name"] == "lingering"]
    assert len(tids) == 1, rep["threads"]
    named = [t for t in rep["threads"] if t["tid"] == tids[0]]
    assert len(named) == 1 and named[0]["samples"] > 30, rep["threads"]
    d = strata("dump", out)
    assert d.returncode == 0, d.stderr
    announced = [l for l in d.stdout.splitlines() if re.search(r"\] thread tid=%d\b" % tids[0], l)]
    assert len(announced) == 1, announced
