#!/bin/bash
# Written by nodepack submit: 3 array tasks of the shared pool of the sweep in /shared/sweeps/seeds:
# each claims runs of the whole sweep as its node frees. See it: nodepack status /shared/sweeps/seeds
# Finish what is left: nodepack resubmit /shared/sweeps/seeds
#SBATCH --job-name=nodepack-seeds
#SBATCH --array=0-2
#SBATCH --nodes=1
#SBATCH --exclusive
#SBATCH --time=04:00:00
#SBATCH --gres=gpu:4
#SBATCH --mem=0
#SBATCH --partition=gpu
#SBATCH --signal=B:USR1@450
#SBATCH --requeue
#SBATCH --open-mode=append
#SBATCH --output=/shared/sweeps/seeds/jobs/slurm-%A_%a.log
#SBATCH --constraint=a100
set -euo pipefail
cd /home/me/sweeps
exec /opt/nodepack/bin/nodepack run --output /shared/sweeps/seeds --pool auto --requeue --stop-before 15m0s --runs-per-gpu 2 tasks.txt
