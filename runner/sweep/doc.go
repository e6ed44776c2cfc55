// Package sweep turns the shapes users write sweeps in into streams of
// runs: task files (one shell command per line), Hydra-style overrides,
// YAML grids and JSON-lines params, repeated and sharded ([Shard]). Every
// run gets an ID derived from what it executes, so IDs stay the same when
// a sweep grows, and runs from sweeps, grids and params are executed
// directly, never through a shell.
//
// A [Spec] names a source as the command line does; [Spec.Open] checks it
// and opens its files, reading a stream (standard input, a pipe) once into
// a spool so that it can be checked in full before anything starts and
// read again to run. A [Definition] is what makes a sweep the sweep it is,
// as a ledger records it.
//
// Errors are the user's input: they name the file, line and column.
package sweep
