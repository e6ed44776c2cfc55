#!/usr/bin/env python3
"""A random searcher for nodepack run --search, in plain Python: proposes
N runs (default 20) of --lr and --width, and prints the best it was told.
The protocol is docs/search.md: one JSON object a line each way."""
import json
import random
import sys

n = int(sys.argv[1]) if len(sys.argv) > 1 else 20
rng = random.Random()
proposed, best = 0, None


def say(obj):
    print(json.dumps(obj), flush=True)


for line in sys.stdin:
    msg = json.loads(line)
    if msg["type"] == "hello":
        proposed = msg["earlier"] + msg["running"]  # a resumed sweep's
    elif msg["type"] == "ended" and msg["state"] == "succeeded":
        loss = (msg.get("metrics") or {}).get("loss")
        if loss is not None and (best is None or loss < best[0]):
            best = (loss, msg["params"])
    elif msg["type"] == "ask":
        if proposed >= n:
            say({"nodepack": "done"})
            continue
        proposed += 1
        say({"lr": round(10 ** rng.uniform(-4, -1), 6), "width": rng.choice([32, 64, 128, 256])})
print(f"best: {best}", file=sys.stderr)
