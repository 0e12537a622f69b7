#!/bin/sh
# run-func-tests.sh — the functional suite: profiles real programs under
# every Python present and checks what the profiles say. Extra arguments go
# to pytest (e.g. -k split, -x).
set -eu
cd "$(dirname "$0")/.."
scripts/pyenvs.sh
# The format consumers (speedscope, profiler-cli, playwright-core) for the export tests.
scripts/npm-deps.sh
# The OpenTelemetry Collector the continuous-profiling tests send to: built
# once from the Go module proxy, then cached (scripts/otelcol.sh).
scripts/otelcol.sh path >/dev/null
# One pytest worker more than the cores (STRATA_TEST_JOBS overrides; 1 runs
# serially): most tests also wait (a profiled program's sleeps, an attach's
# duration, a collector), and with one worker per core the cores were
# 15-20% idle through the suite (-n 2: 884 s; -n 3: 752 s, 2 cores). The
# assertions compare shares and ratios, never absolute times, and hold
# under that load (the suite's tests run beside make check's busy last
# stage in the sid root too).
jobs="${STRATA_TEST_JOBS:-$(( $(nproc) + 1 ))}"
par=""
if [ "$jobs" -gt 1 ] && /usr/bin/python3 -c "import xdist" 2>/dev/null; then
	par="-n $jobs"
fi
exec /usr/bin/python3 -m pytest -p no:cacheprovider -ra --durations=15 $par tests/func "$@"
