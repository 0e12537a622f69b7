#!/usr/bin/env python3
"""The wheel, installed and used everywhere it should work (issue 22; make
check-wheel, part of make check).

usage: tests/wheel/matrix.py [WHEEL]     (default: the one in dist/)

First the wheel itself: one file, tagged py3-none-manylinux_*_x86_64, with
a module for every CPython minor present here, an agent that links only the
C library, and the one-line stop of a build whose dependency is missing.
Then tests/wheel/battery.py (every command against a known answer) in:

  - a fresh virtualenv of every CPython here: Debian's /usr/bin/python3 and
    pyenv's 3.8-3.13 (whose venv's strata also profiles /usr/bin/python3,
    and, for 3.10+, --jit-lines on Numba from PyPI in scripts/pyenvs.sh's
    virtualenv of the same version: Numba is not downloaded again into
    each fresh venv);
  - a fresh virtualenv of sid's 3.14 and 3.15 in the sid root
    (scripts/sidroot.sh; Numba: Debian's for 3.14, PyPI's in the root's
    venv for 3.15);
  - fresh Debian 12 and 13 minbase roots (scripts/minroot.sh: python3,
    python3-venv, python3-pip, nothing else) as an ordinary user, once with
    pip install --user and once in a venv (tests/wheel/inroot.sh). Numba is
    not installed there (hundreds of MB per run for a check the venvs above
    make).

A root this machine cannot have (not root, no Debian mirror) is skipped
with one line saying why. Jobs run STRATA_TEST_JOBS (default: the number
of cores + 1) at a time; each job's output is printed whole when it ends.
Exit status 1 if any check failed.
"""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
WORK = os.path.join(ROOT, "build", "wheel-test")
FUNC_PROGRAMS = os.path.join(ROOT, "tests", "func", "programs")
SKIP = 77
MINORS = ["3.%d" % m for m in range(8, 16)]

out_lock = threading.Lock()
results = {"ok": 0, "fail": 0, "skip": 0}
failed_jobs = []


def say(msg):
    with out_lock:
        print(msg, flush=True)


def pyversion(py):
    try:
        out = subprocess.run([py, "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"],
                             capture_output=True, text=True, timeout=60).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out or None


# ---- the wheel itself ------------------------------------------------------------

def check_wheel(wheel, want_minors):
    """Returns the minor versions the wheel has modules for."""
    name = os.path.basename(wheel)
    ok = True
    m = re.match(r"strata_profiler-[^-]+-py3-none-(manylinux_(\d+)_(\d+)_x86_64)\.whl$", name)
    if not m:
        say("FAIL wheel tag: %s is not a py3-none-manylinux_*_x86_64 wheel" % name)
        ok = False
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        size = sum(i.file_size for i in z.infolist())
    versions = sorted({x.group(1) for x in (re.match(r"strata/lib/strata/strata-py-(\d+\.\d+)\.\d+\.so$", n)
                                            for n in names) if x}, key=lambda v: int(v.split(".")[1]))
    for need in ("strata/bin/strata", "strata/lib/strata/libstrata-agent.so", "strata/lib/strata/strata-agentd",
                 "strata/lib/strata/libstrata-capstone.so", "strata/__main__.py", "strata/_cli.py"):
        if need not in names:
            say("FAIL wheel contents: no %s" % need)
            ok = False
    lacking = [v for v in want_minors if v not in versions]
    if lacking:
        say("FAIL wheel modules: none for Python %s, which is here (has: %s)" % (" ".join(lacking), " ".join(versions)))
        ok = False
    missing_all = [v for v in MINORS if v not in versions]
    say("%s wheel %s: %.1f MB, %.1f MB installed, modules for %s%s" % (
        "ok" if ok else "FAIL", name, os.path.getsize(wheel) / 1e6, size / 1e6, " ".join(versions),
        "; none for %s (not on this machine)" % " ".join(missing_all) if missing_all and not lacking else ""))
    results["ok" if ok else "fail"] += 1
    return versions


def check_builddeps():
    """pip wheel . on a machine missing a build dependency stops with one
    line naming the package, not a compiler error (a compiler that cannot
    find capstone's header, simulated)."""
    tmp = tempfile.mkdtemp(prefix="strata-builddeps-")
    try:
        cc = os.path.join(tmp, "cc")
        with open(cc, "w") as f:
            f.write("#!/bin/sh\n# cc without capstone's header\n"
                    "for a; do case $a in *.c) grep -q capstone \"$a\" 2>/dev/null && exit 1;; esac; done\n"
                    "exec cc \"$@\"\n")
        os.chmod(cc, 0o755)
        tools = os.path.join(ROOT, ".venvs", "wheel-tools", "bin", "python")
        env = dict(os.environ, CC=cc)
        r = subprocess.run([tools, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "--disable-pip-version-check",
                            "-w", tmp, ROOT], env=env, capture_output=True, text=True, timeout=600)
        out = r.stdout + r.stderr
        lines = [l.strip(" |") for l in out.splitlines() if "strata: cannot build" in l]
        # pip frames the backend's output: "[1 lines of output]" is ours.
        good = (r.returncode != 0 and len(lines) == 1 and "capstone/capstone.h" in lines[0]
                and "libcapstone-dev" in lines[0] and "capstone-devel" in lines[0]
                and "[1 lines of output]" in out and "fatal error" not in out)
        say("%s build-deps: pip wheel . stops with: %s" % ("ok" if good else "FAIL", lines[0] if lines else
                                                           "(no such line)\n" + out[-3000:]))
        results["ok" if good else "fail"] += 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# ---- jobs ----------------------------------------------------------------------------

