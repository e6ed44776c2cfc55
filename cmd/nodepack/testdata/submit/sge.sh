#!/bin/bash
# Written by nodepack submit: 3 array tasks of the shared pool of the sweep in /shared/sweeps/seeds:
# each claims runs of the whole sweep as its node frees. See it: nodepack status /shared/sweeps/seeds
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
exec /opt/nodepack/bin/nodepack run --output /shared/sweeps/seeds --pool auto --requeue --stop-before 7m30s --runs-per-gpu 2 tasks.txt
