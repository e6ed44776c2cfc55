#!/usr/bin/env bash
# search-lc.sh: search on real learning curves (issue 65). Each of SEEDS
# seeds (default 50) runs four searches over the 132 CIFAR-10
# configurations of ../shared/data/lc-cifar10 (DATA= elsewhere), each
# with a budget of BUDGET epochs (default 800: 20 full runs), on 4 lanes:
#   tpe+prune     nodepack run --search 'search-lc.py tpe' --prune error:min,max=40
#   random+prune  the same with the configurations in a random order
#   tpe           TPE without pruning
#   hydra-optuna  Hydra's Optuna sweeper (TPE) through hydra/launcher=nodepack,
#                 batches of 4, BUDGET/40 trials (it cannot prune)
# A proposal runs the nearest configuration, by its five parameters, that
# the sweep has not run yet, replaying its curve an epoch every EPOCH_S
# seconds (default 0.02); --prune reads the curves every 10ms. Then it
# prints, per search, how many seeds reach the best configuration and
# within 0.005 of it, and the epochs they need, and plots the regret
# (best final error found minus the best) against epochs spent to PLOT
# (default docs/search-regret.png).
#
#   go build -o /tmp/nodepack ./cmd/nodepack && bench/search-lc.sh [SEEDS] [BUDGET] [EPOCH_S]
#
# KEEP=FILE keeps the per-sweep results (search-lc.py evaluate FILE PLOT
# BUDGET prints and plots them again). Needs Debian's python3-optuna, python3-matplotlib, and for the Hydra
# search the real Hydra and its Optuna sweeper (../shared/vendor, as
# integrations/hydra's tests find them; HYDRA=0 skips it).
set -euo pipefail
cd "$(dirname "$0")/.."
SEEDS=${1:-50}
BUDGET=${2:-800}
EPOCH_S=${3:-0.02}
NODEPACK=${NODEPACK:-/tmp/nodepack}
PY=/usr/bin/python3
HERE=$PWD/bench
VENDOR=${VENDOR:-$PWD/../shared/vendor}
PLOT=${PLOT:-docs/search-regret.png}
export LC_EPOCH_S=$EPOCH_S
[ -n "${DATA:-}" ] && export LC_DATA=$DATA
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
results=$work/results.jsonl
mkdir -p "$work/bin"
ln -s "$NODEPACK" "$work/bin/nodepack"
ln -s "$PY" "$work/bin/python"
export PATH=$work/bin:$PATH

run_search() { # METHOD SEED SEARCHER [FLAGS…]
	local method=$1 seed=$2 searcher=$3
	shift 3
	local out=$work/$method-$seed
	LC_STATE=$out.state "$NODEPACK" run -q --gpus none --parallel 4 --grace 1s -o "$out" "$@" \
		--search "$PY $HERE/search-lc.py $searcher $BUDGET $seed" -- "$PY" "$HERE/search-lc.py" replay >"$out.log" 2>&1 ||
		{ echo "$method seed $seed failed:" >&2; cat "$out.log" >&2; exit 1; }
	"$PY" "$HERE/search-lc.py" collect "$method" "$seed" "$out" >>"$results"
}

start=$SECONDS
for seed in $(seq 1 "$SEEDS"); do
	run_search tpe+prune "$seed" tpe --prune error:min,max=40,every=10ms
	run_search random+prune "$seed" random --prune error:min,max=40,every=10ms
	run_search tpe "$seed" tpe
	if [ "${HYDRA:-1}" = 1 ]; then
		out=$work/hydra-$seed
		mkdir -p "$out"
		(cd "$out" && LC_STATE=$out/state PYTHONPATH=$VENDOR/hydra-core-1.3:$VENDOR/hydra-optuna-sweeper-1.3:$HERE/../integrations/hydra \
			"$PY" "$HERE/search-lc-hydra/app.py" --multirun "hydra.sweeper.n_trials=$((BUDGET / 40))" \
			"hydra.sweeper.sampler.seed=$seed" hydra.sweep.dir=sweep >log 2>&1) ||
			{ echo "hydra seed $seed failed:" >&2; tail -20 "$out/log" >&2; exit 1; }
		"$PY" "$HERE/search-lc.py" collect hydra-optuna "$seed" "$out" "$out/state.results" >>"$results"
	fi
	printf 'seed %d done at %ds\n' "$seed" $((SECONDS - start)) >&2
done
"$PY" "$HERE/search-lc.py" evaluate "$results" "$PLOT" "$BUDGET"
cp "$results" "${KEEP:-/dev/null}" 2>/dev/null || true
