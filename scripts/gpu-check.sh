#!/usr/bin/env bash
# gpu-check.sh: check nodepack's GPU promises on a real GPU node.
#
#   scripts/gpu-check.sh [NODEPACK]     (default: nodepack on PATH)
#
# Run it inside your allocation (an exclusive node, or sbatch/qsub) on a
# machine with an NVIDIA driver, nvidia-smi and a python3 with PyTorch. It
# only reads the GPUs' settings (never changes them), allocates at most
# 12 GiB of GPU memory per run plus one allocation that is meant to fail, and
# prints PASS/FAIL lines and "N passed, N failed"; exit 0 when nothing
# failed; exit 2, with one line, where it cannot run (no nvidia-smi, no GPU,
# no PyTorch that sees one). What it checks:
#   - detect --json against nvidia-smi and sysfs: NUMA node, MIG mode,
#     the GPU's local CPUs;
#   - two runs sharing one GPU by gpu_mem: the second starts only after the
#     first has allocated and settled, both run at once, and the ledger
#     records each one's own GPU memory (2 GiB and 6 GiB allocated);
#   - gpu_mem=auto: the first run measured alone, the others ask for its
#     peak plus 10% (at least 512 MiB), matching what nvidia-smi saw;
#   - each shared run has its share of the GPU's energy counter;
#   - a run sharing a GPU by gpu_mem that allocates past it and the
#     GPU's headroom is stopped (12 GiB allocated), and fails gpu-mem;
#   - with --mps on (where nvidia-cuda-mps-control is), runs share the GPU
#     through nodepack's own daemon, each run's memory is still measured,
#     a run past its gpu_mem fails cuda-oom at the driver's cap, and no
#     MPS process is left;
#   - --runs-per-gpu auto on small real trainings: one run per GPU at first,
#     then more while the measured steps per second say it pays, each run's
#     memory measured (gpu_mem=auto), every run succeeding;
#   - a real CUDA out-of-memory error is classified cuda-oom from the run's
#     stderr and its retry asks for half as much gpu_mem again;
#   - up to eight CPU-only runs at once (one per CPU or fewer) get disjoint whole cores and thread caps.
# Each check's files stay in $OUT (default a new directory under /tmp).
set -u
NP=${1:-${NP:-nodepack}}
PY=${PYTHON:-python3}
for need in nvidia-smi "$PY" "$NP"; do
	command -v "$need" >/dev/null || { echo "gpu-check.sh: needs $need (run it on a GPU node, with nodepack on PATH or as its argument)" >&2; exit 2; }
done
nvidia-smi -L >/dev/null 2>&1 || { echo "gpu-check.sh: nvidia-smi finds no GPU here" >&2; exit 2; }
"$PY" -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null || { echo "gpu-check.sh: $PY has no PyTorch that sees a GPU" >&2; exit 2; }
OUT=${OUT:-$(mktemp -d /tmp/nodepack-gpu-check.XXXXXX)}
mkdir -p "$OUT"
pass=0
fail=0
ok() { echo "PASS: $*"; pass=$((pass + 1)); }
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }
check() { # check NAME -- python checker reading $OUT (sys.argv[1]); exit 0 = pass
	local name=$1
	shift
	if "$PY" - "$OUT" "$@"; then ok "$name"; else bad "$name"; fi
}
echo "output: $OUT"

echo "== detect: NUMA node, MIG mode and local CPUs as nvidia-smi and sysfs say"
nvidia-smi --query-gpu=index,uuid,pci.bus_id,mig.mode.current --format=csv,noheader >"$OUT/smi.csv"
cat "$OUT/smi.csv"
"$NP" detect --json >"$OUT/detect.json" 2>"$OUT/detect.err" || bad "detect --json: $(head -1 "$OUT/detect.err")"
check "detect's NUMA node, MIG mode and GPU-local CPUs match sysfs and nvidia-smi" <<'PY'
import csv, json, os, sys
out = sys.argv[1]
smi = [[c.strip() for c in r] for r in csv.reader(open(out + "/smi.csv"))]
d = json.load(open(out + "/detect.json"))
allowed = set(os.sched_getaffinity(0))
def cpulist(s):
    cpus = set()
    for part in s.strip().split(","):
        if part:
            a, _, b = part.partition("-")
            cpus.update(range(int(a), int(b or a) + 1))
    return cpus
