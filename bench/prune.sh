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
#
# FAMILY=real bench/prune.sh [DRAWS] [BINARY_DRAWS] [EPOCH_S] replays the
# real CIFAR-10 learning curves of ../shared/data/lc-cifar10 (132
# configurations x 40 epochs; DATA= elsewhere): DRAWS draws (default 200)
# of 27 configurations, 4 slots, in virtual time through nodepack's rules
# (runner/schedule's TestReplayDraws; RULES= picks them, MAX standing for
# the last step, SPEC+pause: the runs keep checkpoints) and, on the same
# draws, Optuna's pruners (Debian's python3-optuna 3.1: SuccessiveHalving,
# Hyperband, Median, Patient), ASHA with a grace period, and "train 3
# steps, keep the best third" (bench/prune-real.py); it prints per rule
# the steps saved, the draw's winner and a top-3 configuration reaching
# the last step, and the regret. The same replay then runs the synthetic
# families, SEEDS seeds each (default 100): the slow starters at noise
# 0.05 and 0.1 (where the lowest asymptote reaching its end is counted
# too) and, with a tenth of the seeds, the easy family. Then the first
# BINARY_DRAWS real draws (default 10) run through the binary with --prune
# SPEC (default loss:min,max=40), each configuration a run that writes its
# stored curve, the median epoch EPOCH_S seconds (default 0.5), beside the
# same rule replayed on the same runs with no stop latency, and how many
# epochs each stopped run reported past the one it was judged out at.
#
# Its transfer mode (--prune-prior, issue 63; TRANSFER=0 skips it) splits
# the 132 configurations in two halves by seed 63 and judges
# TRANSFER_DRAWS draws of 27 from each half (default 100: 200 in all)
# learning from the other half, in virtual time: the rule without a
# prior, with the other half as the earlier sweep (whole; as the same
# rule pruned it; and that without its pruned runs' partial curves), and
# with mismatched priors made from it (an easier task: every error x 0.6;
# a harder one: x 1.5 + 0.1; learnt twice as fast; twice as slowly; and
# the synthetic slow-starter family, 27 steps); beside them, on the same
# draws, Optuna's Median and SuccessiveHalving pruners without a prior
# and with each whole prior copied into the study as completed trials
# (bench/prune-real.py transfer, peers-transfer). Then through the
# binary: each half runs once without --prune into an output directory
# (epochs EPOCH_S/10 s), the earlier sweep, and the first
# TRANSFER_BINARY_DRAWS transfer draws (default BINARY_DRAWS; in turn from
# each half) run with --prune SPEC --prune-prior that directory, beside
# the same draw and prior replayed.
#
# FAMILY=slow bench/prune.sh [SEEDS] [STEPS] [STEP_S] runs the family with
# slow starters instead (issue 45): 27 configurations, 24 ordinary (final
# uniform in [0.3, 1], tau in [1.5, 3]: fast) and 3 slow starters (final in
# [0.05, 0.2], tau in [8, 12]: among the worst at the first rungs, the best
# asymptotes), noise σ NOISE (default 0.05), STEPS 27 by default; each seed
# runs the full sweep, --prune loss:min,max=STEPS (forecast: the default
# rule), --prune with the rank rule and with rule=curve (first=3 for
# both, no tuning), and rule=curve with first=6 (curve6: six
# points before its first rung, the fewest it forecasts from), each also
# as RULE+pause, where the runs keep checkpoints (every CKPT_EVERY steps,
# default 3) so that a run judged out is paused and may be promoted, and
# prints per rule: the GPU-seconds of every attempt and the steps executed
# (from the ledger, promotions and redone steps included), their ratios to
# the full sweep, the makespan (first start to last end), whether the full
# sweep's winner (best loss at its last step) and the configuration with
# the lowest asymptote reached their last step, and the regret (the best
# loss a rule's completed runs reached, less the full sweep's best).
# RULES="full curve+pause" picks rules. KEEP=1 keeps the work folder.
set -euo pipefail

seeds=${1:-10}
steps=${2:-81}
step_s=${3:-0.02}
nodepack=${NODEPACK:-/tmp/nodepack}
work=$(mktemp -d)
trap '[[ -n ${KEEP:-} ]] || rm -rf "$work"' EXIT; [[ -n ${KEEP:-} ]] && echo "work: $work" >&2

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

