// Package runner runs a sweep on this node and keeps its record, so that
// a sweep stopped for any reason — a kill -9, scancel, a time limit, a full
// disk — resumes exactly where it stopped. It is the one entry point that
// nodepack run and launchers embedding nodepack share.
//
// [Prepare] checks everything before anything starts: the source and every
// one of its runs (package sweep), the program the runs start, the output
// directory and what its ledgers hold (package ledger): a directory that
// holds another sweep — another source, command, --env, --wrap or number of
// shards — is refused, naming what changed. It chooses this invocation's
// shard of the sweep (from the batch job's array index, package
// resources/batch) and the default output directory, nodepack-NAME-KEY.
// [Sweep.Start] then locks and opens the ledger, writes the session's
// header, and executes the runs that are left on the plan's slots
// (package execute), recording every start and end; [Session.Wait] writes
// the session's end record, asks the batch system for a requeue when one
// is due, and says how the session ended ([Outcome]).
//
// The packages beneath it do one job each:
//
//   - execute runs commands on the slots of a plan: processes, CPU pinning,
//     GPUs, logs, signals, no orphans;
//   - sweep turns what users write (task files, Hydra sweeps, YAML grids,
//     JSON-lines params) into streams of runs with content-derived IDs, and
//     says what defines a sweep;
//   - ledger records what ran, one JSON-lines file per shard, and reads it
//     back: resume, status.
//
// Like them, it never logs, never exits and never installs signal
// handlers; it reads no hardware (the caller detects the node, with
// package resources, and gives the runner its plan).
package runner
