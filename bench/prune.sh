#!/usr/bin/env bash
# prune.sh: what --prune saves on a sweep whose outcome is known. For each
# of SEEDS seeds, 81 configurations are drawn, each a command whose loss
# follows a curve of a seeded family: loss(step) = final + 1.5·exp(-step/tau)
# plus noise (σ 0.01), final uniform in [0.1, 1], tau in [8, 10]; each of
# its STEPS steps sleeps STEP_S seconds. A fifth of them ask for a GPU of
# their own, two fifths for half of one, the rest for a quarter, on four
# fake GPUs. The sweep runs without and with
#   --prune loss:min,first=3,max=STEPS   (eta 3: rungs at 3, 9, 27 below 81)
# and the script prints, per seed and in sum: the GPU-seconds the runs held
# (each attempt's duration times its GPUs or share), the makespan, the true
# best configuration (the lowest final) and whether it ran to its last step
# under --prune.
#
#   go build -o /tmp/nodepack ./cmd/nodepack && bench/prune.sh [SEEDS] [STEPS] [STEP_S]
#
# Targets: at least 3× less GPU-time than the full sweep, and the true best
# completes in at least 9 of 10 seeds. NODEPACK overrides the binary.
set -euo pipefail

seeds=${1:-10}
steps=${2:-81}
step_s=${3:-0.02}
nodepack=${NODEPACK:-/tmp/nodepack}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

export CUDA_VISIBLE_DEVICES=0,1,2,3 # four fake GPUs
cat >"$work/train.sh" <<'SH'
#!/usr/bin/env bash
# train.sh --final=F --tau=T --noise=SEED --steps=S --step_s=D: a stand-in
# for training, one line of loss per step to $NODEPACK_METRICS.
for a in "$@"; do declare "${a#--}"; done
awk -v f="$final" -v tau="$tau" -v seed="$noise" -v n="$steps" -v d="$step_s" 'BEGIN {
	srand(seed)
	for (s = 1; s <= n; s++) {
		# Box-Muller noise, sigma 0.01
		u = rand(); v = rand(); z = sqrt(-2 * log(u + 1e-12)) * cos(6.2831853 * v)
		printf "{\"step\": %d, \"loss\": %.5f}\n", s, f + 1.5 * exp(-s / tau) + 0.01 * z >> ENVIRON["NODEPACK_METRICS"]
		fflush(ENVIRON["NODEPACK_METRICS"])
		system("sleep " d)
	}
}'
SH
chmod +x "$work/train.sh"

# gpu_seconds OUT: the GPU-seconds the attempts held, from the ledger.
gpu_seconds() {
	python3 - "$1/ledger.jsonl" <<'PY'
import json, sys
held, total = {}, 0.0
for line in open(sys.argv[1]):
    r = json.loads(line)
    key = (r.get("id"), r.get("attempt"))
    if r["type"] == "started":
        req = dict(w.split("=") for w in r.get("request", "").split() if "=" in w)
        share = float(req.get("gpus", "1")) if "/" not in req.get("gpus", "") else 1 / float(req["gpus"].split("/")[1])
        held[key] = len(r.get("gpus") or []) if share >= 1 else share
    elif r["type"] == "finished" and key in held:
        total += held.pop(key) * r.get("duration_s", 0)
print(f"{total:.1f}")
PY
}

printf '%-5s %10s %10s %8s %10s %10s %8s %6s %s\n' seed "full GPU-s" "prune GPU-s" ratio "full span" "prune span" pruned "best" "best completed"
sum_full=0 sum_prune=0 completed=0
for ((seed = 1; seed <= seeds; seed++)); do
	python3 - "$work" "$seed" "$steps" "$step_s" <<'PY'
import json, random, sys
work, seed, steps, step_s = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
rng = random.Random(seed)
best = None
with open(f"{work}/sweep.jsonl", "w") as f:
    for i in range(81):
        final, tau = round(rng.uniform(0.1, 1.0), 4), round(rng.uniform(8, 10), 3)
        p = rng.randrange(5)
        gpus = 1 if p == 0 else 0.5 if p < 3 else 0.25
        f.write(json.dumps({"final": final, "tau": tau, "noise": rng.randrange(1 << 30), "steps": steps, "step_s": step_s,
                            "nodepack": {"gpus": gpus, "cpus": 0}}) + "\n")
        if best is None or final < best[1]:
            best = (i + 1, final)
open(f"{work}/best", "w").write(f"{best[0]} {best[1]}\n")
PY
	read -r best_line best_final <"$work/best"
	rm -rf "$work/full" "$work/pruned"
	t0=$(date +%s.%N)
	"$nodepack" run -q -o "$work/full" --params "$work/sweep.jsonl" -- "$work/train.sh" >/dev/null 2>"$work/err" || { cat "$work/err" >&2; exit 1; }
	t1=$(date +%s.%N)
	"$nodepack" run -q -o "$work/pruned" --prune "loss:min,first=3,max=$steps,every=100ms" --params "$work/sweep.jsonl" -- "$work/train.sh" >/dev/null 2>"$work/err" || { cat "$work/err" >&2; exit 1; }
	t2=$(date +%s.%N)
	full=$(gpu_seconds "$work/full")
	pruned=$(gpu_seconds "$work/pruned")
	n_pruned=$("$nodepack" status --json "$work/pruned" | python3 -c 'import json,sys; print(json.load(sys.stdin)["counts"]["pruned"])')
	best_state=$("$nodepack" status --runs --format json "$work/pruned" | python3 -c "
import json, sys
for r in json.load(sys.stdin):
    if r['origin'].endswith(':$best_line'):
        print(r['state'])")
	[[ $best_state == succeeded ]] && completed=$((completed + 1))
	sum_full=$(echo "$sum_full + $full" | bc -l)
	sum_prune=$(echo "$sum_prune + $pruned" | bc -l)
	printf '%-5d %10s %10s %7.2fx %9.1fs %9.1fs %8s %6s %s\n' "$seed" "$full" "$pruned" "$(echo "$full / $pruned" | bc -l)" \
		"$(echo "$t1 - $t0" | bc -l)" "$(echo "$t2 - $t1" | bc -l)" "$n_pruned" "$best_final" "$best_state"
done
printf 'all %d seeds: %.1f GPU-s without --prune, %.1f with: %.2fx less; the true best ran to its last step in %d of %d\n' \
	"$seeds" "$sum_full" "$sum_prune" "$(echo "$sum_full / $sum_prune" | bc -l)" "$completed" "$seeds"
