#!/usr/bin/env python3
"""An Optuna TPE searcher for nodepack run --search (docs/search.md):
N trials (default 40) of --lr and --width; pruned runs are told to
Optuna as pruned at their last step. Debian: apt install python3-optuna."""
import json
import sys

import optuna

optuna.logging.set_verbosity(optuna.logging.WARNING)
n = int(sys.argv[1]) if len(sys.argv) > 1 else 40
study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=int(sys.argv[2]) if len(sys.argv) > 2 else None))
space = {"lr": optuna.distributions.FloatDistribution(1e-4, 1e-1, log=True),
         "width": optuna.distributions.CategoricalDistribution([32, 64, 128, 256])}
trials, asked = {}, 0  # the trials asked and not told, by ask number
for line in sys.stdin:
    msg = json.loads(line)
    if msg["type"] == "hello":
        asked = msg["earlier"] + msg["running"]
    elif msg["type"] == "ended":
        loss = (msg.get("metrics") or {}).get("loss")
        state = {"succeeded": "COMPLETE", "pruned": "PRUNED"}.get(msg["state"], "FAIL")
        value = loss if state != "FAIL" and loss is not None else None
        state = state if value is not None else "FAIL"
        trial = trials.pop(msg.get("ask"), None)
        if trial is not None:
            study.tell(trial, value if state == "COMPLETE" else None, state=getattr(optuna.trial.TrialState, state))
        elif msg.get("params"):  # a run of an earlier session: what Optuna learns from it
            study.add_trial(optuna.trial.create_trial(params=msg["params"], distributions=space,
                                                      value=value if state == "COMPLETE" else None,
                                                      state=getattr(optuna.trial.TrialState, state)))
    elif msg["type"] == "ask":
        if asked >= n:
            print(json.dumps({"nodepack": "done"}), flush=True)
            continue
        asked += 1
        trial = study.ask(space)
        trials[msg["ask"]] = trial
        print(json.dumps(trial.params), flush=True)
done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
if done:
    print(f"best: {study.best_params} loss {study.best_value:.4f}", file=sys.stderr)