good = len(smi) == len(d["gpus"])
for r, g in zip(smi, d["gpus"]):
    bus = r[2].lower()[-12:]  # 0000:xx:yy.z
    sysdir = "/sys/bus/pci/devices/" + bus
    numa = int(open(sysdir + "/numa_node").read()) if os.path.exists(sysdir + "/numa_node") else -1
    local = cpulist(open(sysdir + "/local_cpulist").read()) & allowed if os.path.exists(sysdir + "/local_cpulist") else set()
    if numa < 0:  # no affinity in sysfs: the node of its local CPUs, when they are on one
        nodes = {int(f[4:]): cpulist(open(f"/sys/devices/system/node/{f}/cpulist").read())
                 for f in (os.listdir("/sys/devices/system/node") if os.path.isdir("/sys/devices/system/node") else [])
                 if f.startswith("node") and f[4:].isdigit()}
        on = {k for k, cs in nodes.items() if cs & (local or allowed)}
        numa = on.pop() if len(on) == 1 else -1
    mig = r[3] == "Enabled"
    print(f"  GPU {r[0]}: sysfs numa {numa}, local CPUs {len(local)}, MIG {r[3]} -> nodepack numa {g['numa']}, cpus {len(g['cpus'])}, mig {g.get('mig_enabled', False)}")
    good &= g["numa"] == (numa if numa >= 0 else -1)
    good &= bool(g.get("mig_enabled", False)) == mig
    if local:
        good &= set(g["cpus"]) == local
sys.exit(0 if good else 1)
PY

cat >"$OUT/alloc.py" <<'PY'
# alloc.py GIB HOLD_S [MARK]: allocate GIB GiB on the GPU, write a mark file
# with the time it was done, hold it HOLD_S seconds.
import sys, time, torch
gib, hold = float(sys.argv[1]), float(sys.argv[2])
x = torch.empty(int(gib * 2**30), dtype=torch.uint8, device="cuda")
x.fill_(1)
torch.cuda.synchronize()
if len(sys.argv) > 3:
    open(sys.argv[3], "w").write(repr(time.time()))
print("allocated", gib, "GiB", flush=True)
time.sleep(hold)
PY

echo "== two runs share a GPU by gpu_mem; the second waits until the first has settled"
{
	echo "#nodepack gpu_mem=10GiB"
	echo "python3 $OUT/alloc.py 2 8 $OUT/first.done"
	echo "python3 $OUT/alloc.py 6 3 $OUT/second.done"
} >"$OUT/share.txt"
if "$NP" run -q --gpus 0 --sample-interval 250ms -o "$OUT/share" "$OUT/share.txt" >"$OUT/share.log" 2>&1; then ok "shared run exits 0"; else bad "shared run: $(tail -2 "$OUT/share.log")"; fi
check "the second run started after the first allocated, while it ran, on the same GPU; each one's own GPU memory is in the ledger" <<'PY'
import json, sys
from datetime import datetime
out = sys.argv[1]
recs = [json.loads(l) for l in open(out + "/share/ledger.jsonl") if l.strip()]
ts = lambda s: datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()
st = {r.get("index", 0): r for r in recs if r["type"] == "started"}
fin = {r.get("index", 0): r for r in recs if r["type"] == "finished"}
first_done = float(open(out + "/first.done").read())
a, b = sorted(st)
gap = ts(st[b]["time"]) - first_done
ran_together = ts(st[b]["time"]) < ts(fin[a]["time"])
print(f"  second started {gap:.2f} s after the first allocated; before the first ended: {ran_together}; GPUs {st[a]['gpus']} {st[b]['gpus']}")
good = gap >= 0.5 and ran_together and st[a]["gpus"] == st[b]["gpus"]
for i, want in ((a, 2), (b, 6)):
    u = (fin[i].get("gpu_usage") or [{}])[0]
    own = u.get("process_peak_memory_bytes", 0) / 2**30
    print(f"  run {i}: allocated {want} GiB, ledger process peak {own:.2f} GiB, device peak {u.get('peak_memory_bytes', 0) / 2**30:.2f} GiB")
    good &= want <= own <= want + 1.5  # the CUDA context adds about 0.5 GiB
