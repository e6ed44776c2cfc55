// Package ledger records what ran, and reads it back once: an append-only
// file of JSON lines per shard of a sweep, a session after another, each a
// [Header] (who ran what sweep: its [sweep.Definition]), the [Started],
// [Finished] and [Rung] records of its attempts, the [GPUOut] records of
// the GPUs it took out of use, and an [End] record saying how it ended.
// Each record type is a Go type of its own; their JSON is the
// nodepack.ledger/v1 format, byte for byte.
//
// [Open] locks a ledger for its one [Writer]. [ReadDir] reads an output
// directory's ledgers, each folded into a [Log]: where every run stands,
// where its last records are ([Log.Last] reads them back), and, for a
// timeline, every attempt ([ReadOptions.Attempts]). This fold is the one
// reading of a ledger: a resume ([Log.ResumeFilter]), a status, the
// results table and the report all start from it.
//
// A Writer guards its records: a lock that a cleanup deleting ledger files
// does not remove, a ledger written again from the open file if it is
// deleted under the sweep, and room reserved past the end so that a full
// disk is seen while the last records still fit.
package ledger
