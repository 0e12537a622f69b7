#!/bin/sh
# npm-deps.sh — installs the npm tools the functional tests use as the real
# consumers of strata's export formats (tests/js/package.json, exact
# versions in tests/js/package-lock.json) into tests/js/node_modules with
# `npm ci`: never globally, never a browser download (playwright-core only;
# the browser is Debian's chromium from deps.sh).
#
# Without npm or without the network it says so and exits 0: the tests
# that need a missing tool skip with a message naming it.
set -u
cd "$(dirname "$0")/../tests/js"
if ! command -v npm >/dev/null 2>&1; then
	echo "npm-deps.sh: npm not found; tests that need npm tools will skip" >&2
	exit 0
fi
stamp=node_modules/.strata-installed
if [ -f "$stamp" ] && cmp -s package-lock.json "$stamp"; then
	exit 0
fi
if npm ci --no-audit --no-fund --loglevel=error; then
	cp package-lock.json "$stamp"
else
	echo "npm-deps.sh: npm ci failed (no network?); tests that need npm tools will skip" >&2
fi
exit 0
