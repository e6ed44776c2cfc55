"""A stand-in for your training script, for the sweep lines of the README
and docs/running.md: it takes Hydra's overrides (model=convnet,
+iteration=1), the flags a grid or a params file appends (--batchsize=100,
--learning_rate=0.1) and any other argument, prints them, and reports a
few steps of a loss that depends on them to $NODEPACK_METRICS."""
import hashlib
import json
import os
import sys

args = sys.argv[1:]
print("train.py", " ".join(args), flush=True)
# A loss of its own for each set of arguments, falling over three steps.
loss = 0.1 + int(hashlib.sha256(" ".join(args).encode()).hexdigest()[:8], 16) / 2**32
metrics = os.environ.get("NODEPACK_METRICS")
for step in range(1, 4):
    if metrics:
        print(json.dumps({"step": step, "loss": round(loss * (1 + 1 / step), 4)}), file=open(metrics, "a"))