def stage_programs():
    """battery.py and its programs, in one directory a root can copy."""
    stage = os.path.join(WORK, "stage")
    shutil.rmtree(stage, ignore_errors=True)
    os.makedirs(os.path.join(stage, "programs", "jit"))
    shutil.copy(os.path.join(HERE, "battery.py"), stage)
    for p in glob.glob(os.path.join(HERE, "programs", "*.py")):
        shutil.copy(p, os.path.join(stage, "programs"))
    for p in ("split.py", "block.py"):
        shutil.copy(os.path.join(FUNC_PROGRAMS, p), os.path.join(stage, "programs"))
    shutil.copy(os.path.join(FUNC_PROGRAMS, "jit", "hotline.py"), os.path.join(stage, "programs", "jit"))
    return stage


def host_jobs(wheel, stage):
    """A fresh venv per CPython on this machine."""
    jobs = []
    cands = ["/usr/bin/python3"] if os.access("/usr/bin/python3", os.X_OK) else []
    try:
        proot = subprocess.run(["pyenv", "root"], capture_output=True, text=True).stdout.strip()
    except OSError:
        proot = ""
    proot = proot or os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    cands += sorted(glob.glob(os.path.join(proot, "versions", "*", "bin", "python")))
    venvs = os.environ.get("STRATA_VENVS") or os.path.join(ROOT, ".venvs")
    minors = []
    for py in cands:
        ver = pyversion(py)
        if not ver:
            continue
        minor = ver.rsplit(".", 1)[0]
        if minor not in MINORS:
            say("skip venv-%s: Python %s is not supported (3.8 to 3.15)" % (ver, ver))
            continue
        minors.append(minor)
        label = ("debian-" if py.startswith("/usr/bin/") else "venv-") + ver
        v = os.path.join(WORK, "venvs", label)
        w = os.path.join(WORK, "work", label)
        jit = os.path.join(venvs, ver, "bin", "python")
        args = ["--other", "/usr/bin/python3"]
        if int(minor.split(".")[1]) >= 10 and os.path.exists(os.path.join(venvs, ver, ".ready")):
            args += ["--jit", jit]
        script = ("set -e; rm -rf {v} {w}; {py} -m venv {v}; t0=$(date +%s.%N); "
                  "{v}/bin/pip install -q --no-index --disable-pip-version-check {wheel}; t1=$(date +%s.%N); "
                  "echo \"ok {label} pip-install-venv $(echo \"$t0 $t1\" | awk '{{printf \"%.1f s\", $2 - $1}}')\"; "
                  "exec /usr/bin/python3 {stage}/battery.py --label {label} --strata {v}/bin/strata "
                  "--python {v}/bin/python --programs {stage}/programs --work {w} {args}").format(
            v=v, w=w, py=py, wheel=wheel, label=label, stage=stage, args=" ".join(args))
        jobs.append((label, ["sh", "-c", script]))
    return jobs, minors


def sid_jobs(wheel, stage):
    """Fresh venvs of sid's 3.14 and 3.15, in the sid root (made by
    scripts/sidroot.sh; used here as it is, on an overlay)."""
    sid = os.environ.get("STRATA_SIDROOT", "/var/cache/strata/sid/root")
    jobs, minors = [], []
    for minor, other in (("3.14", "python3.15"), ("3.15", "python3.14")):
        if not os.access(os.path.join(sid, "usr", "bin", "python" + minor), os.X_OK):
            continue
        minors.append(minor)
        jit = "/usr/bin/python3.14" if minor == "3.14" else ""
        if minor == "3.15":
            ready = glob.glob(os.path.join(sid, "opt", "strata", "venvs", "3.15.*", ".ready"))
            jit = ready and os.path.join(os.path.dirname(ready[0])[len(sid):], "bin", "python")
        label = "sid-" + minor
        script = ("set -e; v=/tmp/venv; python{m} -m venv $v; t0=$(date +%s.%N); "
                  "$v/bin/pip install -q --no-index --disable-pip-version-check {wheel}; t1=$(date +%s.%N); "
                  "echo \"ok {label} pip-install-venv $(echo \"$t0 $t1\" | awk '{{printf \"%.1f s\", $2 - $1}}')\"; "
                  "exec python3 {stage}/battery.py --label {label} --strata $v/bin/strata --python $v/bin/python "
                  "--other /usr/bin/{other} --programs {stage}/programs --work /tmp/work{jit}").format(
            m=minor, wheel=wheel, label=label, stage=stage, other=other, jit=" --jit " + jit if jit else "")
        jobs.append((label, [os.path.join(ROOT, "scripts", "minroot.sh"), "run", "sid", "sh", "-c", script]))
    if not jobs:
        say("skip sid-3.14, sid-3.15: no sid root in %s (scripts/sidroot.sh ensure makes it)" % sid)
    return jobs, minors


