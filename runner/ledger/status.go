package ledger

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/nodepack/nodepack/runner/failure"
	"github.com/nodepack/nodepack/runner/run"
)

// statusFormat names the Status document's schema. Fields are only ever
// added to it.
const statusFormat = "nodepack.status/v1"

// Status is where a sweep stands according to its output directory: the
// nodepack.status/v1 document of nodepack status --json.
type Status struct {
	Format string        `json:"format"`
	Dir    string        `json:"dir"`
	Time   time.Time     `json:"time"`
	Total  *int          `json:"total"` // null when a shard's source did not know it
	Counts Counts        `json:"counts"`
	Shards []ShardStatus `json:"shards"`
	// Running lists the running runs, oldest first.
	Running []RunStatus `json:"running"`
	// Failures lists the failed runs.
	Failures []RunStatus `json:"failures"`
	// Classes counts the failed runs by the failure class of their last
	// attempt (see runner/failure); they add up to Counts.Failed.
	Classes map[failure.Class]int `json:"classes"`
	// GPUsOut lists the GPUs the shards' last sessions took out of use
	// after a fault.
	GPUsOut []GPUOut `json:"gpus_out"`
	// RunsPerHour is the rate at which the live sessions finish runs; 0 when
	// none is live. ETASeconds estimates the time left; null when unknown.
	RunsPerHour float64  `json:"runs_per_hour"`
	ETASeconds  *float64 `json:"eta_s"`
}

// Counts counts a sweep's runs by state; they add up to Status.Total.
type Counts struct {
	Pending     int `json:"pending"`
	Running     int `json:"running"`
	Succeeded   int `json:"succeeded"`
	Failed      int `json:"failed"`
	Interrupted int `json:"interrupted"`
	Pruned      int `json:"pruned"` // stopped early by the pruning policy
}

// Shard states, as ShardStatus.State says them.
const (
	ShardRunning    = "running"     // its nodepack is alive on this host
	ShardEnded      = "ended"       // it wrote its end record
	ShardGone       = "gone"        // its nodepack, on this host, ended without an end record
	shardUnknown    = "unknown"     // running on another host, or gone there
	ShardOtherSweep = "other sweep" // it holds another sweep than the newest ledger: not counted
)

// ShardStatus is one shard ledger's last session.
type ShardStatus struct {
	File     string    `json:"file"`
	Index    int       `json:"index"`
	Count    int       `json:"count"`
	State    string    `json:"state"`           // ShardRunning, ShardEnded, ShardGone, shardUnknown or ShardOtherSweep
	Sweep    string    `json:"sweep,omitempty"` // the key of the sweep's definition
	Host     string    `json:"host"`
	PID      int       `json:"pid"`
	Started  time.Time `json:"started"`
	Sessions int       `json:"sessions"`
	Note     string    `json:"note,omitempty"` // the end record's
	Deferred int       `json:"deferred,omitempty"`
	Torn     bool      `json:"torn,omitempty"` // a record was being written
	// Left counts the shard's runs not finished for good: pending,
	// running and interrupted; -1 when its source did not know its total.
	// Failed counts its failed runs.
	Left   int `json:"left"`
	Failed int `json:"failed"`
	// Total is how many runs the shard's source had when its last session
	// started; -1 when it did not know.
	Total int `json:"total"`
}

// GPUOut is a GPU taken out of use after a fault.
type GPUOut struct {
	UUID   string    `json:"uuid"`
	Reason string    `json:"reason"`
	Time   time.Time `json:"time"`
	Host   string    `json:"host"`
	File   string    `json:"file"` // the shard ledger that recorded it
}

