#!/usr/bin/env bash
# throughput.sh: nodepack run against xargs -P on N trivial runs, on this
# machine, in the same invocation, so the two numbers are comparable.
#
#   go build -o /tmp/nodepack ./cmd/nodepack && bench/throughput.sh [N] [P]
#
# N (default 5000) lines of `true`; P (default 2) runs at once. nodepack
# writes a log directory per run (stdout.log, stderr.log) and a private
# TMPDIR per run; xargs writes nothing, so the difference is an upper bound
# on nodepack's per-run cost. Set OUT to put nodepack's logs elsewhere (the
# file system matters: on this VM /tmp costs ~1 ms per run dir, /dev/shm
# ~10 µs). NODEPACK overrides the binary.
set -euo pipefail

n=${1:-5000}
p=${2:-2}
nodepack=${NODEPACK:-/tmp/nodepack}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
out=${OUT:-$work}/nodepack-out

seq "$n" | sed "s/.*/true/" >"$work/tasks.txt"

seconds() { # seconds CMD...: wall time of CMD in seconds
	local t0 t1
	t0=$(date +%s.%N)
	"$@" >/dev/null 2>&1
	t1=$(date +%s.%N)
	echo "$t1 - $t0" | bc -l
}

report() { # report NAME SECONDS
	printf '%-28s %7.2f s  %7.0f runs/s\n' "$1" "$2" "$(echo "$n / $2" | bc -l)"
}

echo "$n runs of 'true', $p at once, $(nproc) CPUs"
report "xargs -P $p (bash -c)" "$(seconds xargs -P "$p" -d '\n' -n 1 bash -c <"$work/tasks.txt")"
report "xargs -P $p (exec true)" "$(seconds xargs -P "$p" -d '\n' -n 1 true <"$work/tasks.txt")"
report "nodepack run -j $p (bash -c)" "$(seconds "$nodepack" run --parallel "$p" --quiet --output "$out" "$work/tasks.txt")"
if [[ $(find "$out/runs" -mindepth 1 -maxdepth 1 -type d | wc -l) -ne $n ]]; then
	echo "nodepack did not leave $n run directories in $out/runs" >&2
	exit 1
fi
rm -rf "$out"
