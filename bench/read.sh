#!/usr/bin/env bash
# read.sh: reading back what ran, at scale: for a sweep of RUNS runs (1%
# failed), the time and peak memory of
#
#   - resuming it: a task file of RUNS + RUNS/10 lines whose first RUNS
#     have a ledger (bench/mkledger, as a killed sweep leaves it), from
#     the start of nodepack run to its first new run;
#   - nodepack status on that output directory;
#   - nodepack report of a sweep whose runs have three parameters and a
#     loss and an accuracy with their curves, and the page's size;
#   - nodepack status --runs (the results table, CSV) of that same sweep,
#     beside the report that reads it from the same fold;
#
# for each binary given, in the same run, ROUNDS times each (the median is
# printed), so that a build and the one before it are compared on the
# same machine at the same time.
#
#   bench/read.sh [-r ROUNDS] [-n RUNS] BINARY...
#
# The issue's targets for 1,000,000 runs: resume under 2 s, status under
# 1.5 s, report under 12 s and 500 MB; the table no slower than the report
# and within 500 MB. Output goes to $TMPDIR (default
# /tmp); mkledger is built from this checkout.
set -euo pipefail

rounds=1 runs=1000000
while getopts r:n: opt; do
	case $opt in
	r) rounds=$OPTARG ;;
	n) runs=$OPTARG ;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[[ $# -gt 0 ]] || { echo "usage: bench/read.sh [-r ROUNDS] [-n RUNS] BINARY..." >&2; exit 2; }
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT

(cd "$repo" && go build -o "$work/mkledger" ./bench/mkledger)
seq $((runs + runs / 10)) | sed 's/^/true /' >"$work/tasks.txt"
seq "$runs" | sed 's/^/true /' >"$work/metric-tasks.txt"
"$work/mkledger" -fail-every 100 -killed "$work/tasks.txt" "$work/pristine" "$runs"
"$work/mkledger" -fail-every 100 -metrics "$work/metric-tasks.txt" "$work/metrics" "$runs"
now() { date +%s.%N; }

# once CMD...: prints "SECONDS PEAK_RSS_MB" for one run of CMD to its end
# (status exits 1 for a sweep with failed runs).
once() {
	{ /usr/bin/time -f '%e %M' "$@" 2>&1 >/dev/null || true; } | tail -n 1 | awk '{printf "%s %.0f\n", $1, $2 / 1024}'
}

# resume BINARY: prints "SECONDS PEAK_RSS_MB": from the start of the
# resume to its first new run's started record, and its peak RSS then.
resume() {
	local out=$work/out-resume ledger=$work/out-resume/ledger.jsonl offset start pid record first hwm
	rm -rf "$out"
	cp -r "$work/pristine" "$out"
	sync
	offset=$(stat -c %s "$ledger")
	start=$(now)
	"$1" run --quiet -o "$out" "$work/tasks.txt" >"$work/run.log" 2>&1 &
	pid=$!
	for _ in $(seq 12000); do
		record=$(tail -c +$((offset + 1)) "$ledger" 2>/dev/null | grep -m1 -o '"type":"started","time":"[^"]*"' || true)
		[[ -n $record ]] && break
		kill -0 "$pid" 2>/dev/null || { cat "$work/run.log" >&2; exit 1; }
		sleep 0.005
	done
	[[ -n $record ]] || { echo "resume: no run started in 60 s" >&2; exit 1; }
	first=$(echo "$(date -d "$(echo "$record" | cut -d'"' -f8)" +%s.%N) - $start" | bc -l)
	hwm=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status")
	kill -TERM "$pid"
	wait "$pid" || true
	printf '%.2f %.0f\n' "$first" "$(echo "$hwm / 1024" | bc -l)"
}
median() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
col() { awk -v c="$1" '{print $c}' | median; }

printf '%d runs, %d CPUs, median of %d\n' "$runs" "$(nproc)" "$rounds"
printf '%-28s %10s %10s %10s %10s %10s %10s %10s %10s %10s\n' binary "resume s" "resume MB" "status s" "status MB" "report s" "report MB" "page MB" "table s" "table MB"
for bin in "$@"; do
	r=() s=() p=() c=()
	for ((i = 0; i < rounds; i++)); do
		r+=("$(resume "$bin")")
		rm -rf "$work/out-status"
		cp -r "$work/pristine" "$work/out-status"
		s+=("$(once "$bin" status "$work/out-status")")
		p+=("$(once "$bin" report -o "$work/report.html" "$work/metrics")")
		c+=("$(once "$bin" status --runs "$work/metrics")")
	done
	printf '%-28s %10s %10s %10s %10s %10s %10s %10.1f %10s %10s\n' "$(basename "$bin")" \
		"$(printf '%s\n' "${r[@]}" | col 1)" "$(printf '%s\n' "${r[@]}" | col 2)" \
		"$(printf '%s\n' "${s[@]}" | col 1)" "$(printf '%s\n' "${s[@]}" | col 2)" \
		"$(printf '%s\n' "${p[@]}" | col 1)" "$(printf '%s\n' "${p[@]}" | col 2)" \
		"$(echo "$(stat -c %s "$work/report.html") / 1000000" | bc -l)" \
		"$(printf '%s\n' "${c[@]}" | col 1)" "$(printf '%s\n' "${c[@]}" | col 2)"
done
