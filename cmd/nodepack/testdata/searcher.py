#!/usr/bin/env python3
"""A searcher for the tests of nodepack run --search: searcher.py LOGDIR N
[TOKEN]. It proposes {"x": i} for N distinct i, and every fourth time the
last x again (a proposal made twice); counts its budget from hello, as
docs/search.md says a searcher should; writes every line it is told to
LOGDIR/told.K.jsonl, K its lifetime (1, 2, …), and each proposal to
LOGDIR/proposed.K.jsonl."""
import json
import os
import sys

logdir, n = sys.argv[1], int(sys.argv[2])
k = 1
while os.path.exists(os.path.join(logdir, f"told.{k}.jsonl")):
    k += 1
told = open(os.path.join(logdir, f"told.{k}.jsonl"), "a")
proposed = open(os.path.join(logdir, f"proposed.{k}.jsonl"), "a")
next_x, made, asks = 0, 0, 0
for line in sys.stdin:
    told.write(line)
    told.flush()
    msg = json.loads(line)
    if msg["type"] == "hello":
        made = msg["earlier"] + msg["running"]
    elif msg["type"] in ("ended", "running") and msg.get("params"):
        next_x = max(next_x, msg["params"]["x"] + 1)
    elif msg["type"] == "ask":
        asks += 1
        if made >= n:
            reply = {"nodepack": "done"}
        elif asks % 4 == 0 and next_x > 0:
            reply = {"x": next_x - 1}  # once more: nodepack runs it once
        else:
            reply = {"x": next_x}
            next_x += 1
            made += 1
        proposed.write(json.dumps({"ask": msg["ask"], "reply": reply}) + "\n")
        proposed.flush()
        print(json.dumps(reply), flush=True)
