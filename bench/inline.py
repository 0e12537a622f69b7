#!/usr/bin/env python3
"""Cost of inline expansion in `strata report` and `strata convert` on a
1,000,000-sample native profile (issue 14).

Native frames inside code that the compiler inlined become frames of their
own (docs/native.md, "Inlined functions"): finding them takes DWARF scope
lookups when the profile is loaded, and the extra frames cost every output.
This bench makes two synthetic native profiles with tests/unit/genprof
(`make build/unit/genprof`):

  libc       genprof --native: Debian's python3.11 (no DWARF) for the eval
             loop and call machinery, half the leaves in glibc (DWARF from
             libc6-dbg, -O2: a few functions inlined)
  libpython  genprof --native --leaf-lib LIBPYTHON: every leaf in pyenv's
             libpython (-O3 -g: most leaves inside inlined functions), the
             worst case for the lookups

and times, for each, `report --json` and `convert -f FORMAT` with inline
expansion (the default) and with `--no-inline` side by side:
the two run one after the other, --runs times, and the medians of their CPU
times (whole command: load + symbolize + aggregate + write) and of the
per-pair ratios are printed, with the mean number of frames per sample
both ways. `--no-inline` still looks the scopes up (the function around an
address is found in the same descent), so that column is the cost of the
extra frames in the model and the output; the lookups themselves are
what --against measures. --against PATH times another build of the CLI instead of
--no-inline (a before/after comparison of the default).

    bench/inline.py                       # both profiles, 5 pairs
    bench/inline.py --runs 3 --format collapsed
    bench/inline.py --against /tmp/old/build/bin/strata
"""
import argparse
import glob
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GENPROF = ROOT / "build" / "unit" / "genprof"


def cpu_of(cmd):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run(cmd, capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode:
        sys.exit("failed: %s\n%s" % (" ".join(map(str, cmd)), r.stderr.decode(errors="replace")))
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def frames_per_sample(strata, prof, extra, tmp):
    out = Path(tmp) / "c.folded"
    subprocess.run([strata, "convert", "-f", "collapsed", *extra, prof, "-o", out], check=True)
    frames = samples = 0
    with open(out) as f:
        for line in f:
            stack, n = line.rsplit(" ", 1)
            frames += int(n) * (stack.count(";") + 1)
            samples += int(n)
    return frames / samples


def libpython():
    root = subprocess.run(["pyenv", "root"], capture_output=True, text=True).stdout.strip() or \
        os.path.expanduser("~/.pyenv")
    found = sorted(glob.glob(root + "/versions/3.1[2-9]*/lib/libpython3.*.so.1.0"))
    return found[-1] if found else None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", type=int, default=1000000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--format", action="append", help="convert formats (default: collapsed pprof callgrind speedscope)")
    ap.add_argument("--strata", default=str(ROOT / "build" / "bin" / "strata"))
    ap.add_argument("--against", help="another build's strata: time it instead of --no-inline (before/after)")
    a = ap.parse_args()
    formats = a.format or ["collapsed", "pprof", "callgrind", "speedscope"]
    if not GENPROF.exists():
        subprocess.run(["make", "-C", str(ROOT), "build/unit/genprof"], check=True, capture_output=True)
    profiles = [("libc", [])]
    lp = libpython()
    if lp:
        profiles.append(("libpython", ["--leaf-lib", lp]))
    else:
        print("no pyenv libpython 3.12+ with DWARF found: the libpython profile is skipped")
    print("load average: %.2f %.2f %.2f" % os.getloadavg())
    other = "--no-inline" if not a.against else "build " + a.against
    print("| profile | command | CPU s, inline (median) | CPU s, %s | ratio (median of pairs) | frames/sample, inline "
          "| --no-inline |" % other)
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name, args in profiles:
            prof = Path(tmp) / (name + ".strata")
            subprocess.run([GENPROF, "--native", *args, "-n", str(a.samples), "-o", prof], check=True,
                           capture_output=True)
            fps = [frames_per_sample(a.strata, prof, x, tmp) for x in ([], ["--no-inline"])]
            cmds = [("report --json", ["report", "--json"])] + \
                [("convert -f " + f, ["convert", "-f", f, "-o", str(Path(tmp) / "out")]) for f in formats]
            for label, cmd in cmds:
                # Side by side: each run times both, one after the other.
                mine, theirs = [], []
                for _ in range(a.runs):
                    mine.append(cpu_of([a.strata, *cmd, prof]))
                    if a.against:
                        theirs.append(cpu_of([a.against, *cmd, prof]))
                    else:
                        theirs.append(cpu_of([a.strata, *cmd, "--no-inline", prof]))
                ratio = statistics.median(m / t for m, t in zip(mine, theirs))
                print("| %s | %s | %.2f | %.2f | %.2f | %.2f | %.2f |" % (
                    name, label, statistics.median(mine), statistics.median(theirs), ratio, fps[0], fps[1]))
                sys.stdout.flush()

if __name__ == "__main__":
    main()