sys.exit(0 if good else 1)
PY

check "each shared run has its share of the GPU's energy, at a power a GPU draws" <<'PY'
import json, sys
out = sys.argv[1]
fin = [json.loads(l) for l in open(out + "/share/ledger.jsonl") if '"finished"' in l]
good = len(fin) == 2
for r in fin:
    j = sum(u.get("energy_j", 0) for u in r.get("gpu_usage") or [])
    watts = j / max(r.get("duration_s", 0), 1e-3)
    print(f"  run {r.get('index', 0)}: {j:.1f} J in {r.get('duration_s', 0):.1f} s, {watts:.0f} W")
    good &= j > 0 and 5 <= watts <= 1500
sys.exit(0 if good else 1)
PY

echo "== a run sharing a GPU by gpu_mem that allocates past it and the headroom: stopped, gpu-mem"
{
	echo "#nodepack gpu_mem=1GiB"
	echo "python3 $OUT/alloc.py 12 60"
} >"$OUT/greedy.txt"
"$NP" run -q --gpus 0 --sample-interval 250ms --timeout 50s -o "$OUT/greedy" "$OUT/greedy.txt" >"$OUT/greedy.log" 2>&1
echo "  exit $? (1 expected: the run is stopped)"
check "the run was stopped for its GPU memory (gpu-mem), well before its 60 s, with a line saying so" <<'PY'
import json, sys
out = sys.argv[1]
recs = [json.loads(l) for l in open(out + "/greedy/ledger.jsonl") if l.strip()]
fin = [r for r in recs if r["type"] == "finished"]
logs = [r["stderr"] for r in recs if r["type"] == "started" and r.get("stderr")]
print("  classes:", [r.get("class") for r in fin], "durations:", [r.get("duration_s") for r in fin])
err = open(out + "/greedy/" + logs[0]).read() if logs else ""
good = len(fin) == 1 and fin[0].get("class") == "gpu-mem" and fin[0].get("duration_s", 99) < 40
good &= "of GPU memory, over the gpu_mem=1GiB it asked for" in err
sys.exit(0 if good else 1)
PY

echo "== --mps on: runs share a GPU through nodepack's own MPS daemon; one past its gpu_mem fails cuda-oom (the driver's cap)"
if command -v nvidia-cuda-mps-control >/dev/null; then
	before=$(pgrep -c -f nvidia-cuda-mps || true)
	{
		echo "#nodepack gpu_mem=4GiB"
		echo "python3 $OUT/alloc.py 2 5"
		echo "python3 $OUT/alloc.py 6 5"
	} >"$OUT/mps.txt"
	"$NP" run -q --gpus 0 --mps on --sample-interval 250ms -o "$OUT/mps" "$OUT/mps.txt" >"$OUT/mps.log" 2>&1
	echo "  exit $? (1 expected: the second run fails); MPS processes before $before, after $(pgrep -c -f nvidia-cuda-mps || true)"
	check "under MPS the 2 GiB run succeeds with its own memory measured, the 6 GiB one fails cuda-oom at its 4 GiB cap, and no MPS process is left" "$before" <<'PY'
import json, subprocess, sys
out, before = sys.argv[1], int(sys.argv[2] or 0)
recs = [json.loads(l) for l in open(out + "/mps/ledger.jsonl") if l.strip()]
fin = {r.get("index", 0): r for r in recs if r["type"] == "finished"}
print("  classes:", {i: r.get("class") for i, r in fin.items()}, "own peaks GiB:",
      {i: round(((r.get("gpu_usage") or [{}])[0].get("process_peak_memory_bytes", 0)) / 2**30, 2) for i, r in fin.items()})
left = int(subprocess.run(["pgrep", "-c", "-f", "nvidia-cuda-mps"], capture_output=True, text=True).stdout or 0)
own = ((fin.get(0, {}).get("gpu_usage") or [{}])[0].get("process_peak_memory_bytes", 0)) / 2**30
good = fin.get(0, {}).get("reason") == "ok" and 2 <= own <= 3.5 and fin.get(1, {}).get("class") == "cuda-oom" and left <= before
sys.exit(0 if good else 1)
PY
else
	echo "  skipped: no nvidia-cuda-mps-control here"
fi

