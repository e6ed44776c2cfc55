#!/usr/bin/env python3
"""prune-real.py: the peers' side of bench/prune.sh FAMILY=real, and its table.

  prune-real.py draws DATA DRAWS SEED OUT.json
      writes DRAWS draws of 27 configurations of DATA (config_*.json), each
      drawn with random.Random(SEED + d): the same draws for every rule.
  prune-real.py peers DATA DRAWS.json OUT.jsonl
      replays each draw, 4 slots in draw order in virtual time (each epoch
      ends when the data says, no stop latency; the replay nodepack's
      TestReplayDraws does), through Optuna's pruners (Debian's
      python3-optuna) fed through trial.report/should_prune, an ASHA with a
      grace period written here (Ray Tune's AsyncHyperBand cut: below the
      rung's (1-1/3) percentile), and "train 3 epochs, keep the top 9";
      one JSON line per rule and draw.
  prune-real.py table DATA DRAWS.json RESULTS.jsonl...
      prints per rule: draws, times fewer epochs than running all, the
      draw's winner reaching its last epoch (with a 95% Wilson interval),
      a top-3 configuration reaching it, and the regret (the best final
      error that ran to the end, less the draw's best), mean and p90.
"""
import glob
import json
import math
import os
import random
import sys
import warnings

warnings.filterwarnings("ignore", message=".*experimental.*")

EPOCHS, SLOTS, PER_DRAW = 40, 4, 27


def load(data):
    runs = {}
    for f in sorted(glob.glob(os.path.join(data, "config_*.json"))):
        r = json.load(open(f))
        runs[r["config_id"]] = r
    if not runs:
        sys.exit(f"prune-real.py: no config_*.json in {data}")
    return runs


def outcome(draw, runs, finished, epochs):
    finals = sorted(runs[i]["learning_curve"][-1] for i in draw)
    best = finals[0]
    done = [runs[i]["learning_curve"][-1] for i in finished]
    return {"epochs": epochs,
            "winner": any(f <= best for f in done),
            "top3": any(f <= finals[2] for f in done),
            "regret": (min(done) - best) if done else 1.0}


def replay(draw, runs, policy):
    """4 slots, in draw order, virtual time; policy(run, epoch, value) -> stop."""
    queue, lanes, now, epochs, finished = list(draw), [None] * SLOTS, 0.0, 0, []

    def start(i):
        lanes[i] = None
        if queue:
            rid = queue.pop(0)
            lanes[i] = [rid, 0, now]
            policy.start(rid)

    for i in range(SLOTS):
        start(i)
    while any(lanes):
        i = min((k for k in range(SLOTS) if lanes[k]), key=lambda k: lanes[k][2] + runs[lanes[k][0]]["time_steps"][lanes[k][1]])
        rid, e, began = lanes[i]
        now = began + runs[rid]["time_steps"][e]
        e += 1
        lanes[i][1] = e
        epochs += 1
        stop = policy.report(rid, e, runs[rid]["learning_curve"][e - 1])
        if e == EPOCHS:
            finished.append(rid)
            policy.finish(rid, runs[rid]["learning_curve"][-1])
        if stop or e == EPOCHS:
            start(i)
    return outcome(draw, runs, finished, epochs)


class Optuna:
    def __init__(self, make):
        import optuna
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.optuna = optuna
        self.study = optuna.create_study(direction="minimize", pruner=make(optuna.pruners))
        self.trials = {}

    def start(self, rid):
        self.trials[rid] = self.study.ask()

    def report(self, rid, epoch, value):
        t = self.trials[rid]
        t.report(value, epoch)
        if epoch < EPOCHS and t.should_prune():
            self.study.tell(t, state=self.optuna.trial.TrialState.PRUNED)
            return True
        return False

    def finish(self, rid, value):
        self.study.tell(self.trials[rid], value)


