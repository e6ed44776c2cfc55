#!/bin/bash
# Written by nodepack submit: shards 0-1 of 2 of the sweep in /shared/sweeps/seeds,
# one array task each. See it: nodepack status /shared/sweeps/seeds
# Finish what is left: nodepack resubmit /shared/sweeps/seeds
#PBS -N nodepack-seeds
#PBS -J 0-1
#PBS -l select=1:ngpus=4
#PBS -l place=excl
#PBS -l walltime=01:30:00
#PBS -q gpu
#PBS -A proj1
#PBS -r y
#PBS -j oe
#PBS -o /shared/sweeps/seeds/jobs/
set -euo pipefail
cd /home/me/sweeps
shard=$((${PBS_ARRAY_INDEX:-0}))
exec /opt/nodepack/bin/nodepack run --output /shared/sweeps/seeds --shard "$shard/2" --runs-per-gpu 2 tasks.txt
