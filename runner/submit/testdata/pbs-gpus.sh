#!/bin/bash
# Written by nodepack submit: shards 0-2 of 3 of the sweep in /shared/sweeps/out,
# one array task each. See it: nodepack status /shared/sweeps/out
# Finish what is left: nodepack resubmit /shared/sweeps/out
#PBS -N nodepack-sweep
#PBS -J 0-2
#PBS -l select=1:ngpus=4
#PBS -l place=excl
#PBS -r y
#PBS -j oe
#PBS -o /shared/sweeps/out/jobs/
set -euo pipefail
cd /shared/sweeps
shard=$((${PBS_ARRAY_INDEX:-0}))
exec /opt/nodepack/bin/nodepack run --output /shared/sweeps/out --shard "$shard/3" --runs-per-gpu 2 --sweep -- python train.py lr=0.1,0.01 'name='\''a b'\'''
