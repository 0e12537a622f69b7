"""Shared fixtures for strata's functional tests.

Every test profiles real Python programs (tests/func/programs/) with the
built `strata` and asserts on what the profile says, through the same
interfaces users have (`strata report --json`, exports, exit codes).

Interpreters: the `python` fixture is parametrized over every interpreter
strata supports. One that is not installed here is skipped with a message
that names it; one that is installed but does not run, or has no agent
build, fails (unless the build was made for a PYTHONS= list that leaves it
out): a Python present on the machine that strata cannot profile is a
fault to report, not a test to skip. STRATA_TEST_PYTHONS (a
space-separated list of ids, e.g. "debian-3.11 3.12") narrows the set.
Ids: "3.X" is pyenv's newest 3.X; "debian-3.X" is Debian's /usr/bin/python3
if that is 3.X, else /usr/bin/python3.X (in the sid root of
scripts/sidroot.sh: debian-3.14 and debian-3.15). The `debian_python`
fixture is /usr/bin/python3, whatever its version (3.11 on Debian 12, 3.14
in sid).

Tests marked `edge_pythons` check something that does not depend on the
interpreter's version (a terminal UI, an export format, perf counters, the
control channel, the process-level behaviour the agent's C code owns: fork,
exec, death by a signal) or depends on another component's version (Numba's: the
JIT tests then run under Debian's Numba 0.56 and PyPI's newest) with a
Python program: they run under Debian's Python, the oldest and the newest
pyenv version (debian-3.11, 3.8 and 3.13 here; in the sid root, its
python3, debian-3.14: scripts/sidroot.sh names it in
STRATA_TEST_EDGE_PYTHONS) to keep `make check` within its time budget.
STRATA_TEST_EVERY_PYTHON=1 runs them under every interpreter too; so does
naming interpreters in STRATA_TEST_PYTHONS, unless STRATA_TEST_EDGE_PYTHONS
is set too.

pyenv's build of the minor version Debian's Python has (3.11 on Debian 12)
runs the code Debian's runs, which every test checks: it runs only the
tests of what differs between two builds of a version (BUILD_TESTS: native
stacks through a shared libpython, another patch release's build checks,
debug info, the JIT tests with PyPI's Numba where Debian's is older).
STRATA_TEST_EVERY_PYTHON=1 or STRATA_TEST_PYTHONS runs everything under it.
"""
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("STRATA_BUILD", ROOT / "build"))
STRATA = BUILD / "bin" / "strata"
AGENT_DIR = BUILD / "lib" / "strata"
PROGRAMS = Path(__file__).resolve().parent / "programs"
VENVS = Path(os.environ.get("STRATA_VENVS", ROOT / ".venvs"))


# scripts/pyenvs.sh installs Numba in the virtualenvs of these versions on.
NUMBA_FROM = (3, 10)
# ... and these from wheels only, where PyPI has one (asyncio tests).
WHEELS_ONLY = ("uvloop", "aiohttp")


def _pyenv_root():
    try:
        return Path(subprocess.run(["pyenv", "root"], capture_output=True, text=True, check=True).stdout.strip())
    except (OSError, subprocess.CalledProcessError):
        return Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))


def _find_pyenv(minor):
    versions = _pyenv_root() / "versions"
    found = sorted(versions.glob(minor + ".*")) if versions.is_dir() else []
    for v in reversed(found):
        exe = v / "bin" / "python"
        if exe.exists() and v.name.count(".") == 2 and v.name.replace(".", "").isdigit():
            return exe
    return None


