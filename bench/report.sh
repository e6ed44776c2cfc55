#!/usr/bin/env bash
# report.sh: the report and the results table of a big sweep: a ledger of
# RUNS runs (1% failed; written by bench/mkledger as a sweep would leave
# it, spread over two CPU lanes), then `nodepack report` and `nodepack
# status --runs` on it: time, peak RSS and the page's size, ROUNDS times
# (the median is printed).
#
#   go build -o /tmp/nodepack ./cmd/nodepack && bench/report.sh [RUNS] [ROUNDS]
#
# The issue's target: at 100,000 runs the page stays under 20 MB.
# NODEPACK overrides the binary; mkledger is built from this checkout.
set -euo pipefail

runs=${1:-100000}
rounds=${2:-3}
nodepack=${NODEPACK:-/tmp/nodepack}
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

(cd "$repo" && go build -o "$work/mkledger" ./bench/mkledger)
seq "$runs" | sed 's/^/true /' >"$work/tasks.txt"
"$work/mkledger" -fail-every 100 "$work/tasks.txt" "$work/out" "$runs"

# measure CMD...: prints "SECONDS PEAK_RSS_MB" for one run of CMD.
measure() {
	/usr/bin/time -f '%e %M' "$@" 2>&1 >/dev/null | tail -n 1 | awk '{printf "%s %.0f\n", $1, $2 / 1024}'
}
median() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }

report_times=() report_rss=() table_times=() table_rss=()
for ((i = 0; i < rounds; i++)); do
	read -r s m < <(measure "$nodepack" report -o "$work/report.html" "$work/out")
	report_times+=("$s") report_rss+=("$m")
	read -r s m < <(measure "$nodepack" status --runs "$work/out")
	table_times+=("$s") table_rss+=("$m")
done
size=$(stat -c %s "$work/report.html")
printf 'runs %d: report %s s, peak RSS %s MB, page %.1f MB; results table %s s, peak RSS %s MB\n' "$runs" \
	"$(printf '%s\n' "${report_times[@]}" | median)" "$(printf '%s\n' "${report_rss[@]}" | median)" "$(echo "$size / 1000000" | bc -l)" \
	"$(printf '%s\n' "${table_times[@]}" | median)" "$(printf '%s\n' "${table_rss[@]}" | median)"
