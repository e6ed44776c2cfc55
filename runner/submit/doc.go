// Package submit starts a sweep on a cluster from a login node: it writes
// the batch script of an array job whose every task runs nodepack on one
// shard of the sweep (Job.Script), hands it to the scheduler (Submit),
// keeps a record of every submission in the sweep's output directory
// (Append, Read), and asks the scheduler what became of the array's tasks
// (Queue).
//
// Slurm, Grid Engine and PBS are supported. The scripts are plain data in
// and text out, so they can be checked without a scheduler; Submit and
// Queue run the scheduler's own commands (sbatch, qsub, squeue, qstat)
// found in PATH. Nothing here logs or exits: errors say which command
// failed and what it printed.
package submit
