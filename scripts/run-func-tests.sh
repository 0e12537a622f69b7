#!/bin/sh
# run-func-tests.sh — the functional suite: profiles real programs under
# every Python present and checks what the profiles say. Extra arguments go
# to pytest (e.g. -k split, -x).
set -eu
cd "$(dirname "$0")/.."
scripts/pyenvs.sh
# The format consumers (speedscope, profiler-cli, playwright-core) for the export tests.
scripts/npm-deps.sh
exec /usr/bin/python3 -m pytest -p no:cacheprovider -ra tests/func "$@"
