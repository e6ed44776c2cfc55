#!/usr/bin/env python3
"""prune-real.py: the peers' side of bench/prune.sh FAMILY=real, and its table.

  prune-real.py draws DATA DRAWS SEED OUT.json [RULES...]
      writes DRAWS draws of 27 configurations of DATA (config_*.json, by
      their files' numbers), each drawn with random.Random(SEED + d): the
      same draws for every rule.
  prune-real.py family slow|easy DIR SEEDS NOISE OUT.json [RULES...]
      writes a synthetic family as DIR/config_*.json (one draw per seed, in
      a shuffled order; each config carries its asymptote):
      slow, 27 configurations x 27 steps: 24 ordinary (final uniform in
      [0.3, 1], tau in [1.5, 3]) and 3 slow starters (final in [0.05, 0.2],
      tau in [8, 12]), loss final + 1.5 exp(-step/tau) + NOISE z;
      easy, 81 configurations x 81 steps: final in [0.1, 1], tau in [8, 10].
  prune-real.py peers DATA DRAWS.json OUT.jsonl
      replays each draw, 4 slots in draw order in virtual time (each step
      ends when the data says, no stop latency: the replay nodepack's
      TestReplayDraws does), through Optuna's pruners (Debian's
      python3-optuna) fed through trial.report/should_prune, an ASHA with a
      grace period written here (Ray Tune's AsyncHyperBand cut: below the
      rung's 1/3 quantile of the values recorded there, its own included),
      and "train 3 steps, keep the best third"; one JSON line per rule and
      draw: the steps run and the configurations that reached their last.
  prune-real.py transfer DATA SEED DRAWS WORK OUT.json [RULES...]
      the transfer mode (--prune-prior): splits DATA's configurations in
      two halves by random.Random(SEED), draws DRAWS draws of 27 from each
      half (random.Random(SEED * 1000 + d)), and writes, per half, the
      other half as the earlier sweeps the draws learn from, each a folder
      WORK/prior-KIND-HALF of config_*.json: the same task (whole; as the
      same rule pruned it; and that without its pruned runs), an easier
      task (every error x 0.6), a harder one (x 1.5 + 0.1), one learnt
      twice as fast (epoch e holds the value of epoch 2e, the last from
      half-way on), twice as slowly (the value of epoch e/2,
      interpolated), and the synthetic slow-starter
      family (27 steps: a prior whose last step differs).
  prune-real.py peers-transfer DATA JOB.json OUT.jsonl
      Optuna's Median (warm-up 3) and SuccessiveHalving (min_resource 3
      and 9) pruners on the transfer draws, without a prior and with each
      whole prior copied into the study first as completed trials
      (optuna.trial.create_trial with every epoch's value and the
      completed_rung_K attributes SuccessiveHalving itself writes).
  prune-real.py params DATA EPOCH_S ID...
      prints the params lines of a sweep through the binary: one run per
      configuration ID of DATA, its curve's file and the scale that makes
      the median epoch of DATA last EPOCH_S seconds (bench/prune.sh's
      replay.sh reads them).
  prune-real.py table DATA DRAWS.json RESULTS.jsonl...
      prints per rule: draws, times fewer steps than running every
      configuration to its end, the draw's winner (the best value at the
      last step) reaching its last step (with a 95% Wilson interval), a
      top-3 configuration reaching it, the configuration with the lowest
      asymptote reaching it (synthetic families), and the regret (the best
      last value that was reached, less the draw's best), mean and p90.
"""
import glob
import json
import math
import os
import random
import statistics
import sys
import warnings

warnings.filterwarnings("ignore", message=".*experimental.*")

SLOTS = 4


def load(data):
    runs = {}
    for f in sorted(glob.glob(os.path.join(data, "config_*.json"))):
        # by its file's number: two files of the real set carry the same config_id
        runs[int(os.path.basename(f)[len("config_"):-len(".json")])] = json.load(open(f))
    if not runs:
        sys.exit(f"prune-real.py: no config_*.json in {data}")
    return runs


def steps_of(runs):
    return len(next(iter(runs.values()))["learning_curve"])


def replay(draw, runs, policy):
    """SLOTS slots, in draw order, virtual time; policy.report(run, step, value) -> stop."""
    last = steps_of(runs)
    queue, lanes, now, steps, finished = list(draw), [None] * SLOTS, 0.0, 0, []

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
        steps += 1
        curve = runs[rid]["learning_curve"]
        stop = policy.report(rid, e, curve[e - 1], last)
        if e == last:
            finished.append(rid)
            policy.finish(rid, curve[-1])
        if stop or e == last:
            start(i)
    return {"epochs": steps, "finished": finished}


