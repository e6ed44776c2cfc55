# The clusterduck example's shape, as the launcher's tests run it: a Hydra
# app with a config group (model), whose job writes what it saw and
# returns a number computed from its config.
import os

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig) -> float:
    hc = HydraConfig.get()
    out = hc.runtime.output_dir
    seen = {
        "model": cfg.model.name,
        "iteration": cfg.get("iteration"),
        "num": hc.job.num,
        "cuda": os.environ.get("CUDA_VISIBLE_DEVICES", ""),
        "run_id": os.environ.get("NODEPACK_RUN_ID", ""),
    }
    with open(os.path.join(out, "seen.txt"), "w") as f:
        f.write(" ".join(f"{k}={v}" for k, v in seen.items()) + "\n")
    if cfg.get("log"):
        with open(cfg.log, "a") as f:
            f.write(f"{hc.job.num}\n")
    if cfg.get("die_if") and os.path.exists(cfg.die_if):
        os._exit(3)  # no exception, no callback: a process that dies
    if cfg.get("wait_for") and cfg.model.name == "transformer":
        while not os.path.exists(cfg.wait_for):
            import time

            time.sleep(0.05)
    if cfg.get("fail") is not None and cfg.get("fail") == cfg.get("iteration"):
        raise ValueError(f"iteration {cfg.iteration} fails on purpose")
    value = cfg.model.layers * 10 + (cfg.get("iteration") or 0) + cfg.lr
    if cfg.get("hostile_return") and cfg.get("iteration") == 1:
        # After the launcher's callback wrote the return file, as the
        # process exits, the job puts something hostile in its place: a
        # link, a FIFO, a directory, a document nested too deep, one too
        # large.
        import atexit

        def spoil(kind=cfg.hostile_return):
            path = os.path.join(out, ".nodepack-return.json")
            os.rename(path, path + ".real")
            if kind == "link":
                os.symlink(path + ".real", path)
            elif kind == "fifo":
                os.mkfifo(path)
            elif kind == "dir":
                os.mkdir(path)
            elif kind == "deep":
                with open(path, "w") as f:
                    f.write("[" * 100000 + "]" * 100000)
            elif kind == "big":
                with open(path, "w") as f:
                    f.truncate((64 << 20) + 1)

        atexit.register(spoil)
    if cfg.get("as_dict"):
        # Per-step metrics of its own, and a dict of numbers (and a name).
        with open(os.environ["NODEPACK_METRICS"], "a") as f:
            for step, loss in ((1, 0.5), (2, 0.4)):
                f.write(f'{{"step": {step}, "loss": {loss}}}\n')
        return {"score": value, "extra": {"layers": cfg.model.layers}, "name": cfg.model.name}
    return value


if __name__ == "__main__":
    main()
