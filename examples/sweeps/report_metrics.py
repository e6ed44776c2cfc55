"""A stand-in for a training script that reports its metrics two ways:
lines on stdout (nodepack status --runs --metric 'loss=loss=(\\S+)' reads
the last one) and $NODEPACK_RUN_DIR/metrics.json (read as it is)."""
import argparse
import json
import os

parser = argparse.ArgumentParser()
parser.add_argument("--learning_rate", type=float, required=True)
parser.add_argument("--embed_size", type=int, required=True)
parser.add_argument("--corpus", required=True)
args = parser.parse_args()

loss = 1.0
for epoch in range(3):
    loss *= 1 - min(args.learning_rate * 5, 0.9)
    print(f"epoch {epoch} loss={loss:.4f}", flush=True)

with open(os.path.join(os.environ.get("NODEPACK_RUN_DIR", "."), "metrics.json"), "w") as f:
    json.dump({"final_loss": round(loss, 4), "params_m": args.embed_size * 0.01}, f)