class Optuna:
    def __init__(self, make, last):
        import optuna
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.optuna = optuna
        # a fixed name: Hyperband picks each trial's bracket by hashing it
        self.study = optuna.create_study(study_name="nodepack-bench", direction="minimize", pruner=make(optuna.pruners, last))
        self.trials = {}

    def start(self, rid):
        self.trials[rid] = self.study.ask()

    def report(self, rid, step, value, last):
        t = self.trials[rid]
        t.report(value, step)
        if step < last and t.should_prune():
            self.study.tell(t, state=self.optuna.trial.TrialState.PRUNED)
            return True
        return False

    def finish(self, rid, value):
        self.study.tell(self.trials[rid], value)


class ASHA:
    """ASHA's stopping form with a grace period, as Ray Tune cuts."""

    def __init__(self, grace, last, rf=3):
        self.rf, self.recorded = rf, {}
        r = grace
        while r < last:
            self.recorded[r] = []
            r *= rf

    def start(self, rid):
        pass

    def report(self, rid, step, value, last):
        if step not in self.recorded:
            return False
        rec = sorted(self.recorded[step] + [value])
        self.recorded[step].append(value)
        pos = (len(rec) - 1) / self.rf  # lower is better: the best 1/rf go on
        lo = int(math.floor(pos))
        cut = rec[lo] + (rec[min(lo + 1, len(rec) - 1)] - rec[lo]) * (pos - lo)
        return value > cut

    def finish(self, rid, value):
        pass


