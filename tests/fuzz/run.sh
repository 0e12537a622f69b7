#!/bin/sh
# run.sh — one run of one fuzz target, for tests/fuzz/fuzz.mk (make fuzz,
# make fuzz-check): the target replays its seeds, then fuzzes for SECONDS;
# one summary line (executions, coverage), and on a failure the end of the
# log, the input saved and the command that replays it.
#
# usage: run.sh FUZZ_DIR NAME SECONDS NEW_INPUTS [SEED_DIR...]
#   FUZZ_DIR/fuzz_NAME is the target; new inputs go to NEW_INPUTS; the
#   log is FUZZ_DIR/NAME/fuzz.log, a failing input FUZZ_DIR/NAME/crash-*
#   (leak-*, timeout-*, oom-*). $FUZZ_OPTS: libFuzzer's options. The
#   sanitizers' settings (ASAN_OPTIONS, LSAN_OPTIONS) come from the
#   environment, and are repeated in the replay command.
set -u
dir=$1 name=$2 seconds=$3 new=$4
shift 4
mkdir -p "$dir/$name" "$new"
echo "== fuzz $name: $seconds s"
log=$dir/$name/fuzz.log
"$dir/fuzz_$name" ${FUZZ_OPTS:-} -max_total_time="$seconds" -artifact_prefix="$dir/$name/" \
	"$new" "$@" > "$log" 2>&1
rc=$?
grep -E '^#[0-9]+[[:space:]]+DONE|^Done [0-9]+ runs' "$log" | tr '\n\t' '  ' | tr -s ' '
echo
if [ $rc -ne 0 ]; then
	tail -n 60 "$log"
	input=$(ls -t "$dir/$name"/crash-* "$dir/$name"/leak-* "$dir/$name"/timeout-* "$dir/$name"/oom-* \
		2>/dev/null | head -n 1)
	env=""
	[ -n "${ASAN_OPTIONS:-}" ] && env="ASAN_OPTIONS=$ASAN_OPTIONS "
	[ -n "${LSAN_OPTIONS:-}" ] && env="${env}LSAN_OPTIONS=$LSAN_OPTIONS "
	echo "fuzz $name FAILED: the input is $input"
	echo "  replay: $env$dir/fuzz_$name $input"
	echo "  whole log: $log"
	exit 1
fi
