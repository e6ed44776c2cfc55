#!/usr/bin/env bash
# search.sh: does a slow searcher idle the node? (issue 65.) RUNS runs
# (default 32) of RUN_S seconds (default 10) on LANES lanes (default 8),
# proposed by a searcher that takes ANSWER_S seconds (default 0.1) to
# answer each ask (nodepack run --search), beside the same runs from a
# params file through nodepack, and through xargs -P LANES, all measured
# in this run. It prints each makespan, its ratio to xargs', and how busy
# nodepack kept the lanes (the summary's "lanes N% busy": the runs' time
# over lanes × makespan).
#
#   go build -o /tmp/nodepack ./cmd/nodepack && bench/search.sh [RUNS] [RUN_S] [LANES] [ANSWER_S]
#
# Target: the searcher's sweep keeps the lanes at least 95% busy.
set -euo pipefail
RUNS=${1:-32}
RUN_S=${2:-10}
LANES=${3:-8}
ANSWER_S=${4:-0.1}
NODEPACK=${NODEPACK:-/tmp/nodepack}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/searcher.py" <<PY
import json, sys, time
n = 0
for line in sys.stdin:
    msg = json.loads(line)
    if msg["type"] == "ask":
        time.sleep($ANSWER_S)
        n += 1
        print(json.dumps({"x": n} if n <= $RUNS else {"nodepack": "done"}), flush=True)
PY
seq "$RUNS" | sed 's/.*/{"x": &}/' >"$work/runs.jsonl"
now() { date +%s.%N; }
t0=$(now)
seq "$RUNS" | xargs -P "$LANES" -I{} sleep "$RUN_S"
t1=$(now)
"$NODEPACK" run -q --gpus none --parallel "$LANES" -o "$work/params" --params "$work/runs.jsonl" -- sh -c "sleep $RUN_S" {x} 2>"$work/params.log"
t2=$(now)
"$NODEPACK" run -q --gpus none --parallel "$LANES" -o "$work/search" --search "python3 $work/searcher.py" -- sh -c "sleep $RUN_S" {x} 2>"$work/search.log"
t3=$(now)
busy() { grep -o 'lanes [0-9]*% busy' "$1" | grep -o '[0-9]*'; }
xargs_s=$(echo "$t1 - $t0" | bc)
params_s=$(echo "$t2 - $t1" | bc)
search_s=$(echo "$t3 - $t2" | bc)
printf '%d runs of %ss on %d lanes, a searcher answering in %ss\n' "$RUNS" "$RUN_S" "$LANES" "$ANSWER_S"
printf '%-28s %9s %9s %12s\n' "" makespan "vs xargs" "lanes busy"
printf '%-28s %8.2fs %9s %12s\n' "xargs -P $LANES" "$xargs_s" "1.00×" "-"
printf '%-28s %8.2fs %8.3f× %11s%%\n' "nodepack --params" "$params_s" "$(echo "$params_s / $xargs_s" | bc -l)" "$(busy "$work/params.log")"
printf '%-28s %8.2fs %8.3f× %11s%%\n' "nodepack --search" "$search_s" "$(echo "$search_s / $xargs_s" | bc -l)" "$(busy "$work/search.log")"
ran=$(grep -c '"type":"finished"' "$work/search/ledger.jsonl")
[ "$ran" = "$RUNS" ] || { echo "the searcher's sweep ran $ran runs, not $RUNS" >&2; cat "$work/search.log" >&2; exit 1; }