def keep_best(draw, runs, r=3):
    """Train every configuration r steps, then the best third to the end."""
    last = steps_of(runs)
    by = sorted(draw, key=lambda i: runs[i]["learning_curve"][r - 1])
    k = max(1, len(draw) // 3)
    return {"epochs": len(draw) * r + k * (last - r), "finished": by[:k]}


PEERS = {
    "Optuna SuccessiveHalving min_resource=3": lambda n: Optuna(lambda p, n: p.SuccessiveHalvingPruner(min_resource=3, reduction_factor=3), n),
    "Optuna SuccessiveHalving min_resource=9": lambda n: Optuna(lambda p, n: p.SuccessiveHalvingPruner(min_resource=9, reduction_factor=3), n),
    "Optuna Hyperband min_resource=3": lambda n: Optuna(lambda p, n: p.HyperbandPruner(min_resource=3, max_resource=n, reduction_factor=3), n),
    "Optuna Median n_warmup_steps=3": lambda n: Optuna(lambda p, n: p.MedianPruner(n_warmup_steps=3), n),
    "Optuna Patient(Median) patience=3": lambda n: Optuna(lambda p, n: p.PatientPruner(p.MedianPruner(n_warmup_steps=3), patience=3), n),
    "ASHA grace_period=3": lambda n: ASHA(3, n),
    "ASHA grace_period=9": lambda n: ASHA(9, n),
}


def transform(curve, kind):
    """The curve as another task would have it (see transfer)."""
    n = len(curve)
    if kind == "easier":
        return [v * 0.6 for v in curve]
    if kind == "harder":
        return [v * 1.5 + 0.1 for v in curve]
    if kind == "faster":
        return [curve[min(2 * s, n) - 1] for s in range(1, n + 1)]
    if kind == "slower":
        out = []
        for s in range(1, n + 1):
            x = s / 2
            if x < 1:
                out.append(curve[0])
                continue
            lo = int(x)
            f = x - lo
            out.append(curve[lo - 1] * (1 - f) + curve[lo] * f if f and lo < n else curve[lo - 1])
        return out
    return list(curve)


# name, folder kind, whether the earlier sweep ran with the rule (pruned;
# "finished": and only its runs that reached their last step are kept)
PRIORS = [("same task", "same", False), ("same task, its sweep pruned", "same", True),
          ("same task, its sweep pruned, finished runs only", "same", "finished"),
          ("easier task (x0.6)", "easier", False), ("harder task (x1.5+0.1)", "harder", False),
          ("learnt 2x faster", "faster", False), ("learnt 2x slower", "slower", False),
          ("slow-starter family (27 steps)", "slowfamily", False)]


def transfer(data, seed, n, work, rules):
    runs = load(data)
    ids = sorted(runs)
    random.Random(seed).shuffle(ids)
    halves = [sorted(ids[0::2]), sorted(ids[1::2])]
    draws, of = [], []
    for h in (0, 1):
        for d in range(n):
            draws.append(random.Random(seed * 1000 + d).sample(halves[h], 27))
            of.append(h)
        other = halves[1 - h]
        for kind in {k for _, k, _ in PRIORS}:
            folder = os.path.join(work, f"prior-{kind}-{h}")
            os.makedirs(folder, exist_ok=True)
            if kind == "slowfamily":
                rng = random.Random(seed + h)
                for k in range(len(other)):
                    final, tau = rng.uniform(0.3, 1.0), rng.uniform(1.5, 3)
                    if k % 9 == 0:  # the slow starters: the best asymptotes
                        final, tau = rng.uniform(0.05, 0.2), rng.uniform(8, 12)
                    curve = [final + 1.5 * math.exp(-s / tau) + 0.05 * rng.gauss(0, 1) for s in range(1, 28)]
                    json.dump({"learning_curve": curve, "time_steps": [float(s) for s in range(1, 28)]},
                              open(os.path.join(folder, f"config_{k}.json"), "w"))
                continue
            for i in other:
                r = runs[i]
                json.dump({"learning_curve": transform(r["learning_curve"], kind), "time_steps": r["time_steps"]},
                          open(os.path.join(folder, f"config_{i}.json"), "w"))
    priors = [{"name": name, "dirs": [os.path.join(work, f"prior-{kind}-{h}") for h in (0, 1)], "pruned": bool(pruned), "finished": pruned == "finished"}
              for name, kind, pruned in PRIORS]
    return {"data": os.path.abspath(data), "draws": draws, "of": of, "slots": SLOTS, "rules": rules, "priors": priors}


class OptunaPrior(Optuna):
    """Optuna with an earlier sweep's curves copied in as completed trials."""

    def __init__(self, make, last, prior, rungs):
        super().__init__(make, last)
        trials = []
        for curve in prior:
            attrs = {f"completed_rung_{k}": curve[step - 1] for k, step in enumerate(rungs) if step <= len(curve)}
            trials.append(self.optuna.trial.create_trial(
                state=self.optuna.trial.TrialState.COMPLETE, value=curve[-1],
                intermediate_values={s: v for s, v in enumerate(curve, 1)}, system_attrs=attrs))
        self.study.add_trials(trials)


TRANSFER_PEERS = {
    "Optuna Median n_warmup_steps=3": (lambda p, n: p.MedianPruner(n_warmup_steps=3), []),
    "Optuna SuccessiveHalving min_resource=3": (lambda p, n: p.SuccessiveHalvingPruner(min_resource=3, reduction_factor=3), [3, 9, 27, 81]),
    "Optuna SuccessiveHalving min_resource=9": (lambda p, n: p.SuccessiveHalvingPruner(min_resource=9, reduction_factor=3), [9, 27, 81]),
}


LOADED = {}  # folder: its curves, per worker


def loaded(folder):
    if folder not in LOADED:
        LOADED[folder] = load(folder)
    return LOADED[folder]


def transfer_row(args):
    data, job, pr, name, d = args
    runs, (make, rungs) = loaded(data), TRANSFER_PEERS[name]
    draw, last = job["draws"][d], steps_of(runs)
    if pr is None:
        policy = Optuna(make, last)
    else:
        prior = [r["learning_curve"] for r in loaded(pr["dirs"][job["of"][d]]).values()]
        policy = OptunaPrior(make, last, prior, rungs)
    label = name + ("" if pr is None else " · prior " + pr["name"])
    return json.dumps({"rule": label, "draw": d, **replay(draw, runs, policy)})


def peers_transfer(data, job, out):
    import multiprocessing
    work = [(data, job, pr, name, d) for pr in [None] + [p for p in job["priors"] if not p["pruned"]]
            for name in TRANSFER_PEERS for d in range(len(job["draws"]))]
    with multiprocessing.Pool() as pool:  # Optuna is the slow part: every core
        for line in pool.imap(transfer_row, work, chunksize=8):
            out.write(line + "\n")


def wilson(k, n, z=1.96):
    if n == 0:
        return 0, 0
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return max(0.0, c - h), min(1.0, c + h)


def family(kind, out, seeds, noise):
    os.makedirs(out, exist_ok=True)
    draws = []
    for seed in range(1, seeds + 1):
        rng = random.Random(seed)
        if kind == "slow":
            n = 27
            configs = [(rng.uniform(0.3, 1.0), rng.uniform(1.5, 3)) for _ in range(24)] + \
                      [(rng.uniform(0.05, 0.2), rng.uniform(8, 12)) for _ in range(3)]
        else:
            n = 81
            configs = [(rng.uniform(0.1, 1.0), rng.uniform(8, 10)) for _ in range(81)]
        rng.shuffle(configs)
        draw = []
        for i, (final, tau) in enumerate(configs):
            cid = seed * 1000 + i
            curve = [final + 1.5 * math.exp(-s / tau) + noise * rng.gauss(0, 1) for s in range(1, n + 1)]
            json.dump({"learning_curve": curve, "time_steps": [float(s) for s in range(1, n + 1)], "asymptote": final},
                      open(os.path.join(out, f"config_{cid}.json"), "w"))
            draw.append(cid)
        draws.append(draw)
    return draws


def table(runs, draws, files):
    rows = {}
    for f in files:
        for line in open(f):
            r = json.loads(line)
            rows.setdefault(r["rule"], []).append(r)
    last = steps_of(runs)
    asym = all("asymptote" in r for r in runs.values())
    prior = any("dropped" in r for rs in rows.values() for r in rs)
    print(f"| rule | draws | fewer steps | winner reaches step {last} (95% CI) | a top-3 reaches it |" + (" lowest asymptote reaches it |" if asym else "") + " regret mean / p90 |"
          + (" prior dropped in / runs it helped stop |" if prior else ""))
    print("| --- | --- | --- | --- | --- |" + (" --- |" if asym else "") + " --- |" + (" --- |" if prior else ""))
    for rule, rs in rows.items():
        n, full, ran, won, top3, low, regret = len(rs), 0, 0, 0, 0, 0, []
        for r in rs:
            draw = draws[r["draw"]]
            final = {i: runs[i]["learning_curve"][-1] for i in draw}
            ranked = sorted(draw, key=lambda i: final[i])
            done = set(r["finished"])
            full += len(draw) * last
            ran += r["epochs"]
            won += ranked[0] in done
            top3 += any(i in done for i in ranked[:3])
            if asym:
                low += min(draw, key=lambda i: runs[i]["asymptote"]) in done
            regret.append(min((final[i] for i in done), default=1.0) - final[ranked[0]])
        regret.sort()
        lo, hi = wilson(won, n)
        print(f"| {rule} | {n} | {full / ran:.2f}x | {100 * won / n:.1f}% ({100 * lo:.0f}-{100 * hi:.0f}%) | {100 * top3 / n:.1f}% |"
              + (f" {100 * low / n:.1f}% |" if asym else "")
              + f" {sum(regret) / n:.4f} / {regret[min(n - 1, int(0.9 * n))]:.4f} |"
              + (f" {sum(r.get('dropped', False) for r in rs)} / {sum(r.get('prior_stopped', 0) for r in rs)} |" if "dropped" in rs[0]
                 else " - |" if prior else ""))


def main():
    cmd = sys.argv[1]
    if cmd == "family":
        kind, out, seeds, noise, job = sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5]), sys.argv[6]
        draws = family(kind, out, seeds, noise)
        json.dump({"data": out, "draws": draws, "slots": SLOTS, "rules": sys.argv[7:]}, open(job, "w"))
        return
    if cmd == "transfer":
        data, seed, n, work, job = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6]
        json.dump(transfer(data, seed, n, work, sys.argv[7:]), open(job, "w"))
        return
    if cmd == "params":
        data, epoch_s = sys.argv[2], float(sys.argv[3])
        files = {int(os.path.basename(f)[len("config_"):-len(".json")]): f for f in glob.glob(os.path.join(data, "config_*.json"))}
        per_epoch = []
        for f in files.values():
            t = json.load(open(f))["time_steps"]
            per_epoch += [b - a for a, b in zip([0] + t[:-1], t)]
        scale = epoch_s / statistics.median(per_epoch)
        for i in sys.argv[4:]:
            print(json.dumps({"curve": files[int(i)], "scale": scale, "nodepack": {"cpus": 0}}))
        return
    if cmd == "peers-transfer":
        with open(sys.argv[4], "w") as out:
            peers_transfer(sys.argv[2], json.load(open(sys.argv[3])), out)
        return
    runs = load(sys.argv[2])
    if cmd == "draws":
        n, seed = int(sys.argv[3]), int(sys.argv[4])
        ids = sorted(runs)
        draws = [random.Random(seed + d).sample(ids, 27) for d in range(n)]
        json.dump({"data": os.path.abspath(sys.argv[2]), "draws": draws, "slots": SLOTS, "rules": sys.argv[6:]}, open(sys.argv[5], "w"))
    elif cmd == "peers":
        draws, last = json.load(open(sys.argv[3]))["draws"], steps_of(runs)
        with open(sys.argv[4], "w") as out:
            for name, make in PEERS.items():
                for d, draw in enumerate(draws):
                    out.write(json.dumps({"rule": name, "draw": d, **replay(draw, runs, make(last))}) + "\n")
            for d, draw in enumerate(draws):
                out.write(json.dumps({"rule": "train 3 steps, keep the best third", "draw": d, **keep_best(draw, runs)}) + "\n")
    elif cmd == "table":
        table(runs, json.load(open(sys.argv[3]))["draws"], sys.argv[4:])
    else:
        sys.exit(f"prune-real.py: unknown command {cmd}")


if __name__ == "__main__":
    main()
