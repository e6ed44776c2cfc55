#!/bin/sh
# A clusterduck/Hydra multirun, run by nodepack instead of Hydra's launcher:
# model × iteration = 4 runs, each given one override per swept key, as
# Hydra's basic sweeper would. Replace the python3 -c program by your
# Hydra app (python train.py). Add --dry-run to see the runs first.
set -e
exec "${NODEPACK:-nodepack}" run "$@" --sweep -- \
	python3 -c 'import sys; print(sys.argv[1:])' \
	model=convnet,transformer +iteration='range(2)' lr=0.1
