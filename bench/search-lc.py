#!/usr/bin/python3
"""The parts of bench/search-lc.sh: search on the real CIFAR-10 learning
curves of ../shared/data/lc-cifar10 (132 configurations x 40 epochs).

  search-lc.py replay --lr L --bs B --u1 X --u2 Y --u3 Z   a run (nodepack's)
  search-lc.py tpe BUDGET SEED                             a searcher (--search)
  search-lc.py random BUDGET SEED                          a searcher (--search)
  search-lc.py collect METHOD SEED OUTPUT [HYDRA_RESULTS]   one sweep's runs, one line
  search-lc.py evaluate RESULTS PLOT BUDGET                the table and the plot

A run maps its proposal to the nearest configuration of the five
parameters (each scaled to [0, 1] over the data) that this sweep has not
run yet ($LC_STATE, under a lock), and replays that configuration's
curve, one {"step": e, "error": v} line an epoch to $NODEPACK_METRICS,
each epoch $LC_EPOCH_S seconds. The Hydra app (search-lc-hydra/app.py)
maps the same way and returns the final error. Standard library and
Debian's python3-optuna (the TPE searcher) and python3-matplotlib (the
plot) only.
"""
import fcntl
import glob
import json
import math
import os
import random
import sys
import time

DATA = os.environ.get("LC_DATA", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data", "lc-cifar10"))
KEYS = ["log10_learning_rate", "batch_size", "log2_n_units_1", "log2_n_units_2", "log2_n_units_3"]
NAMES = ["lr", "bs", "u1", "u2", "u3"]  # the runs' flags, in KEYS' order
EPOCHS = 40


def load():
    runs = []
    for f in sorted(glob.glob(os.path.join(DATA, "config_*.json"))):
        r = json.load(open(f))
        runs.append({"id": r["config_id"], "x": [float(r["config"][k]) for k in KEYS], "curve": r["learning_curve"]})
    if not runs:
        sys.exit(f"search-lc: no config_*.json in {DATA}")
    return runs


def ranges(runs):
    return [(min(r["x"][i] for r in runs), max(r["x"][i] for r in runs)) for i in range(len(KEYS))]


def take(point, run_id, state):
    """The nearest configuration to point that the sweep of state has not
    taken, taken now for run_id (one line "RUN_ID CONFIG" in state)."""
    runs = load()
    rg = ranges(runs)
    with open(state, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        taken = {line.split()[1] for line in f if len(line.split()) == 2}
        left = [r for r in runs if str(r["id"]) not in taken]
        if not left:
            sys.exit("search-lc: every configuration ran already")
        def dist(r):
            return sum(((r["x"][i] - point[i]) / (hi - lo)) ** 2 for i, (lo, hi) in enumerate(rg))
        best = min(left, key=dist)
        f.write(f"{run_id} {best['id']}\n")
        f.flush()
    return best


def replay(argv):
    vals = dict(a[2:].split("=", 1) for a in argv if a.startswith("--") and "=" in a)
    point = [float(vals[n]) for n in NAMES]
    r = take(point, os.environ.get("NODEPACK_RUN_ID", "?"), os.environ["LC_STATE"])
    epoch_s = float(os.environ.get("LC_EPOCH_S", "0.02"))
    with open(os.environ.get("NODEPACK_METRICS", os.devnull), "a") as m:
        for e, v in enumerate(r["curve"], 1):
            time.sleep(epoch_s)
            print(json.dumps({"step": e, "error": v}), file=m, flush=True)
    print(f"config {r['id']} error {r['curve'][-1]:.4f}")


def space(runs):
    import optuna
    return {n: optuna.distributions.FloatDistribution(lo, hi) for n, (lo, hi) in zip(NAMES, ranges(runs))}


def searcher(kind, budget, seed):
    """Proposes runs until the epochs of the runs told reach budget; TPE
    tells Optuna a pruned run as pruned at its step, with its last error."""
    runs = load()
    rng = random.Random(seed)
    order = rng.sample(runs, len(runs))
    if kind == "tpe":
        import optuna
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=seed))
        dists = space(runs)
    trials, spent, proposed = {}, 0, 0
    for line in sys.stdin:
        msg = json.loads(line)
        if msg["type"] == "ended":
            step = msg.get("step") or 0
            spent += step
            err = (msg.get("metrics") or {}).get("error")
            trial = trials.pop(msg.get("ask"), None)
            if kind == "tpe" and trial is not None:
                if err is not None and msg["state"] == "succeeded" and step >= EPOCHS:
                    study.tell(trial, err)
                elif err is not None and msg["state"] in ("pruned", "succeeded"):
                    trial.report(err, step)
                    study.tell(trial, state=optuna.trial.TrialState.PRUNED)
                else:
                    study.tell(trial, state=optuna.trial.TrialState.FAIL)
        elif msg["type"] == "ask":
            if spent >= budget or proposed >= len(runs):
                print(json.dumps({"nodepack": "done"}), flush=True)
                continue
            if kind == "tpe":
                trial = study.ask(dists)
                trials[msg["ask"]] = trial
                params = trial.params
            else:
                params = dict(zip(NAMES, order[proposed]["x"]))
                trials[msg["ask"]] = None
            proposed += 1
            print(json.dumps(params), flush=True)


