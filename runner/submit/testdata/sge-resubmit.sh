#!/bin/bash
# Written by nodepack submit: shards 1-2 of 3 of the sweep in /shared/sweeps/out,
# one array task each. See it: nodepack status /shared/sweeps/out
# Finish what is left: nodepack resubmit /shared/sweeps/out
#$ -N nodepack-sweep
#$ -t 1-2
#$ -tc 1
#$ -S /bin/bash
#$ -V
#$ -l h_rt=04:00:00
#$ -pe smp 32
#$ -binding linear:32
#$ -l gpu=4
#$ -l mem_free=65536M
#$ -q gpu
#$ -A proj1
#$ -notify
#$ -r y
#$ -j y
#$ -o /shared/sweeps/out/jobs/sge-$JOB_ID.$TASK_ID.log
#$ -l scratch=1
set -euo pipefail
cd /shared/sweeps
shard=$((1 + SGE_TASK_ID - 1))
exec /opt/nodepack/bin/nodepack run --output /shared/sweeps/out --shard "$shard/3" --requeue --stop-before 15m0s --runs-per-gpu 2 --sweep -- python train.py lr=0.1,0.01 'name='\''a b'\'''
