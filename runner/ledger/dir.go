package ledger

import (
	"bytes"
	"errors"
	"fmt"
	"hash/maphash"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/nodepack/nodepack/runner/claim"
	"github.com/nodepack/nodepack/runner/sweep"
	"github.com/nodepack/nodepack/runner/untrusted"
)

// Dir is what an output directory's ledgers hold: one Log per shard
// ledger, read without locking anything, as a rerun reads them before it
// decides what to resume and as every reader of a sweep reads them.
type Dir struct {
	Path string
	Logs []*Log // in file name order
	// Current is the newest header: the directory's sweep; nil when no
	// ledger has one.
	Current *Header

	seen atomic.Int64 // runs See found
}

// FileName is the name of shard index's ledger in a sweep of count
// shards: ledger.jsonl when the sweep is not sharded.
func FileName(index, count int) string {
	if count <= 1 {
		return "ledger.jsonl"
	}
	return fmt.Sprintf("ledger-%d-of-%d.jsonl", index, count)
}

// PoolFileName is the ledger of task in a shared pool: every task of a
// pool keeps its own, and the readers fold them together (see
// Dir.Whole).
func PoolFileName(task string) string { return "ledger-pool-" + task + ".jsonl" }

// Whole reports whether log is of the whole sweep rather than of a static
// shard: the one ledger of a sweep not split, or a pool task's. Whole
// ledgers may know the same run (a task that took over a dead one's runs
// ran them again); ReadDir retires all but the best record of each.
func (log *Log) Whole() bool {
	h := log.Header()
	return h.Pool != "" || h.Shard == nil || h.Shard.Count <= 1
}

// Files lists the ledgers in dir, sorted; backups are not included. A
// directory or anything else by a ledger's name is listed too, for its
// reader to refuse: a sweep whose ledger was replaced is not one that has
// none.
func Files(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, e := range entries {
		if name := e.Name(); strings.HasPrefix(name, "ledger") && strings.HasSuffix(name, ".jsonl") {
			files = append(files, filepath.Join(dir, name))
		}
	}
	return files, nil
}

// ErrNoLedger is wrapped by the error of a reader of an output directory
// that holds no ledger.
var ErrNoLedger = errors.New("no ledger (ledger*.jsonl): not a nodepack output directory, or nothing started yet")

func noLedger(dir string) error { return fmt.Errorf("%s: %w", dir, ErrNoLedger) }

// HasLedger returns nil when dir holds a ledger, else an error wrapping
// ErrNoLedger (or the error reading dir): a check before a reader's
// costlier work.
func HasLedger(dir string) error {
	files, err := Files(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist), err == nil && len(files) == 0:
		return noLedger(dir)
	}
	return err
}

// ReadDir reads every ledger in dir. A directory that does not exist yet
// holds none; a ledger with a bad line is an error naming it. The logs of
// another sweep than the newest header's are marked Other, and the runs
// that a session gone from this host left running are interrupted.
func ReadDir(dir string, o ReadOptions) (*Dir, error) {
	d := &Dir{Path: dir}
	files, err := Files(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return d, nil
	}
	if err != nil {
		return nil, err
	}
	var total, before int64
	if o.Progress != nil {
		for _, f := range files {
			if st, err := os.Stat(f); err == nil {
				total += st.Size()
			}
		}
	}
	for _, f := range files {
		var progress func(int64)
		if o.Progress != nil {
			progress = func(n int64) { o.Progress(before+n, total) }
		}
		log, err := readPath(f, o, progress)
		if err != nil {
			return nil, err
		}
		before += log.Size + log.Torn
		d.Logs = append(d.Logs, log)
		if len(log.Sessions) > 0 {
			if h := log.Header(); d.Current == nil || h.Time.After(d.Current.Time) {
				d.Current = &h
			}
		}
	}
	host, _ := os.Hostname()
	for _, log := range d.Logs {
		log.Other = len(log.Sessions) > 0 && otherSweep(log.Header(), *d.Current)
		log.Gone = log.markGone(host)
	}
	d.dedupe()
	return d, nil
}

