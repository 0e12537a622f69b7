#!/usr/bin/env python3
"""Speed of `strata convert`: every registered format on a synthetic
1,000,000-sample profile (the goal is under 3 s each).

The profile comes from tests/unit/genprof (built by `make bench-load`'s
rule): one process, 8 threads, 3,000 functions, 50,000 distinct stacks
5-60 frames deep with a skewed distribution, like the agent's output. The
adversarial variant (--random) shares no prefix between stacks, which
multiplies call-tree nodes and distinct lines.

For each format the best of --runs wall-clock times of the whole command
(load the file + build the model + export + write) is reported, with the
CPU time of that run and the output size; the time of loading alone comes
from genprof --time. The machine's load average is printed too: on a
shared 2-core machine, wall-clock time is CPU time stretched by whatever
else runs, so compare CPU times across runs.

    bench/convert.py                   # 1M samples, every format, 3 runs
    bench/convert.py --samples 200000 --random --runs 1
    bench/convert.py --locality 20     # threads keep their stack ~20 samples
    bench/convert.py --format callgrind --format pprof
"""
import argparse
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STRATA = ROOT / "build" / "bin" / "strata"
GENPROF = ROOT / "build" / "unit" / "genprof"


def formats():
    out = subprocess.run([STRATA, "convert", "--help"], capture_output=True, text=True, check=True).stdout
    return [ln.split()[0] for ln in out.split("\nformats:\n", 1)[1].splitlines() if ln.strip()]


def timed(cmd):
    """Wall-clock and CPU seconds of one command (children's rusage)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    r = subprocess.run(cmd, capture_output=True)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode:
        sys.exit("failed: %s\n%s" % (" ".join(map(str, cmd)), r.stderr.decode(errors="replace")))
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, r


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", type=int, default=1000000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--random", action="store_true", help="adversarial profile: no shared prefixes")
    ap.add_argument("--locality", type=int, default=0,
                    help="each thread keeps its stack for runs of about N samples, as real threads do "
                         "(default 0: every sample draws its stack independently)")
    ap.add_argument("--format", action="append", help="only this format (repeatable)")
    ap.add_argument("--keep", action="store_true", help="keep the generated files (printed)")
    args = ap.parse_args()
    subprocess.run(["make", "-s", "-C", ROOT, str(STRATA.relative_to(ROOT)), str(GENPROF.relative_to(ROOT))],
                   check=True)
    tmp = Path(tempfile.mkdtemp(prefix="strata-bench-"))
    prof = tmp / "large.strata"
    gen = [GENPROF, "-n", str(args.samples), "-o", prof] + (["--random"] if args.random else []) + \
        (["--locality", str(args.locality)] if args.locality else [])
    subprocess.run(gen, check=True, capture_output=True)
    load = subprocess.run([GENPROF, "--time", prof], capture_output=True, text=True, check=True).stdout.strip()
    m = re.search(r"load ([\d.]+) s", load)
    print("profile: %d samples%s%s, %.1f MB; %s" % (args.samples, " (random stacks)" if args.random else "",
                                                   " (locality %d)" % args.locality if args.locality else "",
                                                 prof.stat().st_size / 1e6, load))
    print("load average before: %.1f %.1f %.1f" % os.getloadavg())
    print("| format | wall s (best of %d) | CPU s | output MB |" % args.runs)
    print("|---|---|---|---|")
    worst = 0.0
    for fmt in args.format or formats():
        out = tmp / ("out." + fmt)
        best = None
        for _ in range(args.runs):
            wall, cpu, _ = timed([STRATA, "convert", prof, "-f", fmt, "-o", out])
            if best is None or wall < best[0]:
                best = (wall, cpu)
        size = out.stat().st_size / 1e6
        worst = max(worst, best[0])
        print("| %s | %.2f | %.2f | %.1f |" % (fmt, best[0], best[1], size), flush=True)
        if not args.keep:
            out.unlink()
    if args.keep:
        print("files in %s" % tmp)
    else:
        prof.unlink()
        os.rmdir(tmp)
    print("load average after: %.1f %.1f %.1f" % os.getloadavg())
    print("slowest: %.2f s (goal: under 3 s)%s" % (worst, "" if worst < 3 else "  ** over the goal **"))


if __name__ == "__main__":
    main()
