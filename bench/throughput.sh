#!/usr/bin/env bash
# throughput.sh: nodepack run against xargs -P and GNU parallel on N
# trivial runs (task lines `true`, which xargs and GNU parallel run through
# bash -c; nodepack starts a plain line's program directly, as bash would
# exec it), in turn on this machine, ROUNDS times; it prints the median of
# each. nodepack also runs lines bash must run (`true;`), as xargs does
# every line: its own cost beside the same bash.
#
#   go build -o /tmp/nodepack ./cmd/nodepack && bench/throughput.sh [N] [P] [ROUNDS]
#
# N (default 2000) runs, P (default 2) at once. nodepack runs as a user
# runs it: ledger (group-committed, fsynced), a log directory per run with
# stdout.log and stderr.log, CPU affinity and thread caps, a private TMPDIR,
# usage sampling at its default interval. xargs writes nothing; GNU parallel
# writes its --joblog. nodepack runs twice: with its output and TMPDIR on
# tmpfs (/dev/shm), which shows nodepack's own cost, and on the file system
# of $TMPDIR (default /tmp), which adds that file system's cost of creating
# a directory and two files per run (on ext4 it varies a lot with what was
# deleted just before). Besides wall and CPU time (user+system of the tool
# and everything it started) it prints nodepack's lane refill gap: from the
# end of a run to the start of the next in the same lane (NODEPACK_SLOT), from the ledger.
# GNU parallel is installed with apt when missing (or set PARALLEL_BIN;
# PARALLEL_BIN=none leaves it out). NODEPACK overrides the binary;
# NODEPACK_FLAGS adds flags after nodepack's own --parallel P (a later
# --parallel wins), e.g. NODEPACK_FLAGS='--runs-per-gpu 16' on a GPU node. With go on PATH it also times
# bench/goexec, a bare Go os/exec loop that does nothing but run the lines:
# the floor for any launcher written in Go on this machine. NODEPACK_OLD,
# another nodepack binary (an older build), is timed in the same rounds on
# tmpfs, for the new build's throughput and CPU per run against the old's.
set -euo pipefail

n=${1:-2000}
p=${2:-2}
rounds=${3:-3}
nodepack=${NODEPACK:-/tmp/nodepack}
old=${NODEPACK_OLD:-}
work=$(mktemp -d)
shm=/dev/shm
[[ -d $shm && -w $shm ]] || shm=$work
shmwork=$(mktemp -d "$shm/nodepack-bench.XXXXXX")
trap 'rm -rf "$work" "$shmwork"' EXIT

if [[ ${PARALLEL_BIN:-} == none ]]; then
	PARALLEL_BIN=
elif ! command -v parallel >/dev/null && [[ -z ${PARALLEL_BIN:-} ]]; then
	if command -v apt-get >/dev/null; then
		echo "installing GNU parallel (apt-get install parallel)" >&2
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq parallel >/dev/null 2>&1 ||
			{ apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq parallel >/dev/null; }
	fi
fi
parallel=${PARALLEL_BIN-$(command -v parallel || true)}
read -ra flags <<<"${NODEPACK_FLAGS:-}"

seq "$n" | sed "s/.*/true/" >"$work/tasks.txt"
seq "$n" | sed "s/.*/true;/" >"$work/shell.txt"

goexec=
if command -v go >/dev/null; then
	goexec=$work/goexec
	(cd "$(dirname "$0")/.." && go build -o "$goexec" ./bench/goexec)
fi

# timed NAME CMD...: runs CMD, appends "NAME wall cpu" to $work/times.
timed() {
	local name=$1 t
	shift
	TIMEFORMAT='%R %U %S'
	t=$({ time "$@" >/dev/null 2>&1; } 2>&1)
	read -r wall user sys <<<"$t"
	echo "$name $wall $(awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }')" >>"$work/times"
}

run_nodepack() { # run_nodepack DIR [TASKS [BINARY]]: output and TMPDIR under DIR
	rm -rf "$1/out" "$1/tmp"
	mkdir -p "$1/tmp"
	TMPDIR=$1/tmp "${3:-$nodepack}" run --parallel "$p" "${flags[@]}" --quiet --output "$1/out" "${2:-$work/tasks.txt}"
}

