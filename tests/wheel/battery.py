#!/usr/bin/env python3
"""The checks run against one installation of the wheel (issue 22): every
command a user would run, each against a known answer, using only what
pip installed (the `strata` entry point and the `strata` package).

usage: battery.py --label NAME --strata CMD --python PY --programs DIR --work DIR
                  [--other PY] [--jit PY]

  --strata    the installed `strata` console entry point (venv/bin/strata,
              ~/.local/bin/strata)
  --python    the interpreter the package was installed for (its
              `python -m strata` and `import strata` are tested)
  --programs  tests/wheel/programs, with tests/func/programs' split.py,
              block.py and jit/hotline.py beside them
  --other     another interpreter, without the package, that this strata
              must profile too
  --jit       an interpreter with Numba, for --jit-lines and --native
              through JIT code without CFI (the helper's capstone)
  --skip-ptrace WHY   skip stack and attach (this user may not trace its
              own processes here), printing WHY

Prints one line per check, "ok LABEL CHECK" or "FAIL LABEL CHECK: why",
and exits 1 if any failed. Runs under Python 3.8 or later, standard
library only: it runs in minimal roots that have nothing else.
"""
import argparse
import ctypes.util
import gzip
import json
import os
import re
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# split.py's 3:1: heavy's share within 5 points, or within three standard
# deviations of sampling's chance at the profile's count plus 2 points
# where that is wider (the functional suite's assert_split). A fixed bound
# failed an attach that got 321 samples in its 2 s under CI's load (0.829).
SPLIT_P = 0.75


def split_ok(a, b, p=SPLIT_P):
    n = a + b
    tol = max(0.05, 3 * (p * (1 - p) / n) ** 0.5 + 0.02) if n else 0
    return n > 0 and abs(a / float(n) - p) <= tol, tol


def measured_split(path):
    """heavy's share of the CPU time split.py measured in its own run
    ($SPLIT_CPU_OUT), or None: the work is 3:1, the CPU time 3.0-3.3:1
    here, and a loaded machine took one run's profile to 0.821."""
    try:
        with open(path) as f:
            t = dict(w.split("=") for w in f.read().split())
        h, l = float(t["heavy"]), float(t["light"])
        return h / (h + l) if h + l > 0 else None
    except (OSError, KeyError, ValueError):
        return None


class Check(Exception):
    pass