def evaluate(results, plot, budget):
    """results: lines {"method", "seed", "runs": [[epochs, final or null], ...]}
    in the order the runs ended. Prints epochs to the best and to within
    0.005 of it per method, and plots the median best final error against
    epochs spent."""
    runs = load()
    best = min(r["curve"][-1] for r in runs)
    by = {}
    for line in open(results):
        d = json.loads(line)
        by.setdefault(d["method"], []).append(d["runs"])
    grid = list(range(0, budget + 1, 10))
    curves, rows = {}, []
    for method, seeds in by.items():
        to_best, to_near, finals, spent = [], [], [], []
        per_seed = []
        for seq in seeds:
            cum, found, tb, tn, steps = 0, math.inf, None, None, []
            for epochs, final in seq:
                if cum + epochs > budget:
                    break  # past the budget: what in-flight runs did after it is not counted
                cum += epochs
                if final is not None:
                    found = min(found, final)
                if tb is None and found <= best + 1e-12:
                    tb = cum
                if tn is None and found <= best + 0.005:
                    tn = cum
                steps.append((cum, found))
            to_best.append(tb)
            to_near.append(tn)
            finals.append(found)
            spent.append(cum)
            per_seed.append(steps)
        curves[method] = [median([at(s, g) for s in per_seed]) for g in grid]
        rows.append((method, len(seeds), to_best, to_near, finals, spent))
    print(f"best configuration's final error {best:.4f}; within 0.005: {sum(1 for r in runs if r['curve'][-1] <= best + 0.005)} of {len(runs)} configurations")
    print(f"{'method':<24} {'seeds':>5} {'reach best':>11} {'epochs (median)':>16} {'within .005':>12} {'epochs (median)':>16} {'mean epochs*':>13} {'final err (median)':>19} {'epochs spent':>13}")
    for method, n, tb, tn, finals, spent in rows:
        def censored(v):  # not reached: counted as the budget
            return sum(x if x is not None else budget for x in v) / len(v)
        print(f"{method:<24} {n:>5} {sum(x is not None for x in tb):>11} {fmt(median_reached(tb)):>16} {sum(x is not None for x in tn):>12} {fmt(median_reached(tn)):>16} {censored(tn):>13.0f} {median(finals):>19.4f} {median(spent):>13.0f}")
    print("epochs (median): the median over the seeds that reached it, and '-' when fewer than half did; mean epochs*: to within 0.005, a seed that never reached it counted at the budget")
    if plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(8, 4.5), dpi=110)
        for method, ys in curves.items():
            xs = [g for g, y in zip(grid, ys) if y is not None and y < math.inf]
            ax.plot(xs, [y - best for g, y in zip(grid, ys) if y is not None and y < math.inf], label=method)
        ax.axhline(0.005, color="gray", linestyle=":", linewidth=1)
        ax.set_yscale("symlog", linthresh=1e-3)  # 0: the best found
        ax.set_ylim(bottom=0)
        ax.set_xlabel("epochs spent (all runs, pruned ones up to their stop)")
        ax.set_ylabel("regret: best final error found − best of the 132")
        ax.set_title(f"Search on real CIFAR-10 curves (median of {min(r[1] for r in rows)} seeds, 4 lanes)")
        ax.legend()
        ax.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(plot)
        print(f"plot: {plot}")


def collect(method, seed, out, hydra_results):
    """One line of results: a nodepack sweep's runs from its ledger (the
    finished records, in the order they ended: epochs = the last step,
    final = the error when it reached the last epoch), or the Hydra
    sweep's from the results its jobs appended."""
    seq = []
    if hydra_results:
        for line in open(hydra_results):
            d = json.loads(line)
            seq.append([d["epochs"], d["final"]])
    else:
        for line in open(os.path.join(out, "ledger.jsonl")):
            rec = json.loads(line)
            if rec.get("type") != "finished" or rec.get("retry"):
                continue
            last = (rec.get("steps") or {}).get("last", 0)
            err = (rec.get("metrics") or {}).get("error")
            seq.append([last, err if last >= EPOCHS and err is not None else None])
    print(json.dumps({"method": method, "seed": seed, "runs": seq}))


def at(steps, g):
    v = math.inf
    for cum, found in steps:
        if cum > g:
            break
        v = found
    return v


def median(v):
    v = sorted(x for x in v if x is not None)
    return v[len(v) // 2] if v else None


def median_reached(v):
    """The median of the seeds' epochs, counting one that did not reach as
    infinite: None when fewer than half reached."""
    s = sorted(x if x is not None else math.inf for x in v)
    m = s[len(s) // 2]
    return None if m == math.inf else m


def fmt(v):
    return "-" if v is None else f"{v:.0f}"


if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "replay":
        replay(sys.argv[2:])
    elif cmd in ("tpe", "random"):
        searcher(cmd, int(sys.argv[2]), int(sys.argv[3]))
    elif cmd == "collect":
        collect(sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5] if len(sys.argv) > 5 else "")
    elif cmd == "evaluate":
        evaluate(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        sys.exit(__doc__)