def root_jobs(wheel, stage):
    """Debian 12 and 13 minbase roots, as an ordinary user."""
    jobs = []
    for suite, name in (("bookworm", "debian12"), ("trixie", "debian13")):
        r = subprocess.run([os.path.join(ROOT, "scripts", "minroot.sh"), "ensure", suite],
                           capture_output=True, text=True)
        if r.returncode == SKIP:
            say("skip %s: %s" % (name, r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "no root"))
            results["skip"] += 1
            continue
        if r.returncode != 0:
            say("FAIL %s root: scripts/minroot.sh ensure %s: %s" % (name, suite, r.stderr.strip()))
            results["fail"] += 1
            continue
        for how in ("user", "venv"):
            jobs.append(("%s-%s" % (name, how),
                         [os.path.join(ROOT, "scripts", "minroot.sh"), "run", suite, "sh",
                          os.path.join(HERE, "inroot.sh"), how, wheel, stage, "%s-%s" % (name, how)]))
    return jobs


def run_job(label, cmd):
    t0 = time.time()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
        out, rc = r.stdout + r.stderr, r.returncode
    except subprocess.TimeoutExpired as e:
        out, rc = (e.stdout or b"").decode(errors="replace") + "\n(timed out after 1800 s)", 124
    n_ok = len(re.findall(r"^ok ", out, re.M))
    n_fail = len(re.findall(r"^FAIL ", out, re.M))
    n_skip = len(re.findall(r"^skip ", out, re.M))
    if rc == SKIP and not n_ok and not n_fail:
        with out_lock:
            print("skip %s: %s" % (label, out.strip().splitlines()[-1] if out.strip() else "skipped"), flush=True)
            results["skip"] += 1
        return
    with out_lock:
        print("---- %s (%.0f s) ----" % (label, time.time() - t0))
        print(out.rstrip(), flush=True)
        results["ok"] += n_ok
        results["fail"] += n_fail
        results["skip"] += n_skip
        if rc != 0:
            failed_jobs.append(label)
            if not n_fail:
                results["fail"] += 1
                print("FAIL %s: exit status %d" % (label, rc), flush=True)


def run_all(jobs, width):
    pending = list(jobs)
    lock = threading.Lock()

    def worker():
        while True:
            with lock:
                if not pending:
                    return
                label, cmd = pending.pop(0)
            run_job(label, cmd)

    threads = [threading.Thread(target=worker) for _ in range(max(1, width))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def main():
    t0 = time.time()
    if len(sys.argv) > 1:
        wheel = os.path.abspath(sys.argv[1])
    else:
        found = sorted(glob.glob(os.path.join(ROOT, "dist", "strata_profiler-*.whl")), key=os.path.getmtime)
        if not found:
            print("matrix.py: no wheel in dist/: make wheel builds it", file=sys.stderr)
            return 2
        wheel = found[-1]
    os.makedirs(WORK, exist_ok=True)
    stage = stage_programs()
    # The roots see the checkout at its own path; the wheel is copied
    # beside the stage so that an ordinary user there can read it.
    local = os.path.join(WORK, os.path.basename(wheel))
    if os.path.abspath(local) != wheel:
        shutil.copy(wheel, local)
    os.chmod(local, 0o644)

    hjobs, hminors = host_jobs(local, stage)
    sjobs, sminors = sid_jobs(local, stage)
    check_wheel(wheel, sorted(set(hminors + sminors), key=lambda v: int(v.split(".")[1])))
    check_builddeps()
    rjobs = root_jobs(local, stage)
    # One more than the cores: every job also waits (venvs made, sleeps in
    # wall mode, the attach's duration), and the checks hold under load.
    width = int(os.environ.get("STRATA_TEST_JOBS") or (os.cpu_count() or 1) + 1)
    # The roots first: each is the longest job (a root's two batteries
    # side by side would share one run's time otherwise).
    run_all(rjobs + sjobs + hjobs, width)
    say("strata: wheel matrix: %d ok, %d failed, %d skipped in %.0f s%s" % (
        results["ok"], results["fail"], results["skip"], time.time() - t0,
        " (failed: %s)" % ", ".join(failed_jobs) if failed_jobs else ""))
    return 1 if results["fail"] else 0


if __name__ == "__main__":
    sys.exit(main())
