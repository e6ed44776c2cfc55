"""A stand-in for a training script that reports its metrics three ways:
one JSON line per step appended to $NODEPACK_METRICS (the report's learning
curves; its last loss is the run's loss), lines on stdout (nodepack status
--runs --metric 'loss=loss=(\\S+)' reads them the same way) and
$NODEPACK_RUN_DIR/metrics.json (final metrics, read as they are)."""
import argparse
import json
import os
import time

parser = argparse.ArgumentParser()
parser.add_argument("--learning_rate", type=float, required=True)
parser.add_argument("--embed_size", type=int, required=True)
parser.add_argument("--corpus", required=True)
parser.add_argument("--step_seconds", type=float, default=0, help="how long each step trains: long enough for --prune to read")
args = parser.parse_args()

loss = 1.0
for epoch in range(1, 11):
    time.sleep(args.step_seconds)
    loss *= 1 - min(args.learning_rate * 5, 0.9) / epoch
    print(f"epoch {epoch} loss={loss:.4f}", flush=True)
    # The one line a training script needs for per-step metrics:
    step = epoch
    print(json.dumps({"step": step, "loss": loss}), file=open(os.environ["NODEPACK_METRICS"], "a"))

with open(os.path.join(os.environ.get("NODEPACK_RUN_DIR", "."), "metrics.json"), "w") as f:
    json.dump({"final_loss": round(loss, 4), "params_m": args.embed_size * 0.01}, f)
