#!/usr/bin/env bash
# scale.sh: how nodepack copes with big sweeps, in time and peak memory,
# ROUNDS times each (the median is printed):
#
#   - a task file of LINES lines (default 1,000,000) and a grid of 10^7
#     combinations: time from the start of nodepack to its first run, and
#     the peak RSS (VmHWM) after a second of running;
#   - SIGTERM to each of them then: time until nodepack has exited; and the
#     same for a task file of LINES runs that ignore SIGTERM, which
#     nodepack kills after --grace (2 s);
#   - a ledger of LINES records (LINES/2 runs, 1% of them failed, written
#     by bench/mkledger as a killed sweep would leave it): the time and peak
#     RSS of `nodepack status` on it, and of resuming the sweep to its
#     first run;
#   - --parallel 1000000 for 4 runs, and a 10^9-combination grid with
#     --reps 10 (refused, exit 2): time and peak RSS.
#
#   go build -o /tmp/nodepack ./cmd/nodepack && bench/scale.sh [LINES] [ROUNDS]
#
# The issue's targets: first run under 1 s and under 200 MB; resume and
# status under 2 s and 300 MB; exit within --grace + 1 s of SIGTERM.
# NODEPACK overrides the binary; mkledger is built from this checkout.
# Runs go to $TMPDIR (default /tmp).
set -euo pipefail

lines=${1:-1000000}
rounds=${2:-3}
nodepack=${NODEPACK:-/tmp/nodepack}
grace=2s
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT

(cd "$repo" && go build -o "$work/mkledger" ./bench/mkledger)
seq "$lines" | sed 's/^/true /' >"$work/tasks.txt"
seq "$lines" | sed "s/^/bash -c 'trap \"\" TERM; sleep 30' /" >"$work/stubborn.txt"
python3 - "$work" <<'EOF'
import sys
for name, keys in (("grid7.yml", "abcdefg"), ("grid9.yml", "abcdefghi")):
    with open(f"{sys.argv[1]}/{name}", "w") as f:
        for k in keys:
            f.write(f"{k}: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]\n")
EOF
"$work/mkledger" -fail-every 100 -killed "$work/tasks.txt" "$work/ledger-pristine" $((lines / 2))
now() { date +%s.%N; }
results=$work/results

# first_run NAME OUTPUT ARGS...: starts nodepack run ARGS with -o OUTPUT,
# waits for a started record past the ledger's current end, lets it run a
# second, reads its peak RSS, sends SIGTERM and waits for it to exit.
first_run() {
	local name=$1 out=$2 ledger=$2/ledger.jsonl offset=0 start pid record first hwm term
	shift 2
	[[ -f $ledger ]] && offset=$(stat -c %s "$ledger")
	start=$(now)
	"$nodepack" run --quiet --grace "$grace" -o "$out" "$@" >"$work/run.log" 2>&1 &
	pid=$!
	for _ in $(seq 6000); do
		record=$(tail -c +$((offset + 1)) "$ledger" 2>/dev/null | grep -m1 -o '"type":"started","time":"[^"]*"' || true)
		[[ -n $record ]] && break
		kill -0 "$pid" 2>/dev/null || { cat "$work/run.log" >&2; exit 1; }
		sleep 0.01
	done
	[[ -n $record ]] || { echo "$name: no run started in 60 s" >&2; exit 1; }
	first=$(echo "$(date -d "$(echo "$record" | cut -d'"' -f8)" +%s.%N) - $start" | bc -l)
	sleep 1
	hwm=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status")
	term=$(now)
	kill -TERM "$pid"
	wait "$pid" || true
	echo "$name $first $hwm $(echo "$(now) - $term" | bc -l)" >>"$results"
}

# once NAME CMD...: runs CMD to its end; records its wall time and peak RSS.
once() {
	local name=$1
	shift
	python3 - "$name" "$results" "$@" <<'EOF'
import resource, subprocess, sys, time
name, results, cmd = sys.argv[1], sys.argv[2], sys.argv[3:]
t = time.monotonic()
rc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE).returncode
wall = time.monotonic() - t
with open(results, "a") as f:
    f.write(f"{name} {wall} {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss} {rc}\n")
EOF
}

printf 'true 1\ntrue 2\ntrue 3\ntrue 4\n' >"$work/four.txt"
for round in $(seq "$rounds"); do
	rm -rf "$work"/out-*
	first_run tasks "$work/out-tasks" "$work/tasks.txt"
	first_run grid "$work/out-grid" --grid "$work/grid7.yml" -- true
	first_run stubborn "$work/out-stubborn" "$work/stubborn.txt"
	cp -r "$work/ledger-pristine" "$work/out-resume"
	sync
	once status "$nodepack" status "$work/out-resume"
	first_run resume "$work/out-resume" "$work/tasks.txt"
	once parallel "$nodepack" run --quiet --parallel 1000000 -o "$work/out-parallel" "$work/four.txt"
	once reps "$nodepack" run --quiet -o "$work/out-reps" --grid "$work/grid9.yml" --reps 10 -- true
	echo "round $round/$rounds done" >&2
done

python3 - "$lines" "$rounds" "$(nproc)" "$grace" "$results" <<'EOF'
import statistics, sys
lines, rounds, cpus, grace, results = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
by = {}
for line in open(results):
    name, *v = line.split()
    by.setdefault(name, []).append([float(x) for x in v])
med = {k: [statistics.median(col) for col in zip(*v)] for k, v in by.items()}
mb = lambda kb: f"{kb / 1024:.0f} MB"
print(f"median of {rounds} rounds, {cpus} CPUs, --grace {grace}")
print(f"{'':44} {'first run':>10} {'peak RSS':>9} {'SIGTERM to exit':>16}")
for k, label in (("tasks", f"{lines:,}-line task file"), ("grid", "10^7-combination grid"),
                 ("stubborn", f"{lines:,} runs that ignore SIGTERM"),
                 ("resume", f"resume from a {lines:,}-record ledger")):
    first, hwm, term = med[k]
    print(f"{label:44} {first:9.2f}s {mb(hwm):>9} {term:15.2f}s")
print(f"{'':44} {'wall':>10} {'peak RSS':>9} {'exit':>16}")
for k, label in (("status", f"status on a {lines:,}-record ledger"), ("parallel", "--parallel 1000000, 4 runs"),
                 ("reps", "10^9-combination grid × 10 reps (refused)")):
    wall, rss, rc = med[k]
    print(f"{label:44} {wall:9.2f}s {mb(rss):>9} {rc:16.0f}")
EOF
