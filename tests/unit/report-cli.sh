#!/bin/sh
# report-cli.sh — `strata report` as a user meets it: options, exit codes,
# the one-line errors for files that are not profiles, warnings (not
# failures) for damaged ones, and JSON that parses and adds up.
#
#   tests/unit/report-cli.sh path/to/strata
#
# Uses the committed fixture (tests/unit/fixtures/small.strata) and
# python3 to check the JSON. Run by `make unit` and, with the ASan build
# of strata, by `make asan`.
set -u
STRATA=${1:?usage: report-cli.sh STRATA}
HERE=$(cd "$(dirname "$0")" && pwd)
FIX=$HERE/fixtures/small.strata
T=$(mktemp -d /tmp/strata-report-cli.XXXXXX)
trap 'rm -rf "$T"' EXIT
fails=0

fail() { echo "report-cli: FAIL: $*"; fails=$((fails + 1)); }

# run EXPECTED_STATUS ARGS...: runs strata, keeps stdout/stderr in $T.
run() {
	want=$1
	shift
	"$STRATA" "$@" >"$T/out" 2>"$T/err"
	got=$?
	[ "$got" -eq "$want" ] || fail "strata $*: exit $got, expected $want ($(head -c 300 "$T/err"))"
}

# One line on stderr, of the form "strata: FILE: reason".
one_error_line() {
	n=$(wc -l <"$T/err")
	[ "$n" -eq 1 ] || fail "$1: expected one error line, got $n: $(cat "$T/err")"
	grep -q "^strata: $2: $3" "$T/err" || fail "$1: unexpected message: $(cat "$T/err")"
	[ ! -s "$T/out" ] || fail "$1: printed a report anyway"
}

json_check() { python3 - "$T/out" "$@" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
for k in ("samples", "duration_s", "mode", "rate_hz", "dropped", "python_version", "command",
          "processes", "threads", "functions", "lines", "truncated", "warnings"):
    assert k in d, "missing key " + k
for p in d["processes"]:
    assert set(("pid", "command", "samples")) <= set(p), p
for t in d["threads"]:
    assert set(("pid", "tid", "name", "samples")) <= set(t), t
for f in d["functions"]:
    assert set(("name", "file", "line", "kind", "self", "total")) <= set(f), f
    assert 0 <= f["self"] <= f["total"] <= d["samples"], f
for l in d["lines"]:
    assert set(("file", "line", "function", "kind", "self", "total")) <= set(l), l
    assert 0 <= l["self"] <= l["total"] <= d["samples"], l
assert sum(t["samples"] for t in d["threads"]) == d["samples"]
assert sum(p["samples"] for p in d["processes"]) == d["samples"]
assert sum(f["self"] for f in d["functions"]) == d["samples"] or len(d["functions"]) < 5
exec(sys.argv[2] if len(sys.argv) > 2 else "")
EOF
}

# --- a good file ---------------------------------------------------------
run 0 report "$FIX"
for h in "Hottest functions" "Hottest lines" "Threads" "Processes" "worker-1" "rec"; do
	grep -q "$h" "$T/out" || fail "text report lacks '$h'"
done
[ ! -s "$T/err" ] || fail "warnings for a good file: $(cat "$T/err")"
awk 'length($0) > 80 { bad = 1 } END { exit bad }' "$T/out" || fail "text report wider than 80 columns"

run 0 report --json "$FIX"
json_check '
assert d["mode"] == "cpu" and d["rate_hz"] == 200 and d["truncated"] is False
assert d["functions"][0]["name"] == "rec" and d["functions"][0]["kind"] == "python"
assert d["lines"][0]["function"] == "rec" and d["lines"][0]["line"] in (5, 6)
assert {t["name"] for t in d["threads"]} == {"MainThread", "worker-1"}
assert len(d["functions"]) > 20  # --json prints every row by default
assert sum(f["self"] for f in d["functions"]) == d["samples"]
' || fail "report --json content"

run 0 report --json --limit 3 --sort total "$FIX"
json_check '
assert len(d["functions"]) == 3 and len(d["lines"]) <= 3
tot = [f["total"] for f in d["functions"]]
assert tot == sorted(tot, reverse=True), tot
assert d["functions"][0]["name"] == "rec" and d["functions"][1]["name"] == "<module>"
' || fail "report --json --limit 3 --sort total"

run 0 report -n 2 "$FIX"
[ "$(grep -c 'small.py' "$T/out")" -le 6 ] || fail "--limit 2 not applied to the tables"

tid=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print([t["tid"] for t in d["threads"] if t["name"]=="worker-1"][0])' "$T/out" 2>/dev/null ||
	"$STRATA" report --json "$FIX" | python3 -c 'import json,sys; d=json.load(sys.stdin); print([t["tid"] for t in d["threads"] if t["name"]=="worker-1"][0])')
run 0 report --json --tid "$tid" "$FIX"
json_check '
assert [t["name"] for t in d["threads"]] == ["worker-1"]
assert d["samples"] > 0 and d["samples"] == d["threads"][0]["samples"]
assert d["filter"]["tid"] is not None
' || fail "report --tid"

run 0 report --pid 1 "$FIX"
grep -q "no process 1 in this profile" "$T/err" || fail "--pid of an absent process: no warning"

