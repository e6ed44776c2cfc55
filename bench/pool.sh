#!/usr/bin/env bash
# pool.sh: one sweep over many tasks as one shared pool (issue 55), beside
# fixed shards, measured in the same run:
#
#   1. makespan with real processes: TASKS nodepacks (default 4) of LANES
#      lanes each (default 4) run RUNS runs (default 160) of mixed lengths
#      (sleeps: 70% of 0.1-0.3 s, 25% of 0.5-1 s, 5% of 2-3 s), task k
#      starting k/(TASKS-1) x W of the ideal span after the first, for W
#      = 0, 1/4, 1/2, 3/4: once as a pool (run --pool), once as fixed
#      shards (run --shard k/TASKS, what submit --static does). Each
#      makespan (the first task's start to the last run's end, by the
#      ledgers) is printed over the one-pool list-scheduling bound of the
#      same runs and starts, with when the pool's last task exited (a task
#      with nothing left waits while others run, to take their runs over
#      should they die: one stays, the others leave);
#   2. the same in simulation at scale (16 tasks x 8 lanes, 1,000 runs:
#      go test -bench PoolMakespan ./runner/schedule);
#   3. the claims of a 1,000,000-run sweep by 64 simulated tasks through
#      one claims folder (go test -bench PoolClaims ./runner): the file
#      system's time per run (CLAIMS=0 leaves it out: go test -bench .
#      runs it too);
#   4. nodepack status of a 1,000,000-run sweep (1% failed) as one ledger
#      (a sweep on one node, as today), as the ledgers of 64 pool tasks,
#      and as those with a takeover in the claims folder (every run folded
#      across the ledgers): the median of ROUNDS (default 3) times;
#   5. on caching mounts (issue 64; scripts/sharedfs-local.sh: 4 FUSE
#      mounts of one directory, each caching for CACHE, default 60s; needs
#      root and /dev/fuse, CACHING=0 leaves it out): CACHING_RUNS (400) runs
#      of the same mix, 4 tasks x 2 lanes, each task on its own mount in a
#      mount namespace of its own, lease 3 x CACHE: the makespan on one
#      local directory and on the mounts, in the same run; the same with
#      one task killed -9 mid-sweep (runs succeeded exactly once, runs on
#      two tasks at once by their own stamps, how long the dead task's
#      runs waited); and with 5% of link and rename replies lost.
#
#   go build -o /tmp/nodepack ./cmd/nodepack && bench/pool.sh [RUNS] [TASKS] [LANES] [STATUS_RUNS] [ROUNDS]
#
# The issue's targets: makespan at most 1.05x the bound for every W (the
# static shards measured beside it); claims at most 1 ms of the file
# system's time per run; status of the pool no slower than of one ledger;
# on the caching mounts a makespan at most 1.05x one local directory's,
# every run succeeded once and none on two tasks at once.
# NODEPACK overrides the binary. Runs go to $TMPDIR (default /tmp).
set -euo pipefail

runs=${1:-160}
tasks=${2:-4}
lanes=${3:-4}
status_runs=${4:-1000000}
rounds=${5:-3}
nodepack=${NODEPACK:-/tmp/nodepack}
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT

echo "== 1. makespan, real processes: $runs runs, $tasks tasks x $lanes lanes =="
python3 - "$nodepack" "$work" "$runs" "$tasks" "$lanes" <<'EOF'
import glob, heapq, json, os, random, subprocess, sys, time
from datetime import datetime
nodepack, work, runs, tasks, lanes = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
rng = random.Random(55)
durs = []
for _ in range(runs):
    u = rng.random()
    durs.append(round(rng.uniform(0.1, 0.3) if u < 0.7 else rng.uniform(0.5, 1.0) if u < 0.95 else rng.uniform(2, 3), 2))
with open(f"{work}/tasks.txt", "w") as f:
    for d in durs:
        f.write(f"sleep {d}\n")
ideal = sum(durs) / (tasks * lanes)

