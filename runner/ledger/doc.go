// Package ledger records what ran: an append-only file of JSON lines per
// shard of a sweep, a session after another, each a header (who ran what
// sweep: its [sweep.Definition]), the started and finished records of its
// attempts, and an end record saying how it ended. [Open] locks a ledger
// for its one [Writer]; [readLedger] folds one back into a [Log] of runs and
// their states, from which a rerun resumes ([Log.Resume]); [ReadDir] reads
// an output directory's ledgers, and [ReadStatus] says where its sweep
// stands, from any host that sees the directory.
//
// A Writer guards its records: a lock that a cleanup deleting ledger files
// does not remove, a ledger written again from the open file if it is
// deleted under the sweep, and room reserved past the end so that a full
// disk is seen while the last records still fit.
package ledger
