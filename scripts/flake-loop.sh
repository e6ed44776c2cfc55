#!/usr/bin/env bash
# The test suite under load, several times in a row: two CPU hogs
# (stress-ng --cpu 2, started and ended by pid), then go test -count=3
# ./... ROUNDS times (default 3), then once more with -race. It prints each
# round's wall time and exits non-zero at the first failure.
#
#   scripts/flake-loop.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}"
command -v stress-ng >/dev/null || { echo "flake-loop: needs stress-ng (apt-get install stress-ng)" >&2; exit 1; }
stress-ng --cpu 2 --quiet &
hogs=$!
trap 'kill "$hogs" 2>/dev/null; wait "$hogs" 2>/dev/null || true' EXIT
for round in $(seq "$rounds"); do
	start=$(date +%s)
	go test -count=3 ./... >"/tmp/flake-loop.$round.log" 2>&1 || { tail -50 "/tmp/flake-loop.$round.log"; echo "round $round FAILED"; exit 1; }
	echo "round $round: go test -count=3 ./... passed under two CPU hogs in $(( $(date +%s) - start )) s"
done
start=$(date +%s)
go test -race -count=1 ./... >/tmp/flake-loop.race.log 2>&1 || { tail -50 /tmp/flake-loop.race.log; echo "race round FAILED"; exit 1; }
echo "go test -race ./... passed under two CPU hogs in $(( $(date +%s) - start )) s"