class ASHA:
    """ASHA's stopping form with a grace period, as Ray Tune cuts."""

    def __init__(self, grace, rf=3):
        self.rungs = []
        r = grace
        while r < EPOCHS:
            self.rungs.append(r)
            r *= rf
        self.rf, self.recorded = rf, {r: [] for r in self.rungs}

    def start(self, rid):
        pass

    def report(self, rid, epoch, value):
        if epoch not in self.recorded:
            return False
        rec = self.recorded[epoch]
        rec.append(value)
        rec_sorted = sorted(rec)
        # lower is better: the best 1/rf go on (Ray: below the (1-1/rf) percentile of -loss)
        pos = (1 / self.rf) * (len(rec_sorted) - 1)
        lo = int(math.floor(pos))
        cut = rec_sorted[lo] + (rec_sorted[min(lo + 1, len(rec_sorted) - 1)] - rec_sorted[lo]) * (pos - lo)
        return value > cut

    def finish(self, rid, value):
        pass


def top_k(draw, runs, r=3, k=9):
    by = sorted(draw, key=lambda i: runs[i]["learning_curve"][r - 1])
    return outcome(draw, runs, by[:k], len(draw) * r + k * (EPOCHS - r))


PEERS = {
    "Optuna SuccessiveHalving min_resource=3": lambda: Optuna(lambda p: p.SuccessiveHalvingPruner(min_resource=3, reduction_factor=3)),
    "Optuna SuccessiveHalving min_resource=9": lambda: Optuna(lambda p: p.SuccessiveHalvingPruner(min_resource=9, reduction_factor=3)),
    "Optuna Hyperband min_resource=3": lambda: Optuna(lambda p: p.HyperbandPruner(min_resource=3, max_resource=EPOCHS, reduction_factor=3)),
    "Optuna Median n_warmup_steps=3": lambda: Optuna(lambda p: p.MedianPruner(n_warmup_steps=3)),
    "Optuna Patient(Median) patience=3": lambda: Optuna(lambda p: p.PatientPruner(p.MedianPruner(n_warmup_steps=3), patience=3)),
    "ASHA grace_period=3": lambda: ASHA(3),
    "ASHA grace_period=9": lambda: ASHA(9),
}


def wilson(k, n, z=1.96):
    if n == 0:
        return 0, 0
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return c - h, c + h


def main():
    cmd = sys.argv[1]
    runs = load(sys.argv[2])
    if cmd == "draws":
        n, seed = int(sys.argv[3]), int(sys.argv[4])
        ids = sorted(runs)
        draws = [random.Random(seed + d).sample(ids, PER_DRAW) for d in range(n)]
        json.dump({"draws": draws, "slots": SLOTS, "rules": sys.argv[6:]}, open(sys.argv[5], "w"))
    elif cmd == "peers":
        draws = json.load(open(sys.argv[3]))["draws"]
        with open(sys.argv[4], "w") as out:
            for name, make in PEERS.items():
                for d, draw in enumerate(draws):
                    o = replay(draw, runs, make())
                    out.write(json.dumps({"rule": name, "draw": d, **o}) + "\n")
            for d, draw in enumerate(draws):
                out.write(json.dumps({"rule": "train 3 epochs, keep the top 9", "draw": d, **top_k(draw, runs)}) + "\n")
    elif cmd == "table":
        draws = json.load(open(sys.argv[3]))["draws"]
        rows = {}
        for f in sys.argv[4:]:
            for line in open(f):
                r = json.loads(line)
                rows.setdefault(r["rule"], []).append(r)
        print(f"{len(draws)} draws of {PER_DRAW} of the {len(runs)} real CIFAR-10 curves in {sys.argv[2]}, {EPOCHS} epochs, {SLOTS} slots")
        print(f"| rule | draws | fewer epochs | winner reaches epoch {EPOCHS} (95% CI) | a top-3 reaches it | regret mean / p90 |")
        print("| --- | --- | --- | --- | --- | --- |")
        for rule, rs in rows.items():
            n = len(rs)
            full = sum(PER_DRAW * EPOCHS for _ in rs)
            ep = sum(r["epochs"] for r in rs)
            k = sum(r["winner"] for r in rs)
            t3 = sum(r["top3"] for r in rs)
            reg = sorted(r["regret"] for r in rs)
            lo, hi = wilson(k, n)
            print(f"| {rule} | {n} | {full / ep:.2f}x | {100 * k / n:.1f}% ({100 * lo:.0f}-{100 * hi:.0f}%) | {100 * t3 / n:.1f}% | "
                  f"{sum(reg) / n:.4f} / {reg[min(n - 1, int(0.9 * n))]:.4f} |")
    else:
        sys.exit(f"prune-real.py: unknown command {cmd}")


if __name__ == "__main__":
    main()