if [[ ${FAMILY:-} == real ]]; then
	# FAMILY=real bench/prune.sh [DRAWS] [BINARY_DRAWS] [EPOCH_S]: see the
	# header. Needs go (it runs from a checkout) and python3 with optuna
	# (Debian's python3-optuna).
	draws=${1:-200}
	binary_draws=${2:-10}
	epoch_s=${3:-0.5}
	root=$(cd "$(dirname "$0")/.." && pwd)
	data=${DATA:-$root/../shared/data/lc-cifar10}
	py=python3
	$py -c 'import optuna' 2>/dev/null || py=/usr/bin/python3
	$py -c 'import optuna' || { echo "prune.sh: FAMILY=real needs python3-optuna" >&2; exit 1; }
	rules=${RULES:-loss:min,max=MAX loss:min,max=MAX+pause loss:min,first=3,max=MAX loss:min,first=5,max=MAX loss:min,first=9,max=MAX loss:min,first=3,max=MAX,rule=curve loss:min,first=6,max=MAX,rule=curve+pause}
	# table NAME DATA JOB: nodepack's rules replayed in virtual time
	# (runner/schedule's TestReplayDraws), the peers on the same draws,
	# and the table of both.
	table() {
		(cd "$root" && NODEPACK_REPLAY=$3 NODEPACK_REPLAY_OUT=$work/$1-nodepack.jsonl go test ./runner/schedule -run '^TestReplayDraws$' -count=1 >"$work/go.out" 2>&1) || { cat "$work/go.out" >&2; exit 1; }
		$py "$root/bench/prune-real.py" peers "$2" "$3" "$work/$1-peers.jsonl"
		$py "$root/bench/prune-real.py" table "$2" "$3" "$work/$1-nodepack.jsonl" "$work/$1-peers.jsonl"
	}
	# shellcheck disable=SC2086 # the rules are words
	$py "$root/bench/prune-real.py" draws "$data" "$draws" 54 "$work/draws.json" ${rules//MAX/40}
	echo "## real curves: $draws draws of 27 of the $(ls "$data"/config_*.json | wc -l) CIFAR-10 configurations, 40 epochs, 4 slots, virtual time (no stop latency)"
	table real "$data" "$work/draws.json"
	transfer_draws=${TRANSFER_DRAWS:-100}
	if [[ ${TRANSFER:-1} != 0 ]]; then
		$py "$root/bench/prune-real.py" transfer "$data" 63 "$transfer_draws" "$work" "$work/transfer.json" "${SPEC:-loss:min,max=40}"
		(cd "$root" && NODEPACK_REPLAY=$work/transfer.json NODEPACK_REPLAY_OUT=$work/transfer-nodepack.jsonl go test ./runner/schedule -run '^TestReplayDraws$' -count=1 -timeout 60m >"$work/go.out" 2>&1) || { cat "$work/go.out" >&2; exit 1; }
		$py "$root/bench/prune-real.py" peers-transfer "$data" "$work/transfer.json" "$work/transfer-peers.jsonl"
		echo
		echo "## transfer (--prune-prior): $transfer_draws draws of 27 from each half of the configurations (split by seed 63), each learning from the other half, virtual time"
		$py "$root/bench/prune-real.py" table "$data" "$work/transfer.json" "$work/transfer-nodepack.jsonl" "$work/transfer-peers.jsonl"
	fi
	seeds=${SEEDS:-100}
	for noise in 0.05 0.1; do
		# shellcheck disable=SC2086
		$py "$root/bench/prune-real.py" family slow "$work/slow-$noise" "$seeds" "$noise" "$work/slow-$noise.json" ${rules//MAX/27}
		echo
		echo "## slow starters, noise $noise: $seeds seeds of 27 configurations (3 slow starters) x 27 steps, the same replay"
		table "slow-$noise" "$work/slow-$noise" "$work/slow-$noise.json"
	done
	# shellcheck disable=SC2086
	$py "$root/bench/prune-real.py" family easy "$work/easy" "$((seeds / 10 > 0 ? seeds / 10 : 1))" 0.01 "$work/easy.json" ${rules//MAX/81}
	echo
	echo "## the easy family: $((seeds / 10 > 0 ? seeds / 10 : 1)) seeds of 81 configurations x 81 steps, noise 0.01, the same replay"
	table easy "$work/easy" "$work/easy.json"
	(( binary_draws > 0 || ${TRANSFER_BINARY_DRAWS:-0} > 0 )) || exit 0
	# Through the binary: each configuration a run that writes its curve,
	# epoch by epoch, each epoch as long as the data says, scaled so that
	# the median epoch takes EPOCH_S seconds.
	cat >"$work/replay.sh" <<'SH'
#!/usr/bin/env bash
# replay.sh --curve=FILE --scale=S: a stand-in for training that writes
# the stored validation error of each epoch to $NODEPACK_METRICS.
for a in "$@"; do declare "${a#--}"; done
exec python3 -c '
import json, os, sys, time
r = json.load(open(sys.argv[1])); scale = float(sys.argv[2]); prev = 0.0
for e, (v, t) in enumerate(zip(r["learning_curve"], r["time_steps"]), 1):
    time.sleep((t - prev) * scale); prev = t
    with open(os.environ["NODEPACK_METRICS"], "a") as f:
        f.write(json.dumps({"step": e, "loss": v}) + "\n")
' "$curve" "$scale"
SH
	chmod +x "$work/replay.sh"
	spec=${SPEC:-loss:min,max=40}
	echo
	echo "## through the binary: --prune $spec, --parallel 4, the median epoch ${epoch_s} s, the first $binary_draws draws"
	printf '| draw | epochs run | fewer epochs | the same rule replayed (same run ids) | binary / replayed saving | stops: epochs reported past the judged one, mean / max | winner reached epoch 40 | makespan |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n'
	for ((d = 0; d < binary_draws; d++)); do
		# shellcheck disable=SC2046 # the draw's configurations are words
		$py "$root/bench/prune-real.py" params "$data" "$epoch_s" $($py -c 'import json, sys; print(*json.load(open(sys.argv[1]))["draws"][int(sys.argv[2])])' "$work/draws.json" "$d") >"$work/draw.jsonl"
		rm -rf "$work/bin-$d"
		t0=$(date +%s.%N)
		"$nodepack" run -q --parallel 4 -o "$work/bin-$d" --prune "$spec" --params "$work/draw.jsonl" -- "$work/replay.sh" >/dev/null 2>"$work/err" || { cat "$work/err" >&2; exit 1; }
		t1=$(date +%s.%N)
		"$nodepack" status --runs --format json "$work/bin-$d" >"$work/bin-$d.json"
		# The same rule replayed on this draw with the runs' own ids (the
		# cautious cohort is chosen by id).
		$py - "$work/draws.json" "$d" "$work/bin-$d.json" "$spec" "$work/one.json" <<'PY'
import json, sys
job, d = json.load(open(sys.argv[1])), int(sys.argv[2])
rows = sorted(json.load(open(sys.argv[3])), key=lambda r: int(r["origin"].rsplit(":", 1)[1]))
json.dump({"data": job["data"], "draws": [job["draws"][d]], "slots": job["slots"], "rules": [sys.argv[4]], "ids": [[r["id"] for r in rows]]}, open(sys.argv[5], "w"))
PY
		(cd "$root" && NODEPACK_REPLAY=$work/one.json NODEPACK_REPLAY_OUT=$work/one.jsonl go test ./runner/schedule -run '^TestReplayDraws$' -count=1 >"$work/go.out" 2>&1) || { cat "$work/go.out" >&2; exit 1; }
		$py - "$data" "$work/draws.json" "$d" "$work/bin-$d" "$work/one.jsonl" "$spec" "$(echo "$t1 - $t0" | bc -l)" <<'PY'
import glob, json, os, sys
data, draws, d, out, replayed, spec, span = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6], float(sys.argv[7])
finals = {int(os.path.basename(f)[7:-5]): json.load(open(f))["learning_curve"][-1] for f in glob.glob(os.path.join(data, "config_*.json"))}
draw = json.load(open(draws))["draws"][d]
winner = min(range(len(draw)), key=lambda i: finals[draw[i]]) + 1  # its line
epochs, judged, over = 0, {}, []
for line in open(os.path.join(out, "ledger.jsonl")):
    r = json.loads(line)
    key = (r.get("id"), r.get("attempt"))
    if r["type"] == "rung" and r.get("pruned"):
        judged[key] = r["step"]
    if r["type"] == "finished" and r.get("steps"):
        epochs += r["steps"]["last"] - r["steps"]["first"] + 1
        if key in judged:  # the epochs it reported after the one it was judged out at
            over.append(r["steps"]["last"] - judged[key])
state = {int(r["origin"].rsplit(":", 1)[1]): r["state"] for r in json.load(open(out + ".json"))}
virtual = json.loads(open(replayed).readline())["epochs"]
full = len(draw) * 40
print(f"| {d} | {epochs} | {full / epochs:.2f}x | {full / virtual:.2f}x | {virtual / epochs:.2f} | {len(over)}: {sum(over) / max(len(over), 1):.2f} / {max(over, default=0):.0f} | {state.get(winner) == 'succeeded'} | {span:.0f} s |")
PY
	done
	binary_draws=${TRANSFER_BINARY_DRAWS:-$binary_draws}
	[[ ${TRANSFER:-1} != 0 ]] || exit 0
	# The transfer draws through the binary: each half once without
	# --prune (the earlier sweep), then draws of the other half with
	# --prune-prior it.
	for h in 0 1; do
		# the half the draws of half h learn from: the configurations of
		# prior-same-h
		# shellcheck disable=SC2046
		$py "$root/bench/prune-real.py" params "$data" "$(echo "$epoch_s / 10" | bc -l)" $($py -c 'import glob, json, os, sys; print(*sorted(int(os.path.basename(f)[7:-5]) for f in glob.glob(os.path.join(json.load(open(sys.argv[1]))["priors"][0]["dirs"][int(sys.argv[2])], "config_*.json"))))' "$work/transfer.json" "$h") >"$work/earlier-$h.jsonl"
		"$nodepack" run -q --parallel 4 -o "$work/earlier-$h" --params "$work/earlier-$h.jsonl" -- "$work/replay.sh" >/dev/null 2>"$work/err" || { cat "$work/err" >&2; exit 1; }
	done
	echo
	echo "## transfer through the binary: --prune $spec --prune-prior (the other half, run once without --prune), --parallel 4, the median epoch ${epoch_s} s, $binary_draws transfer draws"
	printf '| draw | half | epochs run | fewer epochs | the same rule and prior replayed | binary / replayed saving | runs the prior helped stop | prior dropped | winner reached epoch 40 | makespan |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n'
	sum_bin=0 sum_rep=0
	for ((k = 0; k < binary_draws; k++)); do
		d=$((k % 2 == 0 ? k / 2 : transfer_draws + k / 2)) h=$((k % 2))
		# shellcheck disable=SC2046
		$py "$root/bench/prune-real.py" params "$data" "$epoch_s" $($py -c 'import json, sys; print(*json.load(open(sys.argv[1]))["draws"][int(sys.argv[2])])' "$work/transfer.json" "$d") >"$work/draw.jsonl"
		rm -rf "$work/tbin-$d"
		t0=$(date +%s.%N)
		"$nodepack" run --parallel 4 -o "$work/tbin-$d" --prune "$spec" --prune-prior "$work/earlier-$h" --params "$work/draw.jsonl" -- "$work/replay.sh" >/dev/null 2>"$work/err" || { cat "$work/err" >&2; exit 1; }
		t1=$(date +%s.%N)
		"$nodepack" status --runs --format json "$work/tbin-$d" >"$work/tbin-$d.json"
		"$nodepack" status --json "$work/tbin-$d" >"$work/tbin-$d.status.json"
		$py - "$work/transfer.json" "$d" "$work/tbin-$d.json" "$spec" "$work/one.json" <<'PY'
import json, sys
job, d = json.load(open(sys.argv[1])), int(sys.argv[2])
rows = sorted(json.load(open(sys.argv[3])), key=lambda r: int(r["origin"].rsplit(":", 1)[1]))
same = job["priors"][0]
json.dump({"data": job["data"], "draws": [job["draws"][d]], "slots": job["slots"], "rules": [sys.argv[4]], "ids": [[r["id"] for r in rows]],
           "priors": [{"name": same["name"], "dirs": [same["dirs"][job["of"][d]]], "pruned": False}], "of": [0]}, open(sys.argv[5], "w"))
PY
		(cd "$root" && NODEPACK_REPLAY=$work/one.json NODEPACK_REPLAY_OUT=$work/one.jsonl go test ./runner/schedule -run '^TestReplayDraws$' -count=1 >"$work/go.out" 2>&1) || { cat "$work/go.out" >&2; exit 1; }
		$py - "$data" "$work/transfer.json" "$d" "$h" "$work/tbin-$d" "$work/one.jsonl" "$(echo "$t1 - $t0" | bc -l)" "$work/savings" <<'PY'
import glob, json, os, sys
data, job, d, h, out, replayed, span, savings = sys.argv[1], json.load(open(sys.argv[2])), int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6], float(sys.argv[7]), sys.argv[8]
finals = {int(os.path.basename(f)[7:-5]): json.load(open(f))["learning_curve"][-1] for f in glob.glob(os.path.join(data, "config_*.json"))}
draw = job["draws"][d]
winner = min(range(len(draw)), key=lambda i: finals[draw[i]]) + 1  # its line
epochs = 0
for line in open(os.path.join(out, "ledger.jsonl")):
    r = json.loads(line)
    if r["type"] == "finished" and r.get("steps"):
        epochs += r["steps"]["last"] - r["steps"]["first"] + 1
state = {int(r["origin"].rsplit(":", 1)[1]): r["state"] for r in json.load(open(out + ".json"))}
prior = json.load(open(out + ".status.json")).get("prune_prior") or {}
virtual = [json.loads(l) for l in open(replayed)][1]["epochs"]  # the line with the prior
full = len(draw) * 40
print(f"| {d} | {h} | {epochs} | {full / epochs:.2f}x | {full / virtual:.2f}x | {virtual / epochs:.2f} | {prior.get('stopped', 0)} | {'; '.join(prior.get('dropped') or []) or 'no'} | {state.get(winner) == 'succeeded'} | {span:.0f} s |")
open(savings, "w").write(f"{full / epochs} {full / virtual}\n")
PY
		read -r bin rep <"$work/savings"
		sum_bin=$(echo "$sum_bin + $bin" | bc -l) sum_rep=$(echo "$sum_rep + $rep" | bc -l)
	done
	printf 'mean saving through the binary %.2fx, replayed %.2fx: %.2f of the replay\n' "$(echo "$sum_bin / $binary_draws" | bc -l)" "$(echo "$sum_rep / $binary_draws" | bc -l)" "$(echo "$sum_bin / $sum_rep" | bc -l)"
	exit 0
fi

if [[ ${FAMILY:-} == slow ]]; then
	steps=${2:-27}
	noise=${NOISE:-0.05}
	rules=${RULES:-full forecast forecast+pause asha asha+pause curve curve+pause curve6 curve6+pause}
	CKPT_EVERY=${CKPT_EVERY:-3}
	cat >"$work/train.sh" <<'SH'
#!/usr/bin/env bash
# train.sh --final=F --tau=T --noise=SEED --sigma=S --steps=N --step_s=D
# With CKPT=K in its environment it keeps the checkpoint contract: every K
# steps it saves its step in $NODEPACK_CHECKPOINT_DIR and says so, and it
# resumes from there (the same noise: the draws before it are replayed).
for a in "$@"; do declare "${a#--}"; done
from=0
[[ -n ${CKPT:-} && -f $NODEPACK_CHECKPOINT_DIR/step ]] && from=$(cat "$NODEPACK_CHECKPOINT_DIR/step")
awk -v f="$final" -v tau="$tau" -v seed="$noise" -v sigma="$sigma" -v n="$steps" -v d="$step_s" -v from="$from" -v every="${CKPT:-0}" 'BEGIN {
	srand(seed)
	out = ENVIRON["NODEPACK_METRICS"]; ck = ENVIRON["NODEPACK_CHECKPOINT_DIR"]
	for (s = 1; s <= n; s++) {
		u = rand(); v = rand(); z = sqrt(-2 * log(u + 1e-12)) * cos(6.2831853 * v)
		if (s <= from) continue
		printf "{\"step\": %d, \"loss\": %.5f}\n", s, f + 1.5 * exp(-s / tau) + sigma * z >> out
		if (every > 0 && s % every == 0) {
			print s > (ck "/step.tmp"); close(ck "/step.tmp"); system("mv " ck "/step.tmp " ck "/step")
			printf "{\"step\": %d, \"checkpoint\": %d}\n", s, s >> out
		}
		fflush(out)
		system("sleep " d)
	}
}'
SH
	chmod +x "$work/train.sh"
	for ((seed = 1; seed <= seeds; seed++)); do
		python3 - "$work" "$seed" "$steps" "$step_s" "$noise" <<'PY'