// RunStatus is a running or failed run.
type RunStatus struct {
	ID       string    `json:"id"`
	Origin   string    `json:"origin,omitempty"`
	Attempt  int       `json:"attempt"`
	Lane     int       `json:"slot"` // NODEPACK_SLOT, the key its variable's name
	GPUs     []string  `json:"gpus"`
	CPUs     string    `json:"cpus"`
	Host     string    `json:"host,omitempty"`
	Started  time.Time `json:"started"`
	Elapsed  float64   `json:"elapsed_s,omitempty"` // running ones
	ExitCode *int      `json:"exit_code,omitempty"` // failed ones
	Signal   string    `json:"signal,omitempty"`
	Reason   string    `json:"reason,omitempty"`
	Class    string    `json:"class,omitempty"` // failed ones: why (runner/failure)
	// StderrTail is a failed run's last lines of standard error.
	StderrTail []string `json:"stderr_tail,omitempty"`
	Error      string   `json:"error,omitempty"`
	Stdout     string   `json:"stdout,omitempty"`
	Stderr     string   `json:"stderr,omitempty"`
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

// NewStatus is the status of dir at now before any run: every count 0, a
// total of none, every list empty (not null in JSON).
func NewStatus(dir string, now time.Time) *Status {
	zero := 0
	return &Status{Format: statusFormat, Dir: dir, Time: now.UTC(), Total: &zero, Running: []RunStatus{}, Failures: []RunStatus{},
		Shards: []ShardStatus{}, Classes: map[failure.Class]int{}, GPUsOut: []GPUOut{}}
}

// ReadStatus reads every ledger in dir and says where the sweep stands at
// now. It only reads, so it works from any host that sees dir, while the
// sweep runs or after. A line being written (no newline yet) is not there
// yet; any other bad line is an error naming it. Only the runs of the
// directory's sweep are counted — not a run its last session retired, nor
// a shard ledger that holds another sweep (which nodepack run refuses to
// make, but an older version may have) — so the counts add up to the
// total.
func ReadStatus(dir string, now time.Time) (*Status, error) {
	files, err := Files(dir)
	if errors.Is(err, fs.ErrNotExist) || err == nil && len(files) == 0 {
		return nil, noLedger(dir)
	}
	if err != nil {
		return nil, err
	}
	// One ledger at a time, each kept as its summary only: a thousand
	// shards of a thousand runs need the memory of one.
	host, _ := os.Hostname()
	var parts []shardPart
	var current *Record // the newest header: the directory's sweep
	for _, f := range files {
		log, err := readLean(f)
		if err != nil {
			return nil, err
		}
		if len(log.Sessions) == 0 {
			continue // created, header not written yet
		}
		p := summarize(dir, filepath.Base(f), log, host, now)
		if current == nil || p.header.Time.After(current.Time) {
			current = &p.header
		}
		parts = append(parts, p)
	}
	if current == nil {
		return nil, noLedger(dir)
	}
	st := NewStatus(dir, now)
	total, totalKnown := 0, true
	left := 0 // runs not finished for good: pending, running, interrupted
	for _, p := range parts {
		if otherSweep(p.header, *current) {
			p.shard.State = ShardOtherSweep
			st.Shards = append(st.Shards, p.shard)
			continue
		}
		st.Shards = append(st.Shards, p.shard)
		st.GPUsOut = append(st.GPUsOut, p.gpusOut...)
		c := p.counts
		st.Counts.Running += c[StateRunning]
		st.Counts.Succeeded += c[StateSucceeded]
		st.Counts.Failed += c[StateFailed]
		st.Counts.Interrupted += c[StateInterrupted]
		st.Counts.Pruned += c[StatePruned]
		if p.total != nil {
			total += *p.total
			st.Counts.Pending += p.pending
		} else {
			totalKnown = false
		}
		left += c[StateRunning] + c[StateInterrupted]
		st.Running = append(st.Running, p.running...)
		st.Failures = append(st.Failures, p.failures...)
		for _, f := range p.failures {
			st.Classes[failure.Class(f.Class)]++
		}
		st.RunsPerHour += p.runsPerHour
	}
	st.Total = nil // known only when every shard's is
	if totalKnown {
		st.Total = &total
		left += st.Counts.Pending
		if st.RunsPerHour > 0 {
			eta := float64(left) / st.RunsPerHour * 3600
			st.ETASeconds = &eta
		}
	}
	slices.SortFunc(st.Running, func(a, b RunStatus) int { return a.Started.Compare(b.Started) })
	return st, nil
}

// shardPart is what ReadStatus keeps of one shard ledger.
type shardPart struct {
	header      Record
	shard       ShardStatus
	gpusOut     []GPUOut
	counts      map[State]int
	total       *int // the shard's runs; nil when its source did not know
	pending     int  // runs of the shard's total the ledger does not know yet
	running     []RunStatus
	failures    []RunStatus
	runsPerHour float64 // in its last session, while it runs
}

// summarize is one shard ledger's part of the status, read on host at now.
func summarize(dir, file string, log *Log, host string, now time.Time) shardPart {
	h := log.Header()
	sh := ShardStatus{File: file, Index: 0, Count: 1, Host: h.Host, PID: h.PID, Started: h.Time,
		Sessions: len(log.Sessions), Torn: log.Torn > 0}
	if h.Shard != nil {
		sh.Index, sh.Count = h.Shard.Index, h.Shard.Count
	}
	if h.Sweep != nil {
		sh.Sweep = h.Sweep.Key()
	}
	switch {
	case log.End != nil:
		sh.State, sh.Note, sh.Deferred = ShardEnded, log.End.Note, log.End.Deferred
	case log.markGone(host):
		sh.State = ShardGone
	case h.Host == host:
		sh.State = ShardRunning
	default:
		sh.State = shardUnknown
	}
	p := shardPart{header: h}
	for _, g := range log.GPUsOut {
		p.gpusOut = append(p.gpusOut, GPUOut{UUID: g.GPUs[0], Reason: g.Note, Time: g.Time, Host: h.Host, File: file})
	}
	c := log.Count()
	p.counts = c
	sh.Failed, sh.Left, sh.Total = c[StateFailed], -1, -1
	if h.Total != nil && *h.Total >= 0 {
		p.total, sh.Total = h.Total, *h.Total
		p.pending = max(0, *h.Total-log.Members())
		sh.Left = c[StateRunning] + c[StateInterrupted] + p.pending
	}
	finished := 0 // in the last session
	session := len(log.Sessions) - 1
	for _, run := range log.InOrder() {
		if run.Retired {
			continue
		}
		switch run.State {
		case StateRunning:
			p.running = append(p.running, runStatus(dir, run, now))
		case StateFailed:
			p.failures = append(p.failures, runStatus(dir, run, now))
		}
		if run.Session == session && run.Finished != nil && (run.State == StateSucceeded || run.State == StateFailed || run.State == StatePruned) {
			finished++
		}
	}
	if sh.State == ShardRunning || sh.State == shardUnknown {
		if elapsed := now.Sub(h.Time).Hours(); elapsed > 0 && finished > 0 {
			p.runsPerHour = float64(finished) / elapsed
		}
	}
	p.shard = sh
	return p
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
	return true
}

// Stream reads the ledgers of the sweep in dir: every ledger there, of
// which it returns those of the directory's sweep (the newest header's),
// in name order, as ReadStatus counts them: without shard ledgers of
// another sweep, and with the runs that a session gone from this host left
// running marked interrupted. It keeps no record and little per run, so
// that a reader of millions of runs (the report, the results table) needs
// little memory beyond its own: it calls each with
// every record of every ledger, in file order, with the place of its run
// among its ledger's runs (Log.At; -1 for a record of no run). rec is
// valid during the call only. The returned Logs have no Runs or Order,
// and their runs no Started or Finished: Len and At give the runs.
func Stream(dir string, each func(file string, rec *Record, run, size int)) ([]*Log, error) {
	return sweepLogs(dir, each, true)
}

// sweepLogs is Stream, or with stream false a read that keeps every
// record, as ReadFile does.
func sweepLogs(dir string, each func(file string, rec *Record, run, size int), stream bool) ([]*Log, error) {
	files, err := Files(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, noLedger(dir)
	}
	if err != nil {
		return nil, err
	}
	var logs []*Log
	var current *Record
	for _, f := range files {
		var fileEach func(*Record, int, int)
		if each != nil {
			base := filepath.Base(f)
			fileEach = func(rec *Record, run, size int) { each(base, rec, run, size) }
		}
		log, err := readFile(f, fileEach, stream)
		if err != nil {
			return nil, err
		}
		if len(log.Sessions) == 0 {
			continue // created, header not written yet
		}
		if h := log.Header(); current == nil || h.Time.After(current.Time) {
			current = &h
		}
		logs = append(logs, log)
	}
	if current == nil {
		return nil, noLedger(dir)
	}
	host, _ := os.Hostname()
	ours := logs[:0]
	for _, log := range logs {
		if otherSweep(log.Header(), *current) {
			continue
		}
		log.markGone(host)
		ours = append(ours, log)
	}
	return ours, nil
}

// otherSweep reports whether a shard ledger's last header h belongs to
// another sweep than current, the directory's newest header.
func otherSweep(h, current Record) bool {
	switch {
	case h.Sweep != nil && current.Sweep != nil:
		return h.Sweep.Key() != current.Sweep.Key() || max(h.Sweep.Shards, 1) != max(current.Sweep.Shards, 1)
	case h.Sweep == nil && current.Sweep == nil:
		return shardCount(h) != shardCount(current)
	}
	return false // a ledger from before definitions were recorded: assumed the same
}

func runStatus(dir string, run *Run, now time.Time) RunStatus {
	s := RunStatus{ID: run.ID, Attempt: run.Attempts, GPUs: []string{}}
	if st := run.Started; st != nil {
		s.Origin, s.GPUs, s.CPUs, s.Host, s.Started = st.Origin, st.GPUs, st.CPUs, st.Host, st.Time
		if st.Lane != nil {
			s.Lane = *st.Lane
		}
		if s.GPUs == nil {
			s.GPUs = []string{}
		}
		s.Stdout, s.Stderr = logPath(dir, st.Stdout), logPath(dir, st.Stderr)
	}
	if run.State == StateRunning && run.Started != nil {
		s.Elapsed = now.Sub(run.Started.Time).Round(time.Millisecond).Seconds()
	}
	if fin := run.Finished; fin != nil && run.State == StateFailed {
		s.ExitCode, s.Signal, s.Reason, s.Error = fin.ExitCode, fin.Signal, string(fin.Reason), fin.Error
		s.Class, s.StderrTail = string(ClassOf(fin)), fin.StderrTail
		if s.Origin == "" {
			s.Origin = fin.Origin
		}
		if s.Stderr == "" {
			s.Stdout, s.Stderr = logPath(dir, fin.Stdout), logPath(dir, fin.Stderr)
		}
		if s.Lane == 0 && fin.Lane != nil {
			s.Lane = *fin.Lane
		}
	}
	return s
}

// ClassOf returns the failure class of a finished record: the one it
// holds, or for a record written before classes were, the one its exit
// status, signal and reason give.
func ClassOf(fin *Record) failure.Class {
	if fin.Class != "" {
		return fin.Class
	}
	o := failure.Outcome{Signal: fin.Signal, TimedOut: fin.Reason == run.TimedOut, Interrupted: fin.Reason == run.Interrupted}
	if fin.ExitCode != nil {
		o.ExitCode = *fin.ExitCode
	}
	return failure.Classify(o, nil, nil)
}

// logPath turns a ledger's log path (relative to its directory) into one
// usable from here.
func logPath(dir, p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}
