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
# One pytest worker per core (STRATA_TEST_JOBS overrides; 1 runs serially):
# most tests wait on a profiled program, so they overlap well, and the
# assertions compare shares and ratios, never absolute times.
jobs="${STRATA_TEST_JOBS:-$(nproc)}"
par=""
if [ "$jobs" -gt 1 ] && /usr/bin/python3 -c "import xdist" 2>/dev/null; then
	par="-n $jobs"
fi
exec /usr/bin/python3 -m pytest -p no:cacheprovider -ra --durations=15 $par tests/func "$@"