echo "== gpu_mem=auto learns from the first run; nvidia-smi watched alongside"
{
	echo "#nodepack gpu_mem=auto"
	for s in 1 2 3; do echo "python3 $OUT/alloc.py 3 3 # seed $s"; done
} >"$OUT/auto.txt"
(while :; do nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits 2>/dev/null; sleep 0.2; done) >"$OUT/smi-apps.csv" &
watch=$!
if "$NP" run -q --gpus 0 --sample-interval 250ms -o "$OUT/auto" "$OUT/auto.txt" >"$OUT/auto.log" 2>&1; then ok "auto run exits 0"; else bad "auto run: $(tail -2 "$OUT/auto.log")"; fi
kill "$watch" 2>/dev/null
wait "$watch" 2>/dev/null
check "gpu_mem=auto: runs 2 and 3 ask for the first's peak +10% (at least 512 MiB), within 10% + margin of nvidia-smi's" <<'PY'
import json, re, sys
out = sys.argv[1]
recs = [json.loads(l) for l in open(out + "/auto/ledger.jsonl") if l.strip()]
st = sorted((r for r in recs if r["type"] == "started"), key=lambda r: r.get("index", 0))
fin = {r.get("index", 0): r for r in recs if r["type"] == "finished"}
smi = [int(l.split(",")[1]) for l in open(out + "/smi-apps.csv") if l.count(",") == 1 and l.split(",")[1].strip().isdigit()]
smi_peak = max(smi, default=0) * 2**20
peak = (fin[st[0].get("index", 0)].get("gpu_usage") or [{}])[0].get("process_peak_memory_bytes", 0)
units = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}
def asked(r):
    m = re.search(r"gpu_mem=([0-9.]+)([KMGT]iB|B)", r.get("request", ""))
    return float(m.group(1)) * units[m.group(2)] if m else 0
print("  requests:", [r.get("request") for r in st])
print(f"  first run's peak {peak / 2**30:.2f} GiB, nvidia-smi's largest per-process use {smi_peak / 2**30:.2f} GiB")
want = peak + max(peak * 0.10, 512 * 2**20)
good = peak > 3 * 2**30 and abs(peak - smi_peak) <= 0.10 * smi_peak + 256 * 2**20
for r in st[1:]:
    good &= abs(asked(r) - want) <= 0.02 * want + 2**20
sys.exit(0 if good else 1)
PY

echo "== --runs-per-gpu auto on small real trainings: the density measured, every run succeeding"
cat >"$OUT/mlp.py" <<'PY'
# mlp.py STEPS: a small training on the GPU, its step every 50 steps to
# $NODEPACK_METRICS.
import json, os, sys, torch
steps = int(sys.argv[1])
net = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10)).cuda()
opt = torch.optim.SGD(net.parameters(), lr=0.01)
x, y = torch.randn(128, 512, device="cuda"), torch.randint(0, 10, (128,), device="cuda")
with open(os.environ["NODEPACK_METRICS"], "a") as out:
    for step in range(1, steps + 1):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        if step % 50 == 0:
            out.write(json.dumps({"step": step, "loss": loss.item()}) + "\n")
            out.flush()
PY
for i in $(seq 12); do echo "python3 $OUT/mlp.py 6000 # $i"; done >"$OUT/auto.txt"
if "$NP" run -q --gpus 0 --runs-per-gpu auto --density-window 2s --sample-interval 500ms -o "$OUT/auto" "$OUT/auto.txt" >"$OUT/auto.log" 2>&1; then ok "auto runs exit 0"; else bad "auto runs: $(tail -2 "$OUT/auto.log")"; fi
check "auto: decisions recorded, the first from 1 to 2 runs per GPU, every run succeeded, its memory measured" <<'PY'
import json, sys
out = sys.argv[1]
recs = [json.loads(l) for l in open(out + "/auto/ledger.jsonl") if l.strip()]
dens = [r for r in recs if r["type"] == "density"]
fin = [r for r in recs if r["type"] == "finished"]
reqs = {r.get("request") for r in recs if r["type"] == "started"}
for d in dens:
    print(f"  {d['from']} -> {d['to']}{' (final)' if d.get('final') else ''}: {d.get('why')}")
