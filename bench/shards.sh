#!/usr/bin/env bash
# shards.sh: nodepack status over a sweep submitted as an array of SHARDS
# tasks (default 1,000), each shard's ledger holding RUNS runs (default
# 1,000): the time and peak RSS of `nodepack status DIR` and `nodepack
# status --json DIR`, ROUNDS times each (the median is printed). The
# ledgers are written by bench/mkledger as the tasks would leave them; the
# directory also holds a submission record, so status asks the scheduler
# too (a stand-in squeue that lists no task: what is measured is
# nodepack's side).
#
#   go build -o /tmp/nodepack ./cmd/nodepack && bench/shards.sh [SHARDS] [RUNS] [ROUNDS]
#
# The issue's target: under 5 s and 300 MB for 1,000 × 1,000.
# NODEPACK overrides the binary; mkledger is built from this checkout.
set -euo pipefail

shards=${1:-1000}
runs=${2:-1000}
rounds=${3:-3}
nodepack=${NODEPACK:-/tmp/nodepack}
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

(cd "$repo" && go build -o "$work/mkledger" ./bench/mkledger)
seq $((shards * runs)) | sed 's/^/true /' >"$work/tasks.txt"
"$work/mkledger" -fail-every 100 -shards "$shards" "$work/tasks.txt" "$work/out" "$runs"
printf '{"format":"nodepack.submission/v1","time":"2026-11-26T12:00:00Z","job_id":"4242","script":"jobs/submit-1.sh","runs":%d,"job":{"scheduler":"slurm","shards":%d,"output":"%s","dir":"%s","nodepack":"%s","run":["tasks.txt"]}}\n' \
	$((shards * runs)) "$shards" "$work/out" "$work" "$nodepack" >"$work/out/submissions.jsonl"
mkdir "$work/bin"
printf '#!/bin/sh\nexit 0\n' >"$work/bin/squeue"
chmod +x "$work/bin/squeue"

# measure ARGS...: prints "seconds kilobytes" of one nodepack status.
measure() {
	PATH="$work/bin:$PATH" /usr/bin/time -f '%e %M' -o "$work/time" "$nodepack" status "$@" "$work/out" >"$work/status.out" || test $? = 1
	tail -1 "$work/time" # after "Command exited with non-zero status 1": status exits 1 for the failed runs
}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

for args in "" "--json"; do
	: >"$work/secs"
	: >"$work/kb"
	for _ in $(seq "$rounds"); do
		read -r s kb < <(measure $args)
		echo "$s" >>"$work/secs"
		echo "$kb" >>"$work/kb"
	done
	case $args in
	"") grep -q "^$work/out: $((shards * runs)) runs: " "$work/status.out" || { echo "status did not count every run:" >&2; head -3 "$work/status.out" >&2; exit 1; } ;;
	*) grep -q "\"job_id\": \"4242\"" "$work/status.out" || { echo "status --json has no scheduler view" >&2; exit 1; } ;;
	esac
	printf 'nodepack status %-7s %d shard ledgers × %d runs: %6.2f s  %4d MB peak RSS (median of %d; targets 5 s, 300 MB)\n' \
		"$args" "$shards" "$runs" "$(median <"$work/secs")" $(($(median <"$work/kb") / 1024)) "$rounds"
done
