#!/bin/bash
# Written by nodepack submit: shard 1 of 3 of the sweep in /shared/sweeps/out,
# one array task each. See it: nodepack status /shared/sweeps/out
# Finish what is left: nodepack resubmit /shared/sweeps/out
#PBS -N nodepack-sweep
#PBS -l select=1:ncpus=32:ngpus=4:mem=65536mb
#PBS -l walltime=04:00:00
#PBS -q gpu
#PBS -A proj1
#PBS -r y
#PBS -j oe
#PBS -o /shared/sweeps/out/jobs/
#PBS -l place=scatter
set -euo pipefail
cd /shared/sweeps
shard=$((1 + ${PBS_ARRAY_INDEX:-0}))
exec /opt/nodepack/bin/nodepack run --output /shared/sweeps/out --shard "$shard/3" --runs-per-gpu 2 --sweep -- python train.py lr=0.1,0.01 'name='\''a b'\'''
