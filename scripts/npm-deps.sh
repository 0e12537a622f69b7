#!/bin/sh
# npm-deps.sh — installs the npm tools the functional tests use as the real
# consumers of strata's export formats (tests/js/package.json, exact
# versions in tests/js/package-lock.json) into tests/js/node_modules with
# `npm ci`: never globally, never a browser download (playwright-core only;
# the browser is Debian's chromium from deps.sh).
#
# Exits non-zero when they cannot be installed (no npm, no network): the
# web-format tests need them, and `make check` must stop here rather than
# report those tests as anything but run.
set -u
cd "$(dirname "$0")/../tests/js" || exit 1
if ! command -v npm >/dev/null 2>&1; then
	echo "npm-deps.sh: npm not found: install Node.js and npm (they check the speedscope, chrome, gecko and html exports)" >&2
	exit 1
fi
stamp=node_modules/.strata-installed
if [ -f "$stamp" ] && cmp -s package-lock.json "$stamp"; then
	exit 0
fi
if ! npm ci --no-audit --no-fund --loglevel=error; then
	echo "npm-deps.sh: npm ci failed in tests/js (no network, or no access to the npm registry?); the web-format tests cannot run without these packages" >&2
	exit 1
fi
cp package-lock.json "$stamp"