import json, random, sys
work, seed, steps, step_s, sigma = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], float(sys.argv[5])
rng = random.Random(seed)
configs = [("ordinary", rng.uniform(0.3, 1.0), rng.uniform(1.5, 3)) for _ in range(24)] + \
          [("slow", rng.uniform(0.05, 0.2), rng.uniform(8, 12)) for _ in range(3)]
rng.shuffle(configs)
with open(f"{work}/sweep.jsonl", "w") as f:
    for kind, final, tau in configs:
        f.write(json.dumps({"final": round(final, 4), "tau": round(tau, 3), "noise": rng.randrange(1 << 30), "sigma": sigma,
                            "steps": steps, "step_s": step_s, "nodepack": {"gpus": 0.5, "cpus": 0}}) + "\n")
json.dump([f for _, f, _ in configs], open(f"{work}/finals-{seed}.json", "w"))
PY
		for rule in $rules; do
			rm -rf "$work/$rule-$seed"
			flags=()
			case ${rule%+pause} in
			forecast) flags=(--prune "loss:min,max=$steps") ;;
			asha) flags=(--prune "loss:min,first=3,max=$steps") ;;
			curve) flags=(--prune "loss:min,first=3,max=$steps,rule=curve") ;;
			curve6) flags=(--prune "loss:min,first=6,max=$steps,rule=curve") ;;
			esac
			ckpt=
			[[ $rule == *+pause ]] && ckpt=$CKPT_EVERY
			CKPT=$ckpt "$nodepack" run -q -o "$work/$rule-$seed" "${flags[@]}" --params "$work/sweep.jsonl" -- "$work/train.sh" >/dev/null 2>"$work/err" || { cat "$work/err" >&2; exit 1; }
			"$nodepack" status --runs --format json "$work/$rule-$seed" >"$work/$rule-$seed.json"
		done
	done
	python3 - "$work" "$seeds" "$steps" "$noise" "$rules" "$CKPT_EVERY" <<'PY'
