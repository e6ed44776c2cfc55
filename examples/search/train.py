#!/usr/bin/env python3
"""A stand-in training for the search examples: its loss curve depends on
--lr and --width, one point an epoch appended to $NODEPACK_METRICS."""
import argparse
import json
import math
import os
import time

p = argparse.ArgumentParser()
p.add_argument("--lr", type=float, default=0.01)
p.add_argument("--width", type=int, default=64)
p.add_argument("--epochs", type=int, default=20)
a = p.parse_args()
final = 0.05 + (math.log10(a.lr) + 2.5) ** 2 / 10 + abs(math.log2(a.width / 128)) / 20
with open(os.environ.get("NODEPACK_METRICS", os.devnull), "a") as metrics:
    for epoch in range(1, a.epochs + 1):
        loss = final + (1 - final) * math.exp(-epoch / 4)
        print(json.dumps({"step": epoch, "loss": round(loss, 5)}), file=metrics, flush=True)
        time.sleep(0.05)
print(f"lr={a.lr} width={a.width} loss={loss:.4f}")