run 0 report --no-idle --json "$FIX"
run 0 report --help
grep -q -- "--no-idle" "$T/out" || fail "--help does not list --no-idle"

# --- usage errors ------------------------------------------------------------
run 2 report
run 2 report --sort sideways "$FIX"
run 2 report --limit lots "$FIX"
run 2 report --pid -3 "$FIX"
run 2 report "$FIX" "$FIX"
run 2 report --bogus "$FIX"

# --- files that are not profiles: one line, exit 1 --------------------------
: >"$T/empty.strata"
run 1 report "$T/empty.strata"
one_error_line empty "$T/empty.strata" "file is empty"

printf 'print("hello")\n' >"$T/hello.py"
run 1 report "$T/hello.py"
one_error_line not-strata "$T/hello.py" "not a .strata file"

run 1 report "$T/missing.strata"
one_error_line missing "$T/missing.strata" "cannot open"

run 1 report --json "$T"
one_error_line directory "$T" ""

python3 - "$FIX" "$T/newer.strata" <<'EOF'
import sys
d = bytearray(open(sys.argv[1], "rb").read())
d[8] = 2  # major version 2
open(sys.argv[2], "wb").write(d)
EOF
run 1 report "$T/newer.strata"
one_error_line newer "$T/newer.strata" "written by a newer strata"

head -c 20 "$FIX" >"$T/header-cut.strata"
run 1 report "$T/header-cut.strata"
one_error_line header-cut "$T/header-cut.strata" "file is cut short"

head -c 100 "$FIX" >"$T/first-chunk-cut.strata"
run 1 report "$T/first-chunk-cut.strata"
one_error_line first-chunk-cut "$T/first-chunk-cut.strata" "file is cut short"

# --- damaged but readable: warnings on stderr, report on stdout, exit 0 -----
size=$(wc -c <"$FIX")
head -c $((size - 10)) "$FIX" >"$T/cut.strata"
run 0 report --json "$T/cut.strata"
grep -q "^strata: warning: $T/cut.strata: file was cut short" "$T/err" || fail "cut file: no warning: $(cat "$T/err")"
json_check 'assert d["truncated"] is True and d["warnings"]' || fail "cut file: JSON"

python3 - "$FIX" "$T/flipped.strata" <<'EOF'
import sys
d = bytearray(open(sys.argv[1], "rb").read())
d[len(d) // 2] ^= 0x20
open(sys.argv[2], "wb").write(d)
EOF
run 0 report "$T/flipped.strata"
grep -q "damaged chunk" "$T/err" || fail "flipped byte: no warning: $(cat "$T/err")"
grep -q "Hottest functions" "$T/out" || fail "flipped byte: no report"

# --- strata annotate on the same files: lines, JSON, damage, errors --------
run 0 annotate --full "$FIX"
run 0 annotate --json "$FIX"
python3 - "$T/out" <<'EOF' || fail "annotate JSON"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["files"] and d["samples"] > 0
for f in d["files"]:
    assert f["self"] <= f["total"] <= d["samples"], f
    for l in f["lines"]:
        assert 0 <= l["self"] <= l["total"] <= d["samples"], l
EOF
run 0 annotate --json "$T/cut.strata"
run 0 annotate --color always "$T/flipped.strata"
run 1 annotate "$FIX" no_such_function_or_file
one_error_line annotate-target "$FIX" "no profiled source file or function matches"
run 1 annotate "$T/header-cut.strata"
run 2 annotate

# Comparisons (docs/diff.md): the fixture against itself and against
# another one, every output, so that `make asan` runs them too.
DEEP=$HERE/fixtures/deep.strata
run 0 diff "$FIX" "$FIX"
run 0 diff --json --by line -n 0 "$FIX" "$FIX"
python3 - "$T/out" <<'EOF' || fail "diff of a profile with itself: not every row unchanged"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["rows"] and all(r["status"] == "changed" and r["points"] == 0 for r in d["rows"]), d["rows"][:3]
EOF
run 0 diff --absolute --by file -s total "$FIX" "$DEEP"
run 0 diff --thread MainThread --json "$FIX" "$DEEP"
run 4 diff --fail-above 1 "$FIX" "$DEEP"
run 2 diff --pid 1 "$FIX" "$DEEP"
run 3 diff -e cycles "$FIX" "$DEEP"
run 2 diff "$FIX"
run 0 convert "$DEEP" --diff "$FIX" -f html -o "$T/d.html"
run 0 convert "$DEEP" --diff "$FIX" -f svg -o "$T/d.svg"
run 0 convert "$DEEP" --diff "$FIX" --absolute -f collapsed
run 2 convert "$DEEP" --diff "$FIX" -f speedscope
run 0 annotate "$FIX" -f html -o "$T/heat"
[ -s "$T/heat/index.html" ] && [ -s "$T/heat/files/0.js" ] || fail "annotate -f html: no heat map in $T/heat"
run 0 annotate "$DEEP" -f html -o "$T/heat" --diff "$FIX" f
run 2 annotate "$FIX" -o "$T/heat"

if [ "$fails" -ne 0 ]; then
	echo "report-cli: $fails failure(s)"
	exit 1
fi
echo "report-cli: ok"
