"""A stand-in for a training script that keeps nodepack's checkpoint
contract: it saves its state in $NODEPACK_CHECKPOINT_DIR every --every
steps and when nodepack asks (the signal of --checkpoint-signal, here
SIGUSR1), says so with a {"step": N, "checkpoint": N} line in
$NODEPACK_METRICS, and resumes from that folder: every attempt, retry,
requeue and resubmission of a run gets the same one. Started afresh, it
says first that it keeps checkpoints ({"checkpoint": 0}: none yet), so
that nodepack asks it for one also before its first. Its loss is
final + (1 - final)·exp(-step/tau): with a small --final and a large
--tau, a slow starter (bad at the first steps, best at the end). With
--stall-at N an attempt started afresh hangs after step N (a stuck data
loader, say: what --timeout is for), answering only the signal."""
import argparse
import json
import math
import os
import signal
import time

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=60)
parser.add_argument("--every", type=int, default=20, help="steps between checkpoints")
parser.add_argument("--step_seconds", type=float, default=0.1)
parser.add_argument("--final", type=float, default=0.0, help="the loss it tends to")
parser.add_argument("--tau", type=float, default=33.0, help="steps its loss takes to fall by e")
parser.add_argument("--stall-at", type=int, default=0, help="started afresh, hang after this step (0: never)")
args = parser.parse_args()

ckpt = os.path.join(os.environ["NODEPACK_CHECKPOINT_DIR"], "state.json")
metrics = open(os.environ["NODEPACK_METRICS"], "a")
state = {"step": 0, "loss": 1.0}
fresh = not os.path.exists(ckpt)
if fresh:
    print(json.dumps({"checkpoint": 0}), file=metrics, flush=True)  # it keeps checkpoints: none yet
else:
    state = json.load(open(ckpt))  # resume where the last checkpoint was

asked = []
signal.signal(signal.SIGUSR1, lambda *_: asked.append(True))


def save():
    with open(ckpt + ".tmp", "w") as f:
        json.dump(state, f)
    os.replace(ckpt + ".tmp", ckpt)  # a checkpoint is whole or not there
    print(json.dumps({"step": state["step"], "checkpoint": state["step"]}), file=metrics, flush=True)


while state["step"] < args.steps:
    time.sleep(args.step_seconds)
    state["step"] += 1
    state["loss"] = args.final + (1 - args.final) * math.exp(-state["step"] / args.tau)
    print(json.dumps({"step": state["step"], "loss": state["loss"]}), file=metrics, flush=True)
    if state["step"] % args.every == 0 or asked:
        asked.clear()
        save()
    if fresh and state["step"] == args.stall_at:
        while True:  # hung: it only answers the signal, until it is stopped
            time.sleep(0.02)
            if asked:
                asked.clear()
                save()