for round in $(seq "$rounds"); do
	timed xargs xargs -P "$p" -d '\n' -n 1 bash -c <"$work/tasks.txt"
	if [[ -n $parallel ]]; then
		timed parallel "$parallel" -j "$p" --joblog "$work/joblog" <"$work/tasks.txt"
	fi
	if [[ -n $goexec ]]; then
		timed goexec "$goexec" "$p" <"$work/tasks.txt"
	fi
	if [[ -n $old ]]; then
		timed nodepack-old run_nodepack "$shmwork" "$work/tasks.txt" "$old"
	fi
	timed nodepack-tmpfs run_nodepack "$shmwork"
	cp "$shmwork/out/ledger.jsonl" "$work/ledger-tmpfs-$round.jsonl"
	timed nodepack-bash run_nodepack "$shmwork" "$work/shell.txt"
	timed nodepack-fs run_nodepack "$work"
	if [[ $(find "$work/out/runs" -mindepth 1 -maxdepth 1 -type d | wc -l) -ne $n ]]; then
		echo "nodepack did not leave $n run directories" >&2
		exit 1
	fi
	echo "round $round/$rounds done" >&2
done

python3 - "$n" "$p" "$(nproc)" "$work/times" "$work"/ledger-tmpfs-*.jsonl <<'EOF'
import json, os, statistics, sys
from datetime import datetime

n, p, cpus, times, ledgers = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
by = {}
for line in open(times):
    name, wall, cpu = line.split()
    by.setdefault(name, []).append((float(wall), float(cpu)))
med = {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v)) for k, v in by.items()}

def t(s):
    base, _, frac = s.rstrip("Z").partition(".")
    return datetime.fromisoformat(base).timestamp() + float("0." + (frac or "0"))

gaps = []
for path in ledgers:
    start, end, slot = {}, {}, {}
    for line in open(path):
        r = json.loads(line)
        k = (r.get("id"), r.get("attempt"))
        if r["type"] == "started":
            start[k], slot[k] = t(r["time"]), r.get("slot", 0)
        elif r["type"] == "finished":
            end[k] = t(r["time"])
    lanes = {}
    for k in start:
        if k in end:
            lanes.setdefault(slot[k], []).append((start[k], end[k]))
    for spans in lanes.values():
        spans.sort()
        gaps += [b[0] - a[1] for a, b in zip(spans, spans[1:])]
gaps.sort()
q = lambda f: gaps[min(len(gaps) - 1, int(f * len(gaps)))] * 1e3

flags = os.environ.get("NODEPACK_FLAGS", "")
print(f"{n} runs of `true` (xargs and GNU parallel: bash -c), {p} at once, {cpus} CPUs; median of {len(by['xargs'])} rounds"
      + (f"; nodepack with {flags}" if flags else ""))
print(f"{'':26} {'wall':>8} {'runs/s':>8} {'CPU/run':>9}")
labels = {"xargs": f"xargs -P {p}", "parallel": f"GNU parallel -j {p} --joblog", "goexec": "Go os/exec loop (goexec)",
          "nodepack-tmpfs": "nodepack (tmpfs)", "nodepack-bash": "nodepack (tmpfs), `true;`", "nodepack-fs": "nodepack (TMPDIR's fs)",
          "nodepack-old": "NODEPACK_OLD (tmpfs)"}
for k in ["xargs", "parallel", "goexec", "nodepack-old", "nodepack-tmpfs", "nodepack-bash", "nodepack-fs"]:
    if k in med:
        w, c = med[k]
        print(f"{labels[k]:26} {w:7.2f}s {n / w:8.0f} {c / n * 1e3:7.2f}ms")
xw, xc = med["xargs"]
for k in ["nodepack-tmpfs", "nodepack-bash", "nodepack-fs"]:
    w, c = med[k]
    line = f"{labels[k]}: {xw / w:.2f}x xargs throughput, {c / xc:.2f}x its CPU per run"
    if "parallel" in med:
        line += f", {med['parallel'][0] / w:.2f}x GNU parallel's throughput"
    print(line)
if "goexec" in med:
    gw, gc = med["goexec"]
    w, c = med["nodepack-tmpfs"]
    print(f"{labels['goexec']}: {xw / gw:.2f}x xargs throughput, {gc / xc:.2f}x its CPU per run; "
          f"nodepack (tmpfs) {gw / w:.2f}x its throughput, {c / gc:.2f}x its CPU per run")
if "nodepack-old" in med:
    ow, oc = med["nodepack-old"]
    w, c = med["nodepack-tmpfs"]
    print(f"new/old: nodepack (tmpfs) {ow / w:.2f}x NODEPACK_OLD's throughput, {c / oc:.2f}x its CPU per run")
print(f"lane refill gap (tmpfs, {len(gaps)} gaps): p50 {q(0.5):.3f} ms, p99 {q(0.99):.3f} ms, max {gaps[-1] * 1e3:.3f} ms")
EOF