def bound(starts):
    # One pool: the runs in order, each on the lane free first, lanes
    # opening as their task starts.
    free = sorted(s for s in starts for _ in range(lanes))
    heapq.heapify(free)
    end = 0.0
    for d in durs:
        t = heapq.heappop(free)
        heapq.heappush(free, t + d)
        end = max(end, t + d)
    return end

def last_end(out):
    # The last run's end, by the ledgers (this host's clock, as time.time).
    end = 0.0
    for path in glob.glob(f"{out}/ledger*.jsonl"):
        for line in open(path):
            r = json.loads(line)
            if r["type"] == "finished":
                end = max(end, datetime.fromisoformat(r["time"].replace("Z", "+00:00")).timestamp())
    return end

print(f"{'W':>5} {'bound s':>8} {'pool s':>7} {'pool/bound':>10} {'static s':>9} {'static/bound':>12} {'static/pool':>11} {'pool exit s':>11}")
for w in (0, 0.25, 0.5, 0.75):
    starts = [k / max(tasks - 1, 1) * w * ideal for k in range(tasks)]
    b = bound(starts)
    got = {}
    for mode in ("pool", "static"):
        out = f"{work}/out-{mode}-{w}"
        procs = []
        t0, wall0 = time.monotonic(), time.time()
        for k in range(tasks):
            delay = t0 + starts[k] - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            which = ["--pool", f"t{k}"] if mode == "pool" else ["--shard", f"{k}/{tasks}"]
            procs.append(subprocess.Popen([nodepack, "run", "-q", "--gpus", "none", "--cpus-per-run", "0", "--parallel", str(lanes), "--sample-interval", "0", "-o", out, *which, f"{work}/tasks.txt"],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
        for p in procs:
            _, err = p.communicate()
            if p.returncode != 0:
                sys.exit(f"{mode} W={w}: exit {p.returncode}: {err.decode()}")
        got[mode + " exit"] = time.monotonic() - t0
        got[mode] = last_end(out) - wall0
        st = json.loads(subprocess.run([nodepack, "status", "--json", out], capture_output=True, text=True).stdout)
        if st["counts"]["succeeded"] != runs:
            sys.exit(f"{mode} W={w}: {st['counts']}")
    print(f"{w:>5} {b:>8.2f} {got['pool']:>7.2f} {got['pool']/b:>10.3f} {got['static']:>9.2f} {got['static']/b:>12.3f} {got['static']/got['pool']:>11.3f} {got['pool exit']:>11.2f}")
EOF

echo
echo "== 2. makespan in simulation: 1,000 runs, 16 tasks x 8 lanes =="
(cd "$repo" && go test -run XXX -bench PoolMakespan -benchtime 1x ./runner/schedule | grep -E '^(Benchmark|ok)')

if [[ ${CLAIMS:-1} != 0 ]]; then
	echo
	echo "== 3. claims of a 1,000,000-run sweep by 64 tasks =="
	(cd "$repo" && go test -run XXX -bench PoolClaims -benchtime 1x ./runner | grep -E '^(Benchmark|ok)')
fi

echo
echo "== 4. nodepack status of $status_runs runs: one ledger, 64 pool tasks' ledgers =="
(cd "$repo" && go build -o "$work/mkledger" ./bench/mkledger)
seq "$status_runs" | sed 's/^/true /' >"$work/big.txt"
"$work/mkledger" -fail-every 100 "$work/big.txt" "$work/one" "$status_runs"
"$work/mkledger" -fail-every 100 -pool 64 "$work/big.txt" "$work/pool" "$status_runs"
"$work/mkledger" -fail-every 100 -pool 64 -takeover "$work/big.txt" "$work/taken" "$status_runs"
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
declare -A secs
for d in one pool taken; do
	for _ in $(seq "$rounds"); do
		/usr/bin/time -f '%e %M' -o "$work/time" "$nodepack" status "$work/$d" >"$work/status.out" || test $? = 1
		tail -1 "$work/time"
	done >"$work/times-$d"
	head -1 "$work/status.out"
	secs[$d]=$(cut -d' ' -f1 "$work/times-$d" | median)
	printf '%-6s status: %s s, %s MB peak (median of %d)\n' "$d" "${secs[$d]}" "$(($(cut -d' ' -f2 "$work/times-$d" | median) / 1024))" "$rounds"
done
printf 'pool / one ledger: %.2f; with a takeover: %.2f\n' "$(echo "${secs[pool]} / ${secs[one]}" | bc -l)" "$(echo "${secs[taken]} / ${secs[one]}" | bc -l)"

if [[ ${CACHING:-1} != 0 ]]; then
	echo
	cache=${CACHE:-60s}
	echo "== 5. on caching mounts: ${CACHING_RUNS:-400} runs, 4 tasks x 2 lanes, caches $cache =="
	if [[ ! -e /dev/fuse || $(id -u) != 0 ]]; then
		echo "left out: the caching mounts need /dev/fuse and root"
	else
		export SHAREDFS_LOCAL_DIR=$work/sfs
		trap '"$repo/scripts/sharedfs-local.sh" stop >/dev/null 2>&1; kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
		"$repo/scripts/sharedfs-local.sh" start 4 "$cache" >/dev/null
		python3 - "$nodepack" "$work" "${CACHING_RUNS:-400}" "$cache" "$repo/scripts/sharedfs-local.sh" <<'EOF'
import json, os, random, re, signal, subprocess, sys, time
nodepack, work, runs, cache, sfs = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
secs = float(re.match(r"([0-9.]+)s$", cache).group(1))
lease = f"{int(3 * secs)}s"
path, backing = f"{work}/sfs/sweep", f"{work}/sfs/backing"
rng = random.Random(64)
durs = []
for _ in range(runs):
    u = rng.random()
    durs.append(round(rng.uniform(0.1, 0.3) if u < 0.7 else rng.uniform(0.5, 1.0) if u < 0.95 else rng.uniform(2, 3), 2))

def tasks_file(tag):
    d = f"{work}/c-{tag}"
    os.makedirs(d)
    with open(f"{d}/tasks.txt", "w") as f:
        for i, x in enumerate(durs):
            f.write(f"""bash -c 'st() {{ echo "$NODEPACK_RUN_ID $1 $(date +%s%N)" >> {d}/STAMPS; }}; st start; (exec -a npb-$NODEPACK_RUN_ID sleep {x}); st end' # {i}\n""")
    return d

def opened(d):
    starts = {}
    for line in open(f"{d}/STAMPS"):
        rid, what, at = line.split()
        if what == "start":
            starts.setdefault(rid, []).append(int(at))
        else:
            starts[rid].pop()
    return {rid for rid, left in starts.items() if left}

def stamps(d, gone={}):
    spans, opened = {}, {}
    for line in open(f"{d}/STAMPS"):
        rid, what, at = line.split()
        if what == "start":
            opened.setdefault(rid, []).append(int(at))
        else:
            spans.setdefault(rid, []).append((opened[rid].pop(), int(at)))  # the latest start's
    for rid, left in opened.items():  # killed with their task: gone when seen gone
        for a in left:
            spans.setdefault(rid, []).append((a, gone.get(rid, time.time_ns())))
    twice = sum(1 for s in spans.values() for i in range(len(s)) for j in range(i) if s[i][0] < s[j][1] and s[j][0] < s[i][1])
    first = min(a for s in spans.values() for a, _ in s)
    last = max(b for s in spans.values() for _, b in s)
    return spans, twice, (last - first) / 1e9

def sweep(tag, out, node=None, kill=False, lose=None):
    d = tasks_file(tag)
    for k in range(1, 5):
        subprocess.run([sfs, "fault", str(k), f"lose={lose}" if lose else ""], check=True)
    procs, t0 = [], time.monotonic()
    for k in range(1, 5):
        pre = [sfs, "run", str(k)] if node else []
        procs.append(subprocess.Popen(pre + [nodepack, "run", "-q", "--gpus", "none", "--cpus-per-run", "0", "--parallel", "2", "--sample-interval", "0",
                                             "--lease", lease, "--grace", "1s", "--pool", f"t{k}", "-o", out, f"{d}/tasks.txt"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
    killed_at = None
    if kill:
        while not os.path.exists(f"{d}/STAMPS") or sum(1 for l in open(f"{d}/STAMPS") if " end " in l) < runs // 4:
            time.sleep(0.05)
        procs[1].send_signal(signal.SIGKILL)
        killed_at = time.time_ns()
        # Its runs die with it (its supervisor): when each was seen gone
        # (the others' runs open now end as they would).
        gone = {}
        for rid in opened(d):
            while subprocess.run(["pgrep", "-f", f"npb-{rid}"], capture_output=True).returncode == 0:
                time.sleep(0.01)
            gone[rid] = time.time_ns()
    for k, p in enumerate(procs):
        _, err = p.communicate()
        if p.returncode != 0 and not (kill and k == 1):
            sys.exit(f"{tag}: task {k+1}: exit {p.returncode}: {err.decode()[-2000:]}")
    spans, twice, span = stamps(d, gone if kill else {})
    wait = None
    if killed_at:
        # The runs it was running when it died: how long after its death
        # they started again on another task.
        again = [a for rid in gone if len(spans[rid]) > 1 for a, _ in spans[rid] if a > killed_at]
        wait = (min(again) - killed_at) / 1e9 if again else None
    time.sleep(secs + 1)  # the caches expire
    counts = set()
    for k in range(1, 5):
        o = out.replace(path, f"{work}/sfs/node{k}") if node else out
        st = json.loads(subprocess.run([nodepack, "status", "--json", o], capture_output=True, text=True).stdout)
        counts.add(json.dumps({k: v for k, v in st["counts"].items() if v}, sort_keys=True))
    once = len(counts) == 1 and json.loads(next(iter(counts))) == {"succeeded": runs}
    if not once:
        print(f"{tag}: status from the mounts: {sorted(counts)}")
    return span, twice, once, wait

local, _, ok_local, _ = sweep("local", f"{work}/c-local-out")
mounted, twice, ok, _ = sweep("mounts", f"{path}/mounts", node=True)
print(f"makespan: one local directory {local:.2f} s, caching mounts {mounted:.2f} s: {mounted/local:.3f}x (target <= 1.05); "
      f"succeeded once, the same from every mount: {ok_local and ok}; on two tasks at once: {twice}")
span, twice, ok, wait = sweep("kill", f"{path}/kill", node=True, kill=True)
print(f"kill -9 of one task mid-sweep (lease {lease}): every run succeeded once, the same from every mount: {ok}; on two tasks at once: {twice}; "
      f"its runs ran again {wait:.1f} s after its death (lease + a beat: {3*secs + secs/2:.1f} s); makespan {span:.1f} s")
def replies():
    lost = calls = 0
    for k in range(1, 5):
        if os.path.exists(f"{work}/sfs/control{k}.lost"):
            l, c = map(int, open(f"{work}/sfs/control{k}.lost").read().split())
            lost, calls = lost + l, calls + c
    return lost, calls

before = replies()
span, twice, ok, _ = sweep("lost", f"{path}/lost", node=True, lose=0.05)
lost, calls = (a - b for a, b in zip(replies(), before))
claims = {int(n): json.load(open(f"{backing}/lost/claims/{n}"))["to"] for n in os.listdir(f"{backing}/lost/claims") if n.isdigit()}
at, chain = 0, 0
while at in claims:
    at, chain = claims[at], chain + 1
print(f"5% of link and rename replies lost ({lost} of {calls}): every run succeeded once: {ok}; on two tasks at once: {twice}; "
      f"claims: {len(claims)}, {chain} in one chain to run {at} of {runs} (claimed twice: {len(claims) - chain}, lost: {runs - at})")
EOF
	fi
fi
