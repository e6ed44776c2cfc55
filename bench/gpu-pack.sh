#!/usr/bin/env bash
# gpu-pack.sh: does packing small trainings onto GPUs make them finish
# sooner? A sweep of RUNS small PyTorch trainings as users run them in
# sweeps (an MLP and a small CNN, batch 64 and 256, on data made in the
# run: no downloads), each STEPS steps, reporting its steps and samples to
# $NODEPACK_METRICS, runs once per packing:
#
#   - one run per GPU (the baseline);
#   - 2, 4 and 8 runs per GPU taking turns (time-slicing);
#   - the same through nodepack's own MPS daemon (--mps on), where
#     nvidia-cuda-mps-control is;
#   - --runs-per-gpu auto, taking turns and through MPS: the density
#     chosen from the runs' measured steps per second (--density-window
#     DENSITY_WINDOW, default 5s).
#
# For each it prints the makespan and the samples per second of the whole
# sweep, as ratios to one run per GPU, and the runs that failed for their
# GPU's memory or a fault (a neighbour's doing where runs share); then
# auto's ratios to one run per GPU and to the best fixed density of the
# same kind, against the targets (2× and 0.95×), and its decisions.
#
#   go build -o /tmp/nodepack ./cmd/nodepack && bench/gpu-pack.sh [--simulate] [RUNS] [STEPS]
#
# Without a GPU (or a PyTorch that sees one) it exits 2 with one line.
# --simulate runs the same script against a simulated GPU: two fake GPUs,
# and a training that sleeps its steps (5 to 40 ms each alone), k runs on
# one GPU getting min(k, 1.6) times the throughput of one by time-slicing
# and min(k, 3) under MPS (a stand-in daemon), so that CI runs its
# plumbing; its figures are the model's, not a GPU's. NODEPACK overrides
# the binary.
set -euo pipefail

simulate=0
if [[ ${1:-} == --simulate ]]; then
	simulate=1
	shift
fi
runs=${1:-16}
steps=${2:-2000}
window=${DENSITY_WINDOW:-5s}
nodepack=${NODEPACK:-/tmp/nodepack}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if ((!simulate)); then
	if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
		echo "gpu-pack.sh: no GPU here (nvidia-smi finds none); --simulate runs its plumbing against a simulated GPU" >&2
		exit 2
	fi
	if ! python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
		echo "gpu-pack.sh: no PyTorch that sees a GPU here (python3 -c 'import torch')" >&2
		exit 2
	fi
fi

cat >"$work/train.py" <<'PY'
# train.py MODEL BATCH STEPS [--key=value ...]: a small training on data
# made here; every 20 steps it appends its step, samples and loss to the
# file $NODEPACK_METRICS names.
import json, os, sys, torch
model, batch, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
torch.manual_seed(0)
nn = torch.nn
if model == "mlp":
    net = nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))
    x = torch.randn(batch, 784)
else:
    net = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32, 64, 3, padding=1),
                        nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(64 * 8 * 8, 10))
    x = torch.randn(batch, 3, 32, 32)
net, x = net.cuda(), x.cuda()
y = torch.randint(0, 10, (batch,), device="cuda")
opt = torch.optim.SGD(net.parameters(), lr=0.01)
with open(os.environ["NODEPACK_METRICS"], "a") as out:
    for step in range(1, steps + 1):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        if step % 20 == 0 or step == steps:
            out.write(json.dumps({"step": step, "samples": step * batch, "loss": loss.item()}) + "\n")
            out.flush()
PY

cat >"$work/sim_train.py" <<'PY'
# sim_train.py MODEL BATCH STEPS [--key=value ...]: train.py's reports
# against a simulated GPU. A step takes BASE seconds alone (5 to 40 ms); the k runs on
# one GPU (each a file in $SIM_GPUS/<its GPU>) get min(k, 1.6) times one
# run's throughput taking turns, min(k, 3) as MPS clients.
import json, os, sys, time
model, batch, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
base = {"mlp": 0.01, "cnn": 0.02}[model] * batch / 128
gpu = os.path.join(os.environ["SIM_GPUS"], os.environ["CUDA_VISIBLE_DEVICES"])
os.makedirs(gpu, exist_ok=True)
me = os.path.join(gpu, str(os.getpid()))
open(me, "w").close()
speedup = 3.0 if os.environ.get("CUDA_MPS_PIPE_DIRECTORY") else 1.6
try:
    with open(os.environ["NODEPACK_METRICS"], "a") as out:
        for step in range(1, steps + 1):
            k = max(len(os.listdir(gpu)), 1)
            time.sleep(base * k / min(k, speedup))
            if step % 20 == 0 or step == steps:
                out.write(json.dumps({"step": step, "samples": step * batch, "loss": 1 / step}) + "\n")
                out.flush()
finally:
    os.remove(me)
PY

train=$work/train.py
flags=()
if ((simulate)); then
	train=$work/sim_train.py
	export SIM_GPUS=$work/gpus CUDA_VISIBLE_DEVICES=0,1 # two fake GPUs
	mkdir -p "$SIM_GPUS" "$work/bin"
	# A stand-in MPS control daemon: -f runs until "quit" comes.
	cat >"$work/bin/nvidia-cuda-mps-control" <<'SH'
#!/bin/sh
case "$1" in
-f) echo $$ >"$CUDA_MPS_PIPE_DIRECTORY/nvidia-cuda-mps-control.pid"
    while [ ! -e "$CUDA_MPS_PIPE_DIRECTORY/quit" ]; do sleep 0.02; done ;;