class Interp:
    """One Python interpreter to profile programs under."""

    def __init__(self, ident, exe):
        self.id = ident
        self.exe = Path(exe) if exe else None
        self.version = None
        if self.exe and self.exe.exists():
            out = subprocess.run([str(self.exe), "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"],
                                 capture_output=True, text=True)
            if out.returncode == 0:
                self.version = out.stdout.strip()

    @property
    def minor(self):
        return tuple(int(x) for x in self.version.split(".")[:2]) if self.version else None

    def venv_python(self):
        """The interpreter of this version's test virtualenv (with numpy,
        numba where available), or the interpreter itself for Debian's,
        whose numpy/numba come from Debian packages (unless it has a
        virtualenv: the sid root's 3.15, for which Debian has no Numba,
        gets Numba from PyPI in one)."""
        v = VENVS / self.version / "bin" / "python" if self.version else None
        if v is not None and v.exists():
            return v
        return self.exe if self.id.startswith("debian") else None

    def has_module(self, name, venv=True):
        exe = self.venv_python() if venv else self.exe
        if exe is None:
            return False
        return subprocess.run([str(exe), "-c", "import " + name], capture_output=True).returncode == 0

    def with_module(self, name):
        """The interpreter to run a program that imports numpy or numba
        with: this version's virtualenv, or Debian's own. Skips the test
        where the project installs no such package for this version (Numba
        before 3.10); fails it where it should have been installed, since
        scripts/pyenvs.sh and scripts/deps.sh fail when they cannot."""
        if name == "numba" and not self.id.startswith("debian") and self.minor < NUMBA_FROM:
            pytest.skip("no Numba for Python %s: current Numba supports %d.%d and newer" % ((self.version,) + NUMBA_FROM))
        if not self.has_module(name) and name in WHEELS_ONLY:
            # scripts/pyenvs.sh (and sidroot.sh for 3.15) install these
            # from wheels only, and record that they tried.
            extras = self.venv_python().parent.parent / ".extras" if self.venv_python() else None
            if extras is not None and extras.exists() and name in extras.read_text().split():
                pytest.skip("no %s wheel for Python %s on PyPI" % (name, self.version))
        if not self.has_module(name):
            where = ("Debian package python3-%s; scripts/deps.sh" % name if self.id.startswith("debian")
                     and self.venv_python() == self.exe
                     else "the test virtualenv %s; scripts/pyenvs.sh" % (VENVS / self.version))
            pytest.fail("%s is not installed for Python %s (%s)" % (name, self.version, where))
        return self.venv_python()

    def require(self):
        """Returns self if programs can be profiled under this interpreter;
        skips the test if it is not installed, fails it if it is but does
        not run or has no agent build."""
        if self.exe is None or not self.exe.exists():
            pytest.skip("Python %s is not installed on this machine" % self.id)
        if not self.version:
            pytest.fail("Python %s (%s) is installed but does not run" % (self.id, self.exe))
        # Any build of the same X.Y serves (the agent falls back to one).
        if not list(AGENT_DIR.glob("strata-py-%d.%d.*.so" % self.minor)):
            chosen = _chosen_pythons()
            if chosen is not None and os.path.realpath(self.exe) not in chosen:
                pytest.skip("Python %s (%s): the build was made for PYTHONS=%s only"
                            % (self.version, self.exe, " ".join(sorted(chosen))))
            pytest.fail("Python %s (%s) is installed but has no strata agent build in %s: "
                        "`make check-pythons` says why" % (self.version, self.exe, AGENT_DIR))
        return self

    def __repr__(self):
        return "Interp(%s, %s)" % (self.id, self.exe)


def _chosen_pythons():
    """The interpreters named by `make PYTHONS=...` for this build (their
    real paths), or None when the build took every one it found."""
    try:
        chosen = (BUILD / "pythons.choice").read_text().split()
    except OSError:
        return None
    return {os.path.realpath(p) for p in chosen} or None




