#!/usr/bin/env bash
# packing.sh: how well nodepack packs a mixed sweep onto four (fake) GPUs,
# against the lower bound and against static slots, measured in the same
# invocation.
#
#   go build -o /tmp/nodepack ./cmd/nodepack && bench/packing.sh [N] [SCALE]
#
# N (default 60) runs in shuffled order, as runner/schedule's TestMixedSweepMakespan
# draws them: a tenth ask for 2 GPUs and run 20-40 "minutes", three tenths
# 1 GPU for 10-30, two tenths half a GPU and four tenths a quarter for
# 5-20; SCALE (default 0.05) is the seconds a "minute" lasts. Each run is a
# sleep; all share CPUs (cpus=0), so the GPUs are what is packed. The GPUs
# are CUDA_VISIBLE_DEVICES=0,1,2,3 without a driver, two per NUMA node,
# 40 GiB each, given to nodepack run as an inventory of this machine.
#
# It prints the makespan (wall time of nodepack run), the lower bound (the
# GPU-seconds over 4 GPUs, or the longest run) and their ratio: with
# --backfill-wait of one "minute" (as the default is to real runs), and
# with the default, under which no run of this bench ever reserves, both
# with --parallel N; with default flags (no --parallel: as many at once as
# the runs' requests fit), which should be as good as the best flags; then
# the same for static slots: every run with 2 GPUs, as a launcher with one
# request for the whole sweep must run it. runner/schedule's BenchmarkMixedSweepMakespan
# and TestMixedSweepMakespan run 300-run sweeps of this kind in virtual
# time. NODEPACK overrides the binary.
set -euo pipefail

n=${1:-60}
scale=${2:-0.05}
nodepack=${NODEPACK:-/tmp/nodepack}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

export CUDA_VISIBLE_DEVICES=0,1,2,3 # four fake GPUs: nodepack run checks the inventory against them
"$nodepack" detect --json >"$work/detected.json"
python3 - "$work" "$n" "$scale" <<'EOF'
import json, random, sys
work, n, scale = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
node = json.load(open(f"{work}/detected.json"))
if node["gpu_source"] != "env" or len(node["gpus"]) != 4:
    print(f"packing.sh: GPUs from {node['gpu_source']} here; it runs on fake GPUs only: skipped", file=sys.stderr)
    open(f"{work}/skip", "w").close()
    sys.exit()
for i, g in enumerate(node["gpus"]):
    g["numa"], g["memory_bytes"] = i // 2, 40 << 30
json.dump(node, open(f"{work}/node.json", "w"))

rng = random.Random(1)
runs = []
for i in range(n):
    p = rng.randrange(10)
    if p < 1:
        runs.append(("gpus=2", 2.0, rng.randint(20, 40)))
    elif p < 4:
        runs.append(("gpus=1", 1.0, rng.randint(10, 30)))
    elif p < 6:
        runs.append(("gpus=0.5", 0.5, rng.randint(5, 20)))
    else:
        runs.append(("gpus=0.25", 0.25, rng.randint(5, 20)))
with open(f"{work}/packed.txt", "w") as packed, open(f"{work}/static.txt", "w") as static:
    for i, (req, _, minutes) in enumerate(runs):
        line = f"sleep {minutes * scale:.3f} # run {i}\n"
        packed.write(f"#nodepack {req} cpus=0\n{line}")
        static.write(line)
gpu_seconds = sum(amount * minutes * scale for _, amount, minutes in runs)
bound = max(gpu_seconds / 4, max(minutes * scale for *_, minutes in runs))
counts = {}
for req, *_ in runs:
    counts[req] = counts.get(req, 0) + 1
open(f"{work}/bound", "w").write(f"{bound:.3f}\n")
open(f"{work}/mix", "w").write(", ".join(f"{c} × {r}" for r, c in sorted(counts.items())) + "\n")
EOF

[[ -e $work/skip ]] && exit 0

seconds() { # seconds CMD...: wall time of CMD in seconds
	local t0 t1
	t0=$(date +%s.%N)
	"$@" >/dev/null 2>"$work/stderr" || {
		cat "$work/stderr" >&2
		return 1
	}
	t1=$(date +%s.%N)
	echo "$t1 - $t0" | bc -l
}

bound=$(cat "$work/bound")
echo "$n runs on 4 fake GPUs: $(cat "$work/mix"); $(nproc) CPUs"
printf '%-44s %7.2f s\n' "lower bound" "$bound"
# --backfill-wait: one "minute", as nodepack's default (1m) is to runs of
# 5-40 minutes; then the default itself, longer than this whole bench, so
# that no run ever reserves what it waits for.
packed=$(seconds "$nodepack" run --inventory "$work/node.json" --parallel "$n" --backfill-wait "${scale}s" --sample-interval 0 -q -o "$work/packed" "$work/packed.txt")
printf '%-44s %7.2f s  %5.3f× the bound\n' "nodepack, each run its request" "$packed" "$(echo "$packed / $bound" | bc -l)"
packed=$(seconds "$nodepack" run --inventory "$work/node.json" --parallel "$n" --sample-interval 0 -q -o "$work/packed-nowait" "$work/packed.txt")
printf '%-44s %7.2f s  %5.3f× the bound\n' "nodepack, each run its request, no reserving" "$packed" "$(echo "$packed / $bound" | bc -l)"
packed=$(seconds "$nodepack" run --inventory "$work/node.json" --sample-interval 0 -q -o "$work/packed-default" "$work/packed.txt")
printf '%-44s %7.2f s  %5.3f× the bound\n' "nodepack, default flags" "$packed" "$(echo "$packed / $bound" | bc -l)"
static=$(seconds "$nodepack" run --inventory "$work/node.json" --gpus-per-run 2 --sample-interval 0 -q -o "$work/static" "$work/static.txt")
printf '%-44s %7.2f s  %5.3f× the bound\n' "static slots of 2 GPUs" "$static" "$(echo "$static / $bound" | bc -l)"