import json, sys
work, seeds, steps, noise, rules, every = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5].split(), sys.argv[6]
from datetime import datetime
def ledger(path):
    held, gpu_s, steps_done, times = {}, 0.0, 0.0, []
    for line in open(path):
        r = json.loads(line)
        key = (r.get("id"), r.get("attempt"))
        if r["type"] in ("started", "finished"):
            times.append(datetime.fromisoformat(r["time"].replace("Z", "+00:00")).timestamp())
        if r["type"] == "started":
            held[key] = 0.5
        elif r["type"] == "finished":
            gpu_s += held.pop(key, 0.5) * r.get("duration_s", 0)
            st = r.get("steps")
            if st:
                steps_done += st["last"] - st["first"] + 1
    return gpu_s, steps_done, max(times) - min(times)
totals = {rule: [0.0, 0.0, 0, 0, 0.0] for rule in rules}
print(f"{seeds} seeds of 27 configurations (3 slow starters) x {steps} steps, noise {noise}; +pause: the runs checkpoint every {every} steps")
print(f"{'seed':>4} {'rule':>12} {'GPU-s':>8} {'steps':>7} {'GPU-s saved':>11} {'steps saved':>11} {'makespan':>8} {'winner':>7} {'lowest asymptote':>17} {'regret':>7}")
line_of = lambda r: int(r["origin"].rsplit(":", 1)[1])
for seed in range(1, seeds + 1):
    finals = json.load(open(f"{work}/finals-{seed}.json"))
    lowest = min(range(len(finals)), key=lambda i: finals[i]) + 1  # its line
    rows = {rule: json.load(open(f"{work}/{rule}-{seed}.json")) for rule in totals}
    winner = min(rows["full"], key=lambda r: r["loss"])
    base_gpu, base_steps, _ = ledger(f"{work}/full-{seed}/ledger.jsonl")
    for rule in totals:
        gpu, stp, span = ledger(f"{work}/{rule}-{seed}/ledger.jsonl")
        state = {line_of(r): r["state"] for r in rows[rule]}
        best = min((r["loss"] for r in rows[rule] if r["state"] == "succeeded"), default=float("inf"))
        won, low = state.get(line_of(winner)) == "succeeded", state.get(lowest) == "succeeded"
        t = totals[rule]
        t[0] += gpu; t[1] += stp; t[2] += won; t[3] += low; t[4] += span
        print(f"{seed:>4} {rule:>12} {gpu:8.1f} {stp:7.0f} {base_gpu / gpu:10.2f}x {base_steps / stp:10.2f}x {span:7.1f}s {str(won):>7} {str(low):>17} {best - winner['loss']:7.3f}")
for rule, t in totals.items():
    print(f"{rule:>12}: {t[0]:.1f} GPU-s, {t[1]:.0f} steps, makespans {t[4]:.1f} s: {totals['full'][0] / t[0]:.2f}x fewer GPU-s, {totals['full'][1] / t[1]:.2f}x fewer steps, {totals['full'][4] / t[4]:.2f}x shorter than the full sweep; "
          f"its winner completed in {t[2]} of {seeds} seeds, the lowest asymptote in {t[3]} of {seeds}")
PY
	exit 0
fi

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