// dedupe makes each run count once across the whole ledgers of a pool (see
// Log.Whole): a run that two of them know — a task died or was fenced
// while it ran the run, and the task that took its claim over ran it
// again — keeps its best record (succeeded, then pruned, failed, paused,
// interrupted, running), the later ledger's at a tie, and is retired in
// the others, so that every count adds up to the sweep's runs. Only runs
// not ended for good are looked up in the other ledgers: a pool without
// takeovers costs one pass over the states.
func (d *Dir) dedupe() {
	var whole []*Log
	for _, log := range d.Logs {
		if len(log.Sessions) > 0 && !log.Other && log.Whole() {
			whole = append(whole, log)
		}
	}
	if len(whole) < 2 {
		return
	}
	retireAcross(whole)
	if claim.TakenOver(d.Path) {
		dedupeAll(whole)
		return
	}
	for a, log := range whole {
		for i := range log.runs {
			r := &log.runs[i]
			if r.retired || rank[r.state] >= rank[failed] {
				continue
			}
			id := log.ids.at(i)
			for b, other := range whole {
				if b == a {
					continue
				}
				j, ok := other.byID.find(id, &other.ids)
				if !ok || other.runs[j].retired {
					continue
				}
				if o := rank[other.runs[j].state]; o > rank[r.state] || o == rank[r.state] && b > a {
					r.retired = true
					break
				}
			}
		}
	}
}

// retireAcross retires in each whole ledger of a pool the runs that
// another task's last session found there and that left the sweep
// (Header.PoolRetired), as far as that task read the ledger.
func retireAcross(whole []*Log) {
	byName := make(map[string]*Log, len(whole))
	for _, log := range whole {
		byName[filepath.Base(log.Name)] = log
	}
	for _, log := range whole {
		for _, pr := range log.Sessions[len(log.Sessions)-1].PoolRetired {
			other := byName[pr.Ledger]
			if other == nil || other == log {
				continue
			}
			for _, id := range pr.Runs {
				if i, ok := other.Find(id); ok {
					if l := other.last[i]; max(l.started.off, l.finished.off) < pr.Bytes {
						other.runs[i].retired = true
					}
				}
			}
		}
	}
}

// dedupeAll is dedupe over every run, ended or not: after a takeover, a
// task seen dead that was not may have ended a run that the task that
// took it over ran again. A run is found in the other ledgers by a 64-bit
// hash of its id; two ids of one hash are left as they are.
func dedupeAll(whole []*Log) {
	type at struct{ log, i int32 }
	n := 0
	for _, log := range whole {
		n += len(log.runs)
	}
	best := make(map[uint64]at, n)
	seed := maphash.MakeSeed()
	for a, log := range whole {
		for i := range log.runs {
			r := &log.runs[i]
			if r.retired {
				continue
			}
			id := log.ids.bytes(i)
			h := maphash.Bytes(seed, id)
			b, ok := best[h]
			if !ok {
				best[h] = at{int32(a), int32(i)}
				continue
			}
			other := whole[b.log]
			o := &other.runs[b.i]
			if !bytes.Equal(other.ids.bytes(int(b.i)), id) {
				continue
			}
			if rank[r.state] >= rank[o.state] { // the later ledger's at a tie
				o.retired = true
				best[h] = at{int32(a), int32(i)}
			} else {
				r.retired = true
			}
		}
	}
}

// rank orders the states by how much a run's record in one ledger says
// over another's of the same run (see dedupe).
var rank = [...]int{pending: 0, running: 1, interrupted: 2, paused: 3, failed: 4, pruned: 5, succeeded: 6}

// openRead opens the ledger at path for reading as what it may be, a
// file a run replaced: the ledger itself is no symbolic link (the
// directory it is in is the caller's choice), the open never blocks (a
// FIFO opens at once, to be refused), and only a regular file is read.
// Every reader of a ledger opens it here.
func openRead(path string) (*os.File, error) {
	f, err := untrusted.Open(untrusted.Split(path))
	if errors.Is(err, untrusted.ErrLink) || errors.Is(err, untrusted.ErrNotRegular) {
		return nil, fmt.Errorf("read ledger: %w", err)
	}
	return f, err
}