*) read cmd; [ "$cmd" = quit ] && touch "$CUDA_MPS_PIPE_DIRECTORY/quit" ;;
esac
SH
	chmod +x "$work/bin/nvidia-cuda-mps-control"
	export PATH=$work/bin:$PATH
	flags=(--sample-interval 0)
fi

python3 - "$runs" >"$work/runs.jsonl" <<'PY'
import itertools, json, sys
combos = list(itertools.product(["mlp", "cnn"], [64, 256]))
for i in range(int(sys.argv[1])):
    model, batch = combos[i % len(combos)]
    print(json.dumps({"model": model, "batch": batch, "seed": i // len(combos)}))
PY

# pack NAME FLAGS...: runs the sweep with FLAGS; appends NAME, makespan,
# samples and the failures it counts to $work/results.
pack() {
	local name=$1 start end
	shift
	start=$(date +%s.%N)
	"$nodepack" run -q "${flags[@]}" "$@" -o "$work/out-$name" --params "$work/runs.jsonl" -- python3 "$train" '{model}' '{batch}' "$steps" >"$work/$name.log" 2>&1 || true
	end=$(date +%s.%N)
	"$nodepack" status --runs --format json "$work/out-$name" >"$work/$name.json" 2>>"$work/$name.log" || true
	python3 - "$name" "$start" "$end" "$work/$name.json" >>"$work/results" <<'PY'
import json, sys
name, start, end, path = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
try:
    rows = json.load(open(path))
except (OSError, ValueError):
    rows = []
samples = sum(r.get("samples") or 0 for r in rows if isinstance(r.get("samples"), (int, float)))
bad = sum(1 for r in rows if r.get("class") in ("cuda-oom", "gpu-mem", "gpu-error"))
failed = sum(1 for r in rows if r.get("state") == "failed")
print(name, end - start, samples, len(rows), failed, bad)
PY
}

pack one --runs-per-gpu 1
for k in 2 4 8; do
	pack "ts$k" --runs-per-gpu "$k"
done
pack auto --runs-per-gpu auto --density-window "$window"
mps=0
if command -v nvidia-cuda-mps-control >/dev/null; then
	mps=1
	for k in 2 4 8; do
		pack "mps$k" --runs-per-gpu "$k" --mps on
	done
	pack mpsauto --runs-per-gpu auto --density-window "$window" --mps on
fi
for name in auto mpsauto; do
	[[ -f $work/out-$name/ledger.jsonl ]] || continue
	python3 - "$name" "$work/out-$name/ledger.jsonl" >>"$work/decisions" <<'PY'
import json, sys
name, path = sys.argv[1], sys.argv[2]
for line in open(path):
    rec = json.loads(line)
    if rec.get("type") == "density":
        print(f"{name}: {rec['from']} -> {rec['to']} per GPU{' (final)' if rec.get('final') else ''}: {rec.get('why', '')}  [{rec.get('shape', '')}]")
PY
done

python3 - "$work/results" "$runs" "$steps" "$simulate" "$mps" "$work/decisions" <<'PY'
import os, sys
results, runs, steps, simulate, mps, decisions = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1", sys.argv[5] == "1", sys.argv[6]
rows = [l.split() for l in open(results)]
base = {r[0]: r for r in rows}.get("one")
label = {"one": "one run per GPU", "ts2": "2 per GPU, taking turns", "ts4": "4 per GPU, taking turns", "ts8": "8 per GPU, taking turns",
         "mps2": "2 per GPU, MPS", "mps4": "4 per GPU, MPS", "mps8": "8 per GPU, MPS", "auto": "auto, taking turns", "mpsauto": "auto, MPS"}
print(("SIMULATED GPUs (the model's figures, not a GPU's): " if simulate else "") + f"{runs} runs of {steps} steps")
print(f"{'packing':26} {'makespan':>9} {'samples/s':>10} {'vs one/GPU':>11} {'failed':>7} {'by memory/fault':>16}")
b_rate = float(base[2]) / float(base[1]) if base and float(base[1]) > 0 else 0
ok = True
rate = {}
for name, wall, samples, n, failed, bad in rows:
    wall, samples = float(wall), float(samples)
    rate[name] = samples / wall if wall > 0 else 0
    ratio = f"{rate[name] / b_rate:.2f}x" if b_rate else "-"
    print(f"{label.get(name, name):26} {wall:8.2f}s {rate[name]:10.0f} {ratio:>11} {failed:>7} {bad:>16}")
    ok &= int(n) == int(runs) and samples > 0
if not mps:
    print("MPS: no nvidia-cuda-mps-control here: its rows are left out")
for auto, fixed in (("auto", ("one", "ts2", "ts4", "ts8")), ("mpsauto", ("one", "mps2", "mps4", "mps8"))):
    if auto not in rate or not b_rate:
        continue
    best = max((f for f in fixed if f in rate), key=lambda f: rate[f])
    vs_one, vs_best = rate[auto] / b_rate, rate[auto] / rate[best] if rate[best] else 0
    print(f"{label[auto]}: {vs_one:.2f}x one run per GPU (target 2x), {vs_best:.2f}x the best fixed density, {label[best]} (target 0.95x)")
if os.path.exists(decisions):
    print("auto's decisions:")
    for line in open(decisions):
        print("  " + line.rstrip())
sys.exit(0 if ok else 1)
PY
