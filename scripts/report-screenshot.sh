#!/usr/bin/env bash
# report-screenshot.sh: run a small hyperparameter sweep on four fake GPUs
# (a learning rate over three decades, an optimizer, a width, two seeds;
# the big width asks for a GPU of its own, the rest for a quarter; a CUDA
# out-of-memory that is retried, and a run that fails), each run appending
# its loss per step to $NODEPACK_METRICS; write its report with nodepack
# report, and screenshot the page with headless Chromium into
# docs/report.png, the picture the README shows. About 30 s.
#
#   scripts/report-screenshot.sh [OUT.png]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-docs/report.png}
[[ $out = /* ]] || out=$PWD/$out
command -v chromium >/dev/null || { echo "report-screenshot: needs chromium (apt-get install chromium)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/nodepack" ./cmd/nodepack
cat >"$work/train.sh" <<'SH'
#!/usr/bin/env bash
# A stand-in for training: the loss falls towards a floor that depends on
# the configuration, one line per step.
for a in "$@"; do declare "${a#--}"; done
floor=$(awk -v lr="$lr" -v o="$opt" -v w="$width" -v s="$seed" 'BEGIN { l = log(lr / (o == "adam" ? 0.003 : 0.03)) / log(10); printf "%.4f", 0.25 + 0.35 * l * l + (w == 64 ? 0.08 : 0) + 0.01 * s }')
[ "$lr" = 0.3 ] && [ "$opt" = sgd ] && [ "$seed" = 2 ] && { sleep 0.3; echo 'ValueError: loss is nan' >&2; exit 1; }
if [ "$width" = 1024 ] && [ "$lr" = 0.001 ] && [ "$seed" = 1 ] && [ ! -e "$NODEPACK_RUN_DIR/oom-once" ]; then
	touch "$NODEPACK_RUN_DIR/oom-once"; sleep 0.5; echo 'torch.OutOfMemoryError: CUDA out of memory.' >&2; exit 1
fi
for step in $(seq 0 100 3000); do
	awk -v f="$floor" -v s="$step" -v lr="$lr" 'BEGIN { printf "{\"step\": %d, \"loss\": %.4f}\n", s, f + 2.2 * exp(-s * lr * 2 / (lr + 0.002) / 600) }' >>"$NODEPACK_METRICS"
	sleep 0.01
done
SH
chmod +x "$work/train.sh"
for lr in 0.0003 0.001 0.003 0.01 0.03 0.1 0.3; do
	for opt in adam sgd; do
		for width in 64 256 1024; do
			for seed in 1 2; do
				req=', "nodepack": {"gpus": 0.25}'
				[ "$width" = 1024 ] && req=', "nodepack": {"gpus": 1}'
				echo "{\"lr\": $lr, \"opt\": \"$opt\", \"width\": $width, \"seed\": $seed$req}"
			done
		done
	done
done >"$work/sweep.jsonl"
CUDA_VISIBLE_DEVICES=0,1,2,3 "$work/nodepack" run -q --retry cuda-oom=1 --retry-backoff 0 -o "$work/out" \
	--params "$work/sweep.jsonl" -- "$work/train.sh" || true
"$work/nodepack" report "$work/out"
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1200,1500 \
	--screenshot="$out" "file://$work/out/report.html" 2>/dev/null
echo "report-screenshot: $out"
