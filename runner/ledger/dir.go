package ledger

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"sync/atomic"

	"github.com/nodepack/nodepack/runner/sweep"
)

// Dir is what an output directory's ledgers hold: one Log per shard
// ledger file, read without locking anything, as a rerun reads them before
// it decides what to resume.
type Dir struct {
	Path string
	Logs map[string]*Log // by file name

	seen atomic.Int64 // runs See found
}

// ReadDir reads every ledger in dir. A directory that does not exist yet
// holds none; a ledger with a bad line is an error naming it. Its Logs keep
// the records of the runs that did not succeed only (see Run).
func ReadDir(dir string) (*Dir, error) {
	d := &Dir{Path: dir, Logs: map[string]*Log{}}
	files, err := Files(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return d, nil
	}
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		log, err := readLean(f)
		if err != nil {
			return nil, err
		}
		d.Logs[filepath.Base(f)] = log
	}
	return d, nil
}

// Known returns how many runs the ledgers have a record of (a run that
// two ledgers know counts twice).
func (d *Dir) Known() int {
	n := 0
	for _, log := range d.Logs {
		n += len(log.Runs)
	}
	return n
}

// See notes that run id is at index in the sweep, for Retired, and reports
// whether a ledger knows the run. The walk of the sweep's runs calls it
// for every run; it keeps nothing for a run no ledger knows. It may be
// called concurrently for different runs.
func (d *Dir) See(id string, index int) bool {
	known := false
	for _, log := range d.Logs {
		if run := log.Runs[id]; run != nil {
			if !run.seen {
				d.seen.Add(1)
				log.seen.Add(1)
			}
			run.seen, run.index, known = true, index, true
		}
	}
	return known
}

// Seen returns how many of the runs the ledgers know See was told of
// (counted as Known counts).
func (d *Dir) Seen() int { return int(d.seen.Load()) }

// Log returns the log of one ledger file; an empty one if there is none.
func (d *Dir) Log(file string) *Log {
	if log := d.Logs[file]; log != nil {
		return log
	}
	return &Log{Runs: map[string]*Run{}}
}

// Changes checks that the directory's ledgers hold the sweep def, so that
// what they say done was done with this definition. It returns, one phrase
// each, what changed (see sweep.Definition.Changes); nil when the sweep
// may resume.
func (d *Dir) Changes(def sweep.Definition) []string {
	files := make([]string, 0, len(d.Logs))
	for f := range d.Logs {
		files = append(files, f)
	}
	slices.Sort(files)
	for _, file := range files {
		log := d.Logs[file]
		if len(log.Sessions) == 0 {
			continue
		}
		h := log.Header()
		if h.Sweep != nil {
			if changes := def.Changes(*h.Sweep); len(changes) > 0 {
				return changes
			}
			continue
		}
		// A ledger from before definitions were recorded: at least the
		// shards must agree.
		if count := shardCount(h); count != max(def.Shards, 1) {
			return []string{fmt.Sprintf("%s is a shard of %d, this sweep has %d", file, count, max(def.Shards, 1))}
		}
	}
	return nil
}

func shardCount(h Record) int {
	if h.Shard == nil {
		return 1
	}
	return max(h.Shard.Count, 1)
}

// Retired returns the runs log knows that are not part of this sweep's
// shard — those Dir.See was not told of, or at the index of another shard
// — in the log's order, and whether the log knew runs and none of them is
// part of it: another sweep altogether.
func Retired(log *Log, shard sweep.Shard) (ids []string, none bool) {
	if shard.Count <= 1 && int(log.seen.Load()) == len(log.Order) {
		return nil, false // every run seen, and one shard has them all
	}
	for _, id := range log.Order {
		if run := log.Runs[id]; !run.seen || !shard.Contains(run.index) {
			ids = append(ids, id)
		}
	}
	return ids, len(log.Order) > 0 && len(ids) == len(log.Order)
}