def _system_minor():
    """The minor version of Debian's /usr/bin/python3 ("3.11"), or None."""
    try:
        out = subprocess.run(["/usr/bin/python3", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                             capture_output=True, text=True)
    except OSError:
        return None
    return out.stdout.strip() if out.returncode == 0 else None


# The id of Debian's own Python: debian-3.11 on Debian 12, debian-3.14 in sid.
DEBIAN_ID = "debian-%s" % (_system_minor() or "3.11")
ALL_IDS = [DEBIAN_ID, "3.8", "3.9", "3.10", "3.11", "3.12", "3.13", "3.14", "3.15"]


def _interp(ident):
    if ident.startswith("debian-"):
        minor = ident[len("debian-"):]
        if ident == DEBIAN_ID:
            exe = Path("/usr/bin/python3")
        else:
            exe = Path("/usr/bin/python" + minor)
        return Interp(ident, exe if exe.exists() else None)
    return Interp(ident, _find_pyenv(ident))


def _selected_ids():
    sel = os.environ.get("STRATA_TEST_PYTHONS")
    return sel.split() if sel else ALL_IDS


_INTERPS = {}


def get_interp(ident):
    if ident not in _INTERPS:
        _INTERPS[ident] = _interp(ident)
    return _INTERPS[ident]


# The interpreters of `edge_pythons` tests: Debian's, the oldest and the
# newest (pyenv ids in ALL_IDS order), and whatever is selected explicitly;
# or those STRATA_TEST_EDGE_PYTHONS names.
_EDGE_ENV = os.environ.get("STRATA_TEST_EDGE_PYTHONS", "").split()
EDGE_IDS = set(_EDGE_ENV) or {DEBIAN_ID, "3.8", "3.13", "3.14", "3.15"}


def pytest_configure(config):
    config.addinivalue_line("markers", "edge_pythons: a version-independent check, run under Debian's, the "
                            "oldest and the newest Python only (STRATA_TEST_EVERY_PYTHON=1: every one)")


# pyenv's build of Debian's own minor version, and the tests it runs.
SAME_AS_DEBIAN = DEBIAN_ID[len("debian-"):]
BUILD_TESTS = {"test_native.py", "test_buildcheck.py", "test_debuginfo.py", "test_jit.py"}


def pytest_collection_modifyitems(config, items):
    if os.environ.get("STRATA_TEST_EVERY_PYTHON") or (os.environ.get("STRATA_TEST_PYTHONS") and not _EDGE_ENV):
        return
    explicit = bool(os.environ.get("STRATA_TEST_PYTHONS"))
    keep, drop = [], []
    for item in items:
        cs = getattr(item, "callspec", None)
        ident = cs.params.get("python") if cs else None
        if ident and item.get_closest_marker("edge_pythons") and ident not in EDGE_IDS:
            drop.append(item)
        elif ident == SAME_AS_DEBIAN and not explicit and Path(str(item.fspath)).name not in BUILD_TESTS:
            drop.append(item)
        else:
            keep.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep



# Where a failed test's temporary directory (its profiles, its programs'
# output) is copied: pytest keeps only its last three runs' directories,
# and a failure seen once in a fresh clone's `make check` is worth its
# evidence. Emptied at the start of each run.
FAILURES = BUILD / "test-failures"
FAILURE_COPY_MAX = 64 << 20


def pytest_sessionstart(session):
    if not hasattr(session.config, "workerinput"):  # the controller, not an xdist worker
        shutil.rmtree(FAILURES, ignore_errors=True)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    tmp = item.funcargs.get("tmp_path") if hasattr(item, "funcargs") else None
    if rep.when != "call" or not rep.failed or not tmp or not Path(tmp).is_dir():
        return
    name = "".join(c if c.isalnum() or c in "-_.[]" else "_" for c in item.nodeid.split("::", 1)[-1])
    left = [FAILURE_COPY_MAX]

    def small(d, names):
        skip = []
        for n in names:
            p = Path(d) / n
            size = p.stat().st_size if p.is_file() and not p.is_symlink() else 0
            if size > left[0]:
                skip.append(n)
            else:
                left[0] -= size
        return skip

    try:
        shutil.copytree(tmp, FAILURES / name, ignore=small, symlinks=True, dirs_exist_ok=True)
        rep.sections.append(("strata", "this test's files were kept in %s" % (FAILURES / name)))
    except OSError as e:
        rep.sections.append(("strata", "could not keep this test's files: %s" % e))

@pytest.fixture(params=_selected_ids())
def python(request):
    return get_interp(request.param).require()


def debian_interp():
    """Debian's /usr/bin/python3 (3.11 on Debian 12, 3.14 in sid), which has
    numpy and numba from Debian."""
    return get_interp(DEBIAN_ID)


@pytest.fixture
def debian_python():
    """Debian's /usr/bin/python3 (3.11 on Debian 12, 3.14 in sid), which has
    numpy and numba from Debian."""
    return debian_interp().require()


class Result:
    def __init__(self, proc, path):
        self.proc = proc
        self.path = path
        self.returncode = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        self._report = None

    def report(self, *args):
        if self._report is None or args:
            rep = strata("report", "--json", *args, str(self.path))
            assert rep.returncode == 0, rep.stderr
            data = json.loads(rep.stdout)
            if args:
                return data
            self._report = data
        return self._report


def strata(*args, env=None, timeout=300, input=None, cwd=None):
    return subprocess.run([str(STRATA)] + [str(a) for a in args], capture_output=True, text=True,
                          env=env, timeout=timeout, input=input, cwd=cwd)


@pytest.fixture
def record(tmp_path):
    """record(python, "prog.py", args..., opts=[...]) runs `strata record` on
    a program from tests/func/programs and returns a Result."""
    counter = [0]

    def run(interp, prog, *args, opts=(), env=None, timeout=300, cwd=None, exe=None):
        counter[0] += 1
        out = tmp_path / ("p%d.strata" % counter[0])
        exe = exe or interp.exe
        script = PROGRAMS / prog if not os.path.isabs(str(prog)) else Path(prog)
        cmd = ["record", "-o", out] + list(opts) + ["--", exe, script] + list(args)
        proc = strata(*cmd, env=env, timeout=timeout, cwd=cwd)
        return Result(proc, out)

    return run


def chunk_spans(data):
    """(start, end) of each chunk of a .strata file: a 32-byte file header,
    then chunks of a 40-byte header (stored size at byte 28) and their
    payload (docs/format.md)."""
    spans, off = [], 32
    while off + 40 <= len(data):
        assert data[off:off + 4] == b"SCHK", off
        end = off + 40 + int.from_bytes(data[off + 28:off + 32], "little")
        spans.append((off, end))
        off = end
    assert off == len(data)
    return spans


def need_tool(name, how):
    """The path of a program a test checks strata's output with (an
    export's consumer, perf, a compiler). scripts/deps.sh installs every
    one of them, so one that is missing fails the test that needs it: a
    check that did not run must not pass as one that did."""
    path = shutil.which(name)
    if not path:
        pytest.fail("%s is not installed (%s): this test checks strata's output with it" % (name, how))
    return path


def func_row(report, name, file=None):
    """The report's row of function `name` (the first, by self); with `file`,
    of the one whose file ends with it: a name the program shares with the
    standard library's start-up (`main`: site.main, sampled while Python
    starts) may otherwise be the other one's."""
    rows = [f for f in report["functions"] if f["name"] == name and (file is None or f["file"].endswith(file))]
    assert rows, "function %s not in profile: %s" % (name, [f["name"] for f in report["functions"][:30]])
    return rows[0]


def share(report, name, key="self"):
    return func_row(report, name)[key] / report["samples"]


def burned(stdout, clock):
    """heavy's and light's time in burn() that async_tasks.py measured and
    printed, by the "wall" or the "cpu" clock."""
    line = [l for l in stdout.splitlines() if l.startswith("burned ")]
    assert line, "async_tasks.py printed no times: %r" % stdout[-500:]
    words = line[-1].split()
    at = words.index(clock)
    return tuple(float(w.split("=")[1]) for w in words[at + 1:at + 3])


def assert_split(got, want, what):
    """Samples got = (a, b) split as the times want = (a, b) the program
    measured in the same run: within three standard deviations of
    sampling's chance at this many samples, plus 2 points (what runs between the
    measured parts). Measured, not
    assumed, because under load a program preempted in one part takes
    more wall time there than its work alone says."""
    a, b = got
    n = a + b
    assert a > 0 and b > 0, "%s: %s:%s samples" % (what, a, b)
    p = want[0] / (want[0] + want[1])
    tol = 3 * (p * (1 - p) / n) ** 0.5 + 0.02
    assert abs(a / n - p) <= tol, "%s: %s:%s samples (%.1f%%), the program measured %.1f%% +- %.1f" % (
        what, a, b, 100.0 * a / n, 100.0 * p, 100.0 * tol)


def cpu_ms(pid):
    """The CPU time (user and system) process pid has used, in ms (the
    kernel's clock ticks: 10 ms steps)."""
    fields = Path("/proc/%d/stat" % pid).read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000.0 / os.sysconf("SC_CLK_TCK")


def assert_window_samples(samples, cpu, what, wall_ms=None, window_s=None):
    """A cpu-mode profile of a window of wall time (record --pid -d) of a
    single-threaded program that used `cpu` ms (cpu_ms around the record,
    its attach and its end included): one sample per ms of CPU time, so no
    more than that (and the clock's steps) and no fewer than half of it
    less 50 ms; at least 20, so that the shares checked after mean
    something. A fixed minimum said more about the machine than about
    strata: under make check's load a program got 76 ms of CPU in a 2 s
    window. Given the record's wall time (wall_ms) and the profile's own
    window (its duration_s), the CPU time outside the window (at most one
    ms per ms of wall time, for one thread) is not held against it: under
    load, an attach's start and end took long enough that a 1.5 s window
    had 764 samples while the process used 1740 ms over the whole record."""
    outside = max(0.0, wall_ms - 1000.0 * window_s) if wall_ms is not None and window_s is not None else 0.0
    low = 0.5 * max(0.0, cpu - outside) - 50
    assert samples >= 20 and low <= samples <= 1.1 * cpu + 30, \
        "%s: %d samples while the process used %.0f ms of CPU (%.0f ms outside the profile's window)" % (
            what, samples, cpu, outside)


def build_embedding(python, source, where):
    """programs/native/SOURCE, a program that embeds Python, built with
    -O2 and linked with the interpreter's own python3.X-config --embed
    flags into directory `where`; None if this interpreter has no
    python3.X-config."""
    q = subprocess.run([str(python.exe), "-c", "import sysconfig; print(sysconfig.get_config_var('BINDIR')); "
                        "print(sysconfig.get_config_var('VERSION')); print(sysconfig.get_config_var('LIBDIR'))"],
                       capture_output=True, text=True, check=True).stdout.split("\n")
    config = "%s/python%s-config" % (q[0], q[1])

    def ask(*args):
        out = subprocess.run([config] + list(args), capture_output=True, text=True)
        return shlex.split(out.stdout) if out.returncode == 0 else None

    cflags, ldflags = ask("--cflags"), ask("--embed", "--ldflags")
    if cflags is None or ldflags is None:
        return None
    exe = where / Path(source).stem
    subprocess.run(["gcc", "-O2"] + cflags + ["-o", str(exe), str(PROGRAMS / "native" / source)] +
                   ldflags + ["-Wl,-rpath," + q[2]], check=True)
    return exe


def plain_env(**extra):
    """This environment without strata in it (no STRATA_* variable, no
    LD_PRELOAD), and `extra`: for a program run without strata, or started
    plain for an attach."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("STRATA_") and k != "LD_PRELOAD"}
    env.update(extra)
    return env
