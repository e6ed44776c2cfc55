#!/usr/bin/env python3
"""A small real training run for nodepack's examples and tests.

It fits y = 3x - 1 with SGD: with PyTorch when it is installed (on CPU), in
pure Python otherwise. It logs what nodepack gave it (CUDA_VISIBLE_DEVICES,
its CPU affinity, torch.get_num_threads()), and keeps nodepack's checkpoint
contract: it checkpoints after every epoch into its checkpoint folder
($NODEPACK_CHECKPOINT_DIR, the same for every attempt; --out without
nodepack), says so with a {"step": EPOCHS_DONE, "checkpoint": EPOCHS_DONE}
line in $NODEPACK_METRICS, answers the signal of --checkpoint-signal
(SIGUSR1) with its last checkpoint, and resumes from it, so a run
interrupted by scancel or a time limit loses at most the epoch under way.

    train.py [--epochs N] [--lr LR] [--seed S] [--epoch-seconds T] [--out DIR]
"""
import argparse
import json
import os
import random
import signal
import sys
import time


def parse_args(argv):
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--epoch-seconds", type=float, default=0.0,
                   help="sleep this long per epoch, to make runs long enough to interrupt")
    p.add_argument("--out", default=os.environ.get("NODEPACK_RUN_DIR", "."),
                   help="where the checkpoint and result go (default: $NODEPACK_RUN_DIR)")
    return p.parse_args(argv)


def data(seed, n=256):
    rng = random.Random(seed)
    xs = [rng.uniform(-1, 1) for _ in range(n)]
    return xs, [3 * x - 1 + rng.gauss(0, 0.01) for x in xs]


class TorchModel:
    def __init__(self, torch, seed, lr):
        self.torch = torch
        torch.manual_seed(seed)
        self.model = torch.nn.Linear(1, 1)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=lr)

    def epoch(self, xs, ys):
        t = self.torch
        x = t.tensor(xs).unsqueeze(1)
        y = t.tensor(ys).unsqueeze(1)
        loss = None
        for _ in range(20):
            self.opt.zero_grad()
            loss = t.nn.functional.mse_loss(self.model(x), y)
            loss.backward()
            self.opt.step()
        return float(loss)

    def state(self):
        return {"model": self.model.state_dict(), "opt": self.opt.state_dict()}

    def load(self, state):
        self.model.load_state_dict(state["model"])
        self.opt.load_state_dict(state["opt"])

    def save(self, path, state):
        self.torch.save(state, path)

    def read(self, path):
        return self.torch.load(path)


class PurePythonModel:
    def __init__(self, seed, lr):
        rng = random.Random(seed)
        self.w, self.b, self.lr = rng.uniform(-1, 1), 0.0, lr

    def epoch(self, xs, ys):
        n = len(xs)
        loss = 0.0
        for _ in range(20):
            gw = sum(2 * (self.w * x + self.b - y) * x for x, y in zip(xs, ys)) / n
            gb = sum(2 * (self.w * x + self.b - y) for x, y in zip(xs, ys)) / n
            self.w -= self.lr * gw
            self.b -= self.lr * gb
            loss = sum((self.w * x + self.b - y) ** 2 for x, y in zip(xs, ys)) / n
        return loss

    def state(self):
        return {"w": self.w, "b": self.b}

    def load(self, state):
        self.w, self.b = state["w"], state["b"]

    def save(self, path, state):
        with open(path, "w") as f:
            json.dump(state, f)

    def read(self, path):
        with open(path) as f:
            return json.load(f)


def main(argv):
    args = parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    try:
        import torch
        model = TorchModel(torch, args.seed, args.lr)
        backend, threads = "torch " + torch.__version__, torch.get_num_threads()
    except ImportError:
        model = PurePythonModel(args.seed, args.lr)
        backend, threads = "python", None
    print(json.dumps({
        "event": "start",
        "backend": backend,
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "affinity": sorted(os.sched_getaffinity(0)),
        "torch_threads": threads,
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "run_id": os.environ.get("NODEPACK_RUN_ID"),
        "attempt": os.environ.get("NODEPACK_ATTEMPT"),
    }), flush=True)

    checkpoint = os.path.join(os.environ.get("NODEPACK_CHECKPOINT_DIR", args.out), "checkpoint")
    metrics = os.environ.get("NODEPACK_METRICS")

    loss, done_epochs = None, 0

    def report_checkpoint(epochs):
        # The contract's line: its state after this many epochs is saved.
        if metrics and epochs > 0:
            with open(metrics, "a") as m:
                print(json.dumps({"step": epochs, "loss": loss, "checkpoint": epochs}), file=m)

    # Asked for a checkpoint before a stop: the last one is the state as of
    # the last whole epoch, saved already; what is under way is lost.
    signal.signal(signal.SIGUSR1, lambda *_: report_checkpoint(done_epochs))
    first = 0
    if os.path.exists(checkpoint):
        saved = model.read(checkpoint)
        model.load(saved["state"])
        first = saved["epoch"] + 1
        print(json.dumps({"event": "resume", "from_epoch": first}), flush=True)
    done_epochs = first

    xs, ys = data(args.seed)
    for epoch in range(first, args.epochs):
        loss = model.epoch(xs, ys)
        time.sleep(args.epoch_seconds)
        # Write then rename: a kill mid-write never leaves a torn checkpoint.
        model.save(checkpoint + ".tmp", {"epoch": epoch, "state": model.state()})
        os.replace(checkpoint + ".tmp", checkpoint)
        done_epochs = epoch + 1
        report_checkpoint(done_epochs)
        print(json.dumps({"event": "epoch", "epoch": epoch, "loss": loss}), flush=True)

    with open(os.path.join(args.out, "result.json"), "w") as f:
        json.dump({"epochs": args.epochs, "resumed_from": first, "loss": loss}, f)
    print(json.dumps({"event": "done", "resumed_from": first, "loss": loss}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
