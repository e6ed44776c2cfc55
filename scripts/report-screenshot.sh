#!/usr/bin/env bash
# report-screenshot.sh: run a small mixed sweep on four fake GPUs (2-GPU,
# 1-GPU and quarter-GPU runs, a CUDA out-of-memory that is retried, a
# failure), write its report with nodepack report, and screenshot the page
# with headless Chromium into docs/report.png, the picture the README
# shows. About 20 s.
#
#   scripts/report-screenshot.sh [OUT.png]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-docs/report.png}
command -v chromium >/dev/null || { echo "report-screenshot: needs chromium (apt-get install chromium)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/nodepack" ./cmd/nodepack
{
	echo "#nodepack gpus=2"
	for s in 1 2 3; do echo "sleep 3.$s # big model, seed $s"; done
	echo "#nodepack gpus=1"
	for s in 1 2 3 4; do echo "sleep 1.$s # medium model, seed $s"; done
	echo "test -e $work/oom-once || { touch $work/oom-once; sleep 1; echo 'torch.OutOfMemoryError: CUDA out of memory.' >&2; exit 1; } # medium model, big batch"
	echo "#nodepack gpus=0.25"
	for s in $(seq 1 16); do echo "sleep 0.$((s % 9 + 1)) # small model, seed $s"; done
	echo "sleep 0.5; echo 'ValueError: learning rate must be positive' >&2; exit 1 # small model, lr -1"
} >"$work/sweep.txt"
CUDA_VISIBLE_DEVICES=0,1,2,3 "$work/nodepack" run -q --retry cuda-oom=1 --retry-backoff 0 -o "$work/out" "$work/sweep.txt" || true
"$work/nodepack" report "$work/out"
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1200,900 \
	--screenshot="$PWD/$out" "file://$work/out/report.html" 2>/dev/null
echo "report-screenshot: $out"
