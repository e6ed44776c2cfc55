#!/bin/bash
# Written by nodepack submit: shards 0-2 of 3 of the sweep in /shared/sweeps/seeds,
# one array task each. See it: nodepack status /shared/sweeps/seeds
# Finish what is left: nodepack resubmit /shared/sweeps/seeds
#$ -N nodepack-seeds
#$ -t 1-3
#$ -tc 2
#$ -S /bin/bash
#$ -V
#$ -l h_rt=01:30:00
#$ -pe smp 16
#$ -binding linear:16
#$ -l gpu=2
#$ -l mem_free=65536M
#$ -notify
#$ -r y
#$ -j y
#$ -o /shared/sweeps/seeds/jobs/sge-$JOB_ID.$TASK_ID.log
set -euo pipefail
cd /home/me/sweeps
shard=$((SGE_TASK_ID - 1))
exec /opt/nodepack/bin/nodepack run --output /shared/sweeps/seeds --shard "$shard/3" --requeue --stop-before 7m30s --runs-per-gpu 2 tasks.txt
