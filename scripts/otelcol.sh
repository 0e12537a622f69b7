#!/bin/sh
# otelcol.sh — the OpenTelemetry Collector strata's continuous-profiling
# tests send to (tests/func/test_send.py, docs/send.md): built once from
# tests/otelcol (the OTLP receiver and the file and debug exporters, core
# v0.165.0, contrib v0.165.1) with Go, from the Go module proxy the
# environment names (GOPROXY, GOFLAGS: nothing here names a host), and
# cached by the hash of its sources, like the sid root.
#
#   scripts/otelcol.sh path     prints the binary's path, building it first
#                               if needed; exit status 77 (after one line
#                               saying why) where it cannot be built: no Go
#                               toolchain, or the module proxy unreachable
#
# The cache: $STRATA_OTELCOL_CACHE, else /var/cache/strata/otelcol when
# writable, else ~/.cache/strata/otelcol. The build takes minutes once
# (niced); afterwards the path is printed at once.
set -eu

here=$(cd "$(dirname "$0")/.." && pwd)
src="$here/tests/otelcol"

cache=${STRATA_OTELCOL_CACHE:-}
if [ -z "$cache" ]; then
	if mkdir -p /var/cache/strata/otelcol 2>/dev/null && [ -w /var/cache/strata/otelcol ]; then
		cache=/var/cache/strata/otelcol
	else
		cache="${XDG_CACHE_HOME:-$HOME/.cache}/strata/otelcol"
	fi
fi

key=$(cat "$src/main.go" "$src/go.mod" "$src/go.sum" | sha256sum | cut -c1-16)
bin="$cache/$key/strata-otelcol"

case "${1:-path}" in
path) ;;
*) echo "usage: $0 path" >&2; exit 2 ;;
esac

if [ -x "$bin" ]; then
	echo "$bin"
	exit 0
fi

go=$(command -v go 2>/dev/null || true)
[ -z "$go" ] && [ -x /usr/local/go/bin/go ] && go=/usr/local/go/bin/go
if [ -z "$go" ]; then
	echo "otelcol.sh: no Go toolchain (go) to build the OpenTelemetry Collector with" >&2
	exit 77
fi

mkdir -p "$cache/$key"
# One build at a time (parallel test workers ask together).
exec 9>"$cache/$key/.lock"
flock 9
if [ ! -x "$bin" ]; then
	echo "otelcol.sh: building the OpenTelemetry Collector v0.165.0 into $cache/$key (once; a few minutes)" >&2
	log="$cache/$key/build.log"
	if ! (cd "$src" && nice -n 10 "$go" build -trimpath -o "$bin.tmp" . ) >"$log" 2>&1; then
		tail -5 "$log" >&2
		if grep -q -i -E "dial tcp|no such host|proxy|403|404|connection refused|timeout" "$log"; then
			echo "otelcol.sh: the Go modules could not be downloaded (see $log)" >&2
			exit 77
		fi
		echo "otelcol.sh: building the collector failed (see $log)" >&2
		exit 1
	fi
	mv "$bin.tmp" "$bin"
fi
echo "$bin"
