// Package batch describes the batch job this process runs in — Slurm,
// Grid Engine, PBS or LSF — as plain values, and the few things nodepack
// asks of the batch system: which job and which array task and step this
// is ([Detect]), which part of a sweep an array task takes ([Job.Place]),
// where a job's output goes by default ([OutputDir]), when the job ends
// ([EndTime], [Follow]) and how to run it again ([Requeue]).
//
// Detection reads only the environment the scheduler sets. EndTime,
// Follow and Requeue run the scheduler's own commands (squeue, scontrol),
// found in PATH. The package imports only the standard library; it never
// logs and never exits.
package batch
