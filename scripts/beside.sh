#!/usr/bin/env bash
# Usage: beside.sh NAME BACKGROUND -- FOREGROUND...
# Runs the shell command BACKGROUND at a lower CPU priority (nice 10) beside
# FOREGROUND, so that it takes the CPU FOREGROUND leaves idle without
# slowing it: make test runs staticcheck beside test-unit, whose tests wait
# on servers and timers much of the time. BACKGROUND's output is kept
# and printed, under NAME, once both have finished. The exit status is
# FOREGROUND's, or BACKGROUND's when FOREGROUND passed.
set -uo pipefail
[ $# -ge 4 ] && [ "$3" = -- ] || { echo "usage: beside.sh NAME BACKGROUND -- FOREGROUND..." >&2; exit 2; }
name=$1 background=$2
shift 3
log=$(mktemp)
trap 'rm -f "$log"' EXIT
nice -n 10 bash -c "$background" >"$log" 2>&1 &
bg=$!
"$@"
fg=$?
wait "$bg"
bgrc=$?
echo "--- $name (run beside: $*), exit status $bgrc:"
cat "$log"
if [ "$fg" != 0 ]; then exit "$fg"; fi
exit "$bgrc"
