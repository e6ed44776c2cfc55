# A minimal sweeper for the launcher's tests: it picks its next parameters
# from the values the jobs return, as Optuna's or Ax's sweeper would, in
# two rounds: lr in start, then the best lr times 0.5 and 2. It writes
# every job's overrides and returned value, in the order the launcher
# returned them, to picks.json in the sweep directory.
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, List, Optional

from hydra.core.config_store import ConfigStore
from hydra.core.plugins import Plugins
from hydra.plugins.sweeper import Sweeper


@dataclass
class PickSweeperConf:
    _target_: str = "hydra_plugins.pick_sweeper.pick_sweeper.PickSweeper"
    start: List[float] = field(default_factory=lambda: [0.1, 0.3, 0.9])


ConfigStore.instance().store(group="hydra/sweeper", name="pick", node=PickSweeperConf)


class PickSweeper(Sweeper):
    def __init__(self, start: List[float]) -> None:
        self.start = list(start)
        self.config: Optional[Any] = None
        self.launcher: Optional[Any] = None

    def setup(self, *, hydra_context, task_function, config) -> None:
        self.config = config
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config
        )

    def sweep(self, arguments: List[str]) -> Any:
        picks = []
        idx = 0
        lrs = self.start
        best = None
        for _ in range(2):
            batch = [[*arguments, f"lr={lr}"] for lr in lrs]
            results = self.launcher.launch(batch, initial_job_idx=idx)
            idx += len(batch)
            for overrides, r in zip(batch, results):
                picks.append({"overrides": list(r.overrides), "asked": overrides, "value": r.return_value})
                if best is None or r.return_value > best[1]:
                    best = (float(overrides[-1].split("=")[1]), r.return_value)
            lrs = [best[0] * 0.5, best[0] * 2]
        out = Path(str(self.config.hydra.sweep.dir)) / "picks.json"
        out.write_text(json.dumps({"picks": picks, "best": best}))
        return picks
