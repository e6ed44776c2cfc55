#!/usr/bin/env bash
# prior-read.sh: what reading a large --prune-prior costs. It writes an
# earlier sweep of RUNS runs (default 100,000; bench/mkledger's ledger,
# every run's metrics.jsonl with 40 steps of loss, one run in ten stopped
# part-way as a pruned run would be), then times, ROUNDS times each (the
# median is printed, with the peak memory), in the same run:
#
#   nodepack run -q --prune loss:min,max=40 -o OUT tiny.txt
#   nodepack run -q --prune loss:min,max=40 --prune-prior EARLIER -o OUT tiny.txt
#
# where tiny.txt is one run of `true`: the second less the first is what
# reading the prior costs (its ledger, and the metrics of the at most 1,024
# finished and 3,072 other runs it reads). Issue 63's target: reading a
# 100,000-run prior in at most 2 s and 200 MB. mkledger is built from this
# checkout; NODEPACK overrides the binary.
#
#   go build -o /tmp/nodepack ./cmd/nodepack && bench/prior-read.sh [RUNS] [ROUNDS]
set -euo pipefail

runs=${1:-100000}
rounds=${2:-3}
nodepack=${NODEPACK:-/tmp/nodepack}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

seq 1 "$runs" | sed 's/^/true # /' >"$work/tasks.txt"
(cd "$root" && go run ./bench/mkledger -metrics "$work/tasks.txt" "$work/earlier" "$runs")
python3 - "$work/earlier" <<'PY'
import json, math, os, sys
out = sys.argv[1]
for i, line in enumerate(open(os.path.join(out, "ledger.jsonl"))):
    r = json.loads(line)
    if r.get("type") != "started":
        continue
    d = os.path.join(out, os.path.dirname(r["stdout"]))
    os.makedirs(d, exist_ok=True)
    k = int(r["origin"].rsplit(":", 1)[1])
    floor, last = 0.1 + (k % 97) / 100, 40 if k % 10 else 5 + k % 20
    with open(os.path.join(d, "metrics.jsonl"), "w") as f:
        for s in range(1, last + 1):
            f.write(f'{{"step": {s}, "loss": {floor + 1.5 * math.exp(-s / 8):.5f}}}\n')
PY
echo true >"$work/tiny.txt"

# measure ARGS...: the median wall seconds and the peak RSS (MB) of
# ROUNDS runs of nodepack ARGS, each into a new output directory.
measure() {
	local times=() mems=() r
	for ((r = 0; r < rounds; r++)); do
		rm -rf "$work/out"
		/usr/bin/time -f '%e %M' -o "$work/time" "$nodepack" "$@" >/dev/null 2>"$work/err" || { cat "$work/err" >&2; exit 1; }
		read -r s kb <"$work/time"
		times+=("$s") mems+=("$kb")
	done
	printf '%s\n' "${times[@]}" | sort -n | sed -n "$(((rounds + 1) / 2))p"
	printf '%s\n' "${mems[@]}" | sort -n | tail -1 | awk '{ printf "%.0f\n", $1 / 1024 }'
}
mapfile -t base < <(measure run -q --prune loss:min,max=40 -o "$work/out" "$work/tiny.txt")
mapfile -t with < <(measure run -q --prune loss:min,max=40 --prune-prior "$work/earlier" -o "$work/out" "$work/tiny.txt")
printf '| %s-run prior | wall (median of %d) | peak RSS |\n| --- | --- | --- |\n' "$runs" "$rounds"
printf '| without --prune-prior | %s s | %s MB |\n' "${base[0]}" "${base[1]}"
printf '| with --prune-prior | %s s | %s MB |\n' "${with[0]}" "${with[1]}"
printf 'reading the prior: %.2f s (target 2 s), peak %s MB (target 200 MB)\n' "$(echo "${with[0]} - ${base[0]}" | bc -l)" "${with[1]}"