// readPath is ReadFile with progress.
func readPath(path string, o ReadOptions, progress func(int64)) (*Log, error) {
	f, err := openRead(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	log, err := read(f, path, st.Size(), o, progress)
	if err != nil {
		return nil, err
	}
	if log.Size+log.Torn == st.Size() {
		log.ident = st
	}
	return log, nil
}

// Sweep returns the logs of the directory's sweep: those with a header,
// and not of another sweep. Its error wraps ErrNoLedger when there are
// none.
func (d *Dir) Sweep() ([]*Log, error) {
	var logs []*Log
	for _, log := range d.Logs {
		if len(log.Sessions) > 0 && !log.Other {
			logs = append(logs, log)
		}
	}
	if len(logs) == 0 {
		return nil, noLedger(d.Path)
	}
	return logs, nil
}

// markGone marks the runs of the log's last session as interrupted when
// that session wrote no end record, ran on host (this one) and its
// nodepack is gone: it was killed. It reports whether it did.
func (log *Log) markGone(host string) bool {
	h := log.Header()
	if log.End != nil || len(log.Sessions) == 0 || h.Host != host || processAlive(h.PID) {
		return false
	}
	log.MarkInterrupted()
	if log.timeline {
		log.spans[len(log.spans)-1].Live = false
		log.settle()
	}
	return true
}

// otherSweep reports whether a shard ledger's last header h belongs to
// another sweep than current, the directory's newest header.
func otherSweep(h, current Header) bool {
	switch {
	case h.Sweep != nil && current.Sweep != nil:
		return h.Sweep.Key() != current.Sweep.Key() || max(h.Sweep.Shards, 1) != max(current.Sweep.Shards, 1)
	case h.Sweep == nil && current.Sweep == nil:
		return shardCount(h) != shardCount(current)
	}
	return false // a ledger from before definitions were recorded: assumed the same
}

// Known returns how many runs the ledgers have a record of (a run that
// two ledgers know counts twice).
func (d *Dir) Known() int {
	n := 0
	for _, log := range d.Logs {
		n += log.Len()
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
		if i, ok := log.Find(id); ok {
			r := &log.runs[i]
			if !r.seen {
				d.seen.Add(1)
				log.seen.Add(1)
			}
			r.seen, r.index, known = true, int32(index), true
		}
	}
	return known
}

// Seen returns how many of the runs the ledgers know See was told of
// (counted as Known counts).
func (d *Dir) Seen() int { return int(d.seen.Load()) }

// Log returns the log of one ledger file, by its base name; an empty one
// if there is none.
func (d *Dir) Log(file string) *Log {
	for _, log := range d.Logs {
		if filepath.Base(log.Name) == file {
			return log
		}
	}
	return &Log{Name: filepath.Join(d.Path, file), byID: newIDIndex()}
}

// Changes checks that the directory's ledgers hold the sweep def, so that
// what they say done was done with this definition. It returns, one phrase
// each, what changed (see sweep.Definition.Changes); nil when the sweep
// may resume.
func (d *Dir) Changes(def sweep.Definition) []string {
	for _, log := range d.Logs {
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
			return []string{fmt.Sprintf("%s is a shard of %d, this sweep has %d", filepath.Base(log.Name), count, max(def.Shards, 1))}
		}
	}
	return nil
}

func shardCount(h Header) int {
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
	if shard.Count <= 1 && int(log.seen.Load()) == log.Len() {
		return nil, false // every run seen, and one shard has them all
	}
	for i, r := range log.runs {
		if !r.seen || !shard.Contains(int(r.index)) {
			ids = append(ids, log.ids.at(i))
		}
	}
	return ids, log.Len() > 0 && len(ids) == log.Len()
}
