#!/bin/bash
# Written by nodepack submit: shards 0-2 of 3 of the sweep in /shared/sweeps/out,
# one array task each. See it: nodepack status /shared/sweeps/out
# Finish what is left: nodepack resubmit /shared/sweeps/out
#SBATCH --job-name=nodepack-sweep
#SBATCH --array=0-2
#SBATCH --nodes=1
#SBATCH --exclusive
#SBATCH --time=04:00:00
#SBATCH --gres=gpu:4
#SBATCH --mem=0
#SBATCH --signal=B:USR1@450
#SBATCH --requeue
#SBATCH --open-mode=append
#SBATCH --output=/shared/sweeps/out/jobs/slurm-%A_%a.log
set -euo pipefail
cd /shared/sweeps
shard=$((SLURM_ARRAY_TASK_ID))
exec /opt/nodepack/bin/nodepack run --output /shared/sweeps/out --shard "$shard/3" --requeue --stop-before 15m0s --runs-per-gpu 2 --sweep -- python train.py lr=0.1,0.01 'name='\''a b'\'''