print("  requests:", sorted(reqs))
good = bool(dens) and dens[0]["from"] == 1 and dens[0]["to"] == 2
good &= len(fin) == 12 and all(r.get("reason") == "ok" for r in fin)
good &= any("gpu_mem=" in (q or "") for q in reqs)
sys.exit(0 if good else 1)
PY

echo "== a real CUDA out-of-memory error: classified cuda-oom, retried with more gpu_mem"
{
	echo "#nodepack gpu_mem=2GiB"
	echo "python3 -c 'import torch; torch.empty(4096 * 2**30, dtype=torch.uint8, device=\"cuda\")'"
} >"$OUT/oom.txt"
"$NP" run -q --gpus 0 --retry cuda-oom=1 --retry-backoff 0 -o "$OUT/oom" "$OUT/oom.txt" >"$OUT/oom.log" 2>&1
echo "  exit $? (1 expected: the run fails twice)"
check "both attempts are cuda-oom and the retry asked for gpu_mem 3GiB" <<'PY'
import json, sys
out = sys.argv[1]
recs = [json.loads(l) for l in open(out + "/oom/ledger.jsonl") if l.strip()]
st = [r for r in recs if r["type"] == "started"]
fin = [r for r in recs if r["type"] == "finished"]
print("  requests:", [r.get("request") for r in st], "classes:", [r.get("class") for r in fin])
print("  stderr tail:", (fin[0].get("stderr_tail") or [""])[-1][:160] if fin else None)
good = len(fin) == 2 and all(r.get("class") == "cuda-oom" for r in fin)
good &= len(st) == 2 and "gpu_mem=3GiB" in st[1].get("request", "")
sys.exit(0 if good else 1)
PY

echo "== up to eight CPU-only runs at once: disjoint whole cores, thread caps"
n=$(nproc)
if [ "$n" -gt 8 ]; then n=8; fi
cpr=$(($(nproc) / n))
cat >"$OUT/pin.py" <<'PY'
# pin.py DIR N: write this run's CPUs and OMP_NUM_THREADS, then wait (at
# most 30 s) until N runs have written theirs: all of them ran at once.
import os, sys, time
d, n = sys.argv[1], int(sys.argv[2])
cpus = " ".join(map(str, sorted(os.sched_getaffinity(0))))
open(os.path.join(d, os.environ["NODEPACK_RUN_ID"]), "w").write(cpus + " | " + str(os.environ.get("OMP_NUM_THREADS")))
end = time.time() + 30
while len(os.listdir(d)) < n and time.time() < end:
    time.sleep(0.05)
sys.exit(0 if len(os.listdir(d)) >= n else 1)
PY
mkdir -p "$OUT/pin.seen"
for i in $(seq $n); do echo "python3 $OUT/pin.py $OUT/pin.seen $n # $i"; done >"$OUT/pin.txt"
if "$NP" run -q --gpus none --cpus-per-run "$cpr" -j $n -o "$OUT/pin" "$OUT/pin.txt" >"$OUT/pin.log" 2>&1; then ok "pinned runs exit 0"; else bad "pinned runs: $(tail -2 "$OUT/pin.log")"; fi
check "each run had $cpr CPUs of its own, whole cores, OMP_NUM_THREADS=$cpr, all $n at once" "$n" "$cpr" <<'PY'
import os, sys
out, n, cpr = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
seen = [open(os.path.join(out, "pin.seen", f)).read().split(" | ") for f in os.listdir(out + "/pin.seen")]
sets = [set(map(int, s.split())) for s, _ in seen]
def siblings(c):
    p = f"/sys/devices/system/cpu/cpu{c}/topology/thread_siblings_list"
    return open(p).read().strip() if os.path.exists(p) else str(c)
good = len(seen) == n
allcpus = set()
for (s, omp), cpus in zip(seen, sets):
    print(f"  cpus {sorted(cpus)} (cores {sorted(set(siblings(c) for c in cpus))}), OMP_NUM_THREADS {omp}")
    good &= len(cpus) == cpr and omp == str(cpr) and not (allcpus & cpus)
    allcpus |= cpus
cores = {}
for c in allcpus:
    cores.setdefault(siblings(c), set()).add(c)
# whole cores: no core is split between two runs
for sib, cs in cores.items():
    owners = {i for i, cpus in enumerate(sets) if cpus & cs}
    good &= len(owners) == 1
sys.exit(0 if good else 1)
PY

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
