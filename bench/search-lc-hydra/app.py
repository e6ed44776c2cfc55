#!/usr/bin/python3
"""The Hydra app of bench/search-lc.sh: maps its parameters to the nearest
configuration its sweep has not run ($LC_STATE) and returns that
configuration's final error, appending {"epochs": 40, "final": E} to
$LC_STATE.results as it ends."""
import fcntl
import importlib.util
import json
import os

import hydra
from omegaconf import DictConfig

spec = importlib.util.spec_from_file_location("search_lc", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "search-lc.py"))
lc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(lc)


@hydra.main(version_base=None, config_path="conf", config_name="config")
def app(cfg: DictConfig) -> float:
    state = os.environ["LC_STATE"]
    r = lc.take([float(cfg[n]) for n in lc.NAMES], os.environ.get("NODEPACK_RUN_ID", "?"), state)
    final = r["curve"][-1]
    with open(state + ".results", "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.write(json.dumps({"epochs": lc.EPOCHS, "final": final, "config": r["id"]}) + "\n")
    return final


if __name__ == "__main__":
    app()
