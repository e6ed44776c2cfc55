#!/usr/bin/env bash
# report.sh: the report and the results table of big sweeps: for each run
# count, a ledger of that many runs (1% failed; three parameters each, and
# a loss and an accuracy with their per-step curves, as nodepack run
# records them; written by bench/mkledger as a sweep would leave it, spread
# over two CPU lanes), then `nodepack report` and `nodepack status --runs`
# on it: time, peak RSS and the page's size, the median of ROUNDS.
#
#   go build -o /tmp/nodepack ./cmd/nodepack && bench/report.sh [ROUNDS] [RUNS...]
#
# RUNS default to 10000 100000 1000000. The issue's targets: a report of
# 1,000,000 runs in under 15 s and under 500 MB on a 2-core machine.
# NODEPACK overrides the binary; mkledger is built from this checkout.
set -euo pipefail

rounds=${1:-1}
shift || true
counts=("$@")
[[ ${#counts[@]} -gt 0 ]] || counts=(10000 100000 1000000)
nodepack=${NODEPACK:-/tmp/nodepack}
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

(cd "$repo" && go build -o "$work/mkledger" ./bench/mkledger)

# measure CMD...: prints "SECONDS PEAK_RSS_MB" for one run of CMD.
measure() {
	/usr/bin/time -f '%e %M' "$@" 2>&1 >/dev/null | tail -n 1 | awk '{printf "%s %.0f\n", $1, $2 / 1024}'
}
median() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }

printf '%-10s %10s %12s %10s %12s %12s %12s\n' runs "report s" "report MB" "page MB" "bytes/run" "table s" "table MB"
for runs in "${counts[@]}"; do
	rm -rf "$work/out"
	seq "$runs" | sed 's/^/true /' >"$work/tasks.txt"
	"$work/mkledger" -fail-every 100 -metrics "$work/tasks.txt" "$work/out" "$runs"
	report_times=() report_rss=() table_times=() table_rss=()
	for ((i = 0; i < rounds; i++)); do
		read -r s m < <(measure "$nodepack" report -o "$work/report.html" "$work/out")
		report_times+=("$s") report_rss+=("$m")
		read -r s m < <(measure "$nodepack" status --runs "$work/out")
		table_times+=("$s") table_rss+=("$m")
	done
	size=$(stat -c %s "$work/report.html")
	printf '%-10d %10s %12s %10.1f %12d %12s %12s\n' "$runs" \
		"$(printf '%s\n' "${report_times[@]}" | median)" "$(printf '%s\n' "${report_rss[@]}" | median)" \
		"$(echo "$size / 1000000" | bc -l)" "$((size / runs))" \
		"$(printf '%s\n' "${table_times[@]}" | median)" "$(printf '%s\n' "${table_rss[@]}" | median)"
done