class Battery:
    def __init__(self, args):
        self.a = args
        self.failed = []
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("STRATA_") and k != "LD_PRELOAD"}
        self.env.pop("PYTHONPATH", None)
        os.makedirs(args.work, exist_ok=True)

    # ---- helpers ----

    def path(self, name):
        return os.path.join(self.a.work, name)

    def prog(self, name):
        return os.path.join(self.a.programs, name)

    def run(self, cmd, timeout=180, ok=True, env=None):
        cmd = [str(c) for c in cmd]
        try:
            r = subprocess.run(cmd, env=env or self.env, cwd=self.a.work, capture_output=True, text=True,
                               timeout=timeout)
        except subprocess.TimeoutExpired:
            raise Check("timed out after %d s: %s" % (timeout, " ".join(cmd)))
        if ok and r.returncode != 0:
            raise Check("exit status %d: %s\n%s" % (r.returncode, " ".join(cmd), r.stderr.strip()[-2000:]))
        return r

    def strata(self, *args, **kw):
        return self.run([self.a.strata] + list(args), **kw)

    def report(self, f):
        r = self.strata("report", "--json", f)
        return json.loads(r.stdout)

    @staticmethod
    def func(rep, name):
        for f in rep["functions"]:
            if f["name"] == name:
                return f
        return None

    def split_share(self, rep, what="self", cpu=None):
        """heavy's share of the samples: 0.75 within split_ok's bounds, or,
        where the run wrote its CPU times (`cpu`, $SPLIT_CPU_OUT), the
        share of CPU time it measured."""
        h, l = self.func(rep, "heavy"), self.func(rep, "light")
        if not h or not l:
            raise Check("no heavy/light in the profile: %s" % [f["name"] for f in rep["functions"][:10]])
        share = h[what] / float(h[what] + l[what])
        p = measured_split(cpu) if cpu else None
        ok, tol = split_ok(h[what], l[what], p or SPLIT_P)
        if not ok:
            raise Check("heavy's share is %.3f (heavy %d, light %d), not %.3f +- %.3f%s" % (
                share, h[what], l[what], p or SPLIT_P, tol, " (its CPU time's, measured)" if p else ""))
        return share

    def cpu_env(self, name):
        """The environment for a run of split.py that writes its CPU times
        to the work file `name`, and that file's path."""
        path = self.path(name)
        if os.path.exists(path):
            os.unlink(path)
        return dict(self.env, SPLIT_CPU_OUT=path), path

    def start(self, cmd, ready=None):
        """A background process; waits for the line `ready` on its stdout."""
        p = subprocess.Popen([str(c) for c in cmd], env=self.env, cwd=self.a.work, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        if ready:
            line = p.stdout.readline()
            if ready not in line:
                p.kill()
                raise Check("%s did not start (%r): %s" % (cmd, line, p.stderr.read()[-1000:]))
        return p

    @staticmethod
    def stop(p):
        if p.poll() is None:
            p.send_signal(signal.SIGKILL)
        p.wait()

    def check(self, name, fn):
        t0 = time.time()
        try:
            detail = fn()
        except Check as e:
            self.failed.append(name)
            print("FAIL %s %s: %s" % (self.a.label, name, e), flush=True)
            return
        except Exception as e:  # a bug here, or output not as expected
            self.failed.append(name)
            print("FAIL %s %s: %s: %s" % (self.a.label, name, type(e).__name__, e), flush=True)
            return
        print("ok %s %s%s (%.1f s)" % (self.a.label, name, " " + detail if detail else "", time.time() - t0),
              flush=True)

    # ---- the checks ----

    def c_record(self):
        env, cpu = self.cpu_env("split.cpu")
        self.strata("record", "-q", "-o", self.path("split.strata"), "--", self.a.python, self.prog("split.py"), "0.8",
                    env=env)
        return "heavy %.3f" % self.split_share(self.report(self.path("split.strata")), cpu=cpu)

    def c_report(self):
        r = self.strata("report", self.path("split.strata"))
        if "heavy" not in r.stdout or "Hottest functions" not in r.stdout:
            raise Check("report without heavy: %s" % r.stdout[:500])

    def c_annotate(self):
        src = self.prog("split.py")
        r = self.strata("annotate", self.path("split.strata"), src)
        lines = open(src).read().splitlines()
        h0, l0 = lines.index("def heavy():") + 1, lines.index("def light():") + 1
        cost = {}
        for m in re.finditer(r"^\s+[\d.]+%\s+(\d+)\s+[\d.]+%\s+\d+\s+(\d+)\s", r.stdout, re.M):
            cost[int(m.group(2))] = int(m.group(1))
        h = sum(cost.get(n, 0) for n in range(h0, h0 + 5))
        l = sum(cost.get(n, 0) for n in range(l0, l0 + 5))
        if not h or not split_ok(h, l)[0]:
            raise Check("heavy's lines %d, light's %d: not 3:1\n%s" % (h, l, r.stdout[:1500]))

    def c_callgrind(self):
        out = self.path("split.callgrind")
        self.strata("convert", self.path("split.strata"), "-f", "callgrind", "-o", out)
        text = open(out).read()
        if not text.startswith("# callgrind format") or not re.search(r"^fn=.*heavy", text, re.M):
            raise Check("not a callgrind profile with heavy: %r" % text[:300])

    def c_pprof(self):
        out = self.path("split.pb.gz")
        self.strata("convert", self.path("split.strata"), "-f", "pprof", "-o", out)
        with gzip.open(out) as f:
            data = f.read()
        if b"heavy" not in data or b"light" not in data:
            raise Check("the pprof profile's strings have no heavy/light")

    def c_html(self):
        out = self.path("split.html")
        self.strata("convert", self.path("split.strata"), "-f", "html", "-o", out)
        text = open(out, encoding="utf-8").read()
        if "<html" not in text.lower() or "heavy" not in text:
            raise Check("not a flame graph page with heavy")

    def c_native(self):
        out = self.path("native.strata")
        self.strata("record", "-q", "--native", "-o", out, "--", self.a.python, self.prog("native_zlib.py"), "0.8")
        rep = self.report(out)
        sq = self.func(rep, "squeeze")
        libz = sum(f["self"] for f in rep["functions"]
                   if f["kind"] == "native" and "libz.so" in (f.get("module") or ""))
        if not sq or sq["total"] < 0.8 * rep["samples"]:
            raise Check("squeeze() is not most of the profile: %s" % rep["functions"][:5])
        # zlib.compress does its work in libz: most of squeeze()'s samples
        # are native frames of libz under it.
        if libz < 0.5 * sq["total"]:
            raise Check("libz frames have %d of squeeze()'s %d samples" % (libz, sq["total"]))
        return "libz %d/%d" % (libz, sq["total"])

    def c_wall(self):
        out = self.path("wall.strata")
        self.strata("record", "-q", "--mode", "wall", "-o", out, "--", self.a.python, self.prog("naps.py"), "0.6")
        rep = self.report(out)
        nap, burn = self.func(rep, "nap"), self.func(rep, "burn")
        slept = self.func(rep, "[sleeping]")
        # nap() sleeps 0.6 s in all: in wall mode about 0.6 * rate_hz
        # samples (in cpu mode none) under it, at a [sleeping] leaf
        # (docs/report.md); under load fewer, never near zero.
        want = rep["rate_hz"] * 0.6
        if not nap or not burn or not slept or nap["total"] < 0.5 * want or slept["self"] < 0.5 * want:
            raise Check("nap %s, [sleeping] %s, burn %s samples; want nap and [sleeping] >= %d" %
                        (nap and nap["total"], slept and slept["self"], burn and burn["self"], 0.5 * want))
        return "nap %d" % nap["total"]

    def c_top(self):
        r = self.strata("top", "--no-curses", "-i", "0.5", "-n", "5", "--", self.a.python, self.prog("split.py"), "1.5")
        blocks = [b for b in r.stdout.split("\n\n") if b.startswith("strata top ")]
        if len(blocks) < 2 or "heavy" not in blocks[-1] or "exited with status 0" not in r.stdout:
            raise Check("top's output: %s" % r.stdout[-1500:])

    def c_stack(self):
        p = self.start([self.a.python, self.prog("waiting.py")], ready="ready")
        try:
            r = self.strata("stack", p.pid)
        finally:
            self.stop(p)
        if "in wait_here" not in r.stdout or "in main" not in r.stdout:
            raise Check("no wait_here/main in the stack: %s" % r.stdout[:1500])

    def c_attach(self):
        p = self.start([self.a.python, self.prog("split_ready.py"), "60"], ready="ready")
        try:
            out = self.path("attach.strata")
            r = self.strata("record", "-q", "--pid", p.pid, "-d", "2", "-o", out, ok=False)
            if r.returncode != 0 and "could not be paused" in r.stderr:
                # The attach gives each thread 500 ms to stop for ptrace; on
                # a machine loaded far past its cores that can pass while
                # the thread waits for a CPU (seen at a load of 30 on 2).
                print("note %s attach: retried once: %s" % (self.a.label, r.stderr.strip()), flush=True)
                r = self.strata("record", "-q", "--pid", p.pid, "-d", "2", "-o", out, ok=False)
            if r.returncode != 0:
                raise Check("exit status %d: %s" % (r.returncode, r.stderr.strip()[-1000:]))
            if p.poll() is not None:
                raise Check("the process ended during the attach (status %s)" % p.returncode)
        finally:
            self.stop(p)
        return "heavy %.3f" % self.split_share(self.report(out))

    def c_python_m(self):
        out = self.path("pym.strata")
        env, cpu = self.cpu_env("pym.cpu")
        self.run([self.a.python, "-m", "strata", "-q", "-o", out, self.prog("split.py"), "0.8"], env=env)
        return "heavy %.3f" % self.split_share(self.report(out), cpu=cpu)

    def c_profile(self):
        out = self.path("block.strata")
        self.run([self.a.python, self.prog("block.py"), out, "0.8"])
        rep = self.report(out)
        names = {f["name"] for f in rep["functions"] if f["total"] > 0}
        inside = self.func(rep, "inside")
        # Only the block: inside() (with the threads beside it), not what
        # ran before or after it (block.py says how much each runs).
        if not inside or inside["total"] <= 100 or "before" in names or "after" in names:
            raise Check("strata.profile() block: inside %s, functions %s"
                        % (inside and inside["total"], sorted(names)))
        return "inside %d" % inside["total"]

    def c_other(self):
        out = self.path("other.strata")
        env, cpu = self.cpu_env("other.cpu")
        self.strata("record", "-q", "-o", out, "--", self.a.other, self.prog("split.py"), "0.8", env=env)
        rep = self.report(out)
        return "%s heavy %.3f" % (rep["python_version"], self.split_share(rep, cpu=cpu))

    def c_jit(self):
        out = self.path("jit.strata")
        self.strata("record", "-q", "--jit-lines", "-o", out, "--", self.a.jit, self.prog("jit/hotline.py"), "1",
                    timeout=300)
        rep = self.report(out)
        kern = [f for f in rep["functions"] if f["kind"] == "jit" and f["name"].startswith("__main__.kernel(")]
        if not kern:
            raise Check("no JIT kernel: %s" % [f["name"] for f in rep["functions"][:10]])
        src = open(self.prog("jit/hotline.py")).read().splitlines()
        hot = [i for i, s in enumerate(src, 1) if s.rstrip().endswith("# HOT")][0]
        lines = [l for l in rep["lines"] if l["function"] == kern[0]["name"] and l["kind"] == "jit"]
        total = sum(l["self"] for l in lines)
        at_hot = sum(l["self"] for l in lines if l["line"] == hot)
        if not total or at_hot < 0.8 * total:
            raise Check("the HOT line has %d of the kernel's %d JIT line samples" % (at_hot, total))
        return "HOT %d/%d" % (at_hot, total)

    def c_jit_native(self):
        # --native alone: Numba's code has no CFI, so the helper derives its
        # unwind rules with capstone, which it reaches through
        # libstrata-capstone.so and the wheel's vendored copy. Without it,
        # 60-87% of these stacks stop in the JIT code (test_jit.py).
        out = self.path("jitnat.strata")
        self.strata("record", "-q", "--native", "-o", out, "--", self.a.jit, self.prog("jit/hotline.py"), "1",
                    timeout=300)
        n = self.report(out)["native"]
        share = (n["failed"] + n["truncated"]) / float(max(n["samples"], 1))
        if n["samples"] < 500 or share > 0.05:
            raise Check("native walks cut short: %.1f%% of %d" % (100 * share, n["samples"]))
        return "cut short %.1f%% of %d" % (100 * share, n["samples"])

    def c_send_no_curl(self):
        # The wheel leaves libcurl to the system (docs/install.md): where
        # there is none, sending says so in one line naming the package,
        # and the program still runs and is recorded.
        out = self.path("send.strata")
        r = self.strata("record", "--send", "http://127.0.0.1:9/", "-o", out, "--", self.a.python,
                        self.prog("split.py"), "0.3")
        if "libcurl4" not in r.stderr:
            raise Check("no line naming libcurl4: %s" % r.stderr.strip()[-1000:])
        n = self.report(out)["samples"]
        if n < 100:
            raise Check("%d samples recorded" % n)
        return "said so; %d samples" % n

    def main(self):
        r = self.strata("--version")
        print("ok %s version %s" % (self.a.label, r.stdout.strip()), flush=True)
        self.check("record", self.c_record)
        if os.path.exists(self.path("split.strata")):
            self.check("report", self.c_report)
            self.check("annotate", self.c_annotate)
            self.check("convert-callgrind", self.c_callgrind)
            self.check("convert-pprof", self.c_pprof)
            self.check("convert-html", self.c_html)
        self.check("native", self.c_native)
        self.check("mode-wall", self.c_wall)
        self.check("top", self.c_top)
        if self.a.skip_ptrace:
            print("skip %s stack, attach: %s" % (self.a.label, self.a.skip_ptrace), flush=True)
        else:
            self.check("stack", self.c_stack)
            self.check("attach", self.c_attach)
        self.check("python-m-strata", self.c_python_m)
        self.check("strata.profile", self.c_profile)
        if self.a.other:
            self.check("other-interpreter", self.c_other)
        if ctypes.util.find_library("curl") is None:
            self.check("send-without-libcurl", self.c_send_no_curl)
        if self.a.jit:
            self.check("jit-lines", self.c_jit)
            self.check("jit-native", self.c_jit_native)
        return 1 if self.failed else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for opt in ("label", "strata", "python", "programs", "work"):
        ap.add_argument("--" + opt, required=True)
    ap.add_argument("--other")
    ap.add_argument("--jit")
    ap.add_argument("--skip-ptrace")
    return Battery(ap.parse_args()).main()


if __name__ == "__main__":
    sys.exit(main())
