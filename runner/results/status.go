package results

import (
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/nodepack/nodepack/runner/failure"
	"github.com/nodepack/nodepack/runner/ledger"
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
	// LostToStops is the work that stops lost (their runs' steps since
	// their last checkpoints), over every attempt; zero when none.
	LostToStops LostWork `json:"lost_to_stops"`
	// RunsPerHour is the rate at which the live sessions finish runs; 0 when
	// none is live. ETASeconds estimates the time left; null when unknown.
	RunsPerHour float64  `json:"runs_per_hour"`
	ETASeconds  *float64 `json:"eta_s"`
	// PrunePrior is what the pruning policy's prior did (--prune-prior);
	// absent without one.
	PrunePrior *PriorStatus `json:"prune_prior,omitempty"`
}

// PriorStatus is what a sweep's pruning policy did with the earlier
// sweeps it learnt from: which (the last sessions' headers say), how many
// stops forecasts that learnt from them made (runs pruned or paused), and
// why each ledger whose policy stopped using them for good did.
type PriorStatus struct {
	Dirs    []ledger.Prior `json:"dirs"`
	Stopped int            `json:"stopped"`
	Dropped []string       `json:"dropped"`
}

// LostWork is the work stops lost: in how many attempts, how many steps,
// and the time those steps took, also weighed by the GPUs each held.
type LostWork struct {
	Attempts   int     `json:"attempts"`
	Steps      float64 `json:"steps"`
	Seconds    float64 `json:"seconds"`
	GPUSeconds float64 `json:"gpu_seconds"`
}

// Counts counts a sweep's runs by state; they add up to Status.Total.
type Counts struct {
	Pending     int `json:"pending"`
	Running     int `json:"running"`
	Succeeded   int `json:"succeeded"`
	Failed      int `json:"failed"`
	Interrupted int `json:"interrupted"`
	Pruned      int `json:"pruned"` // stopped early by the pruning policy
	Paused      int `json:"paused"` // judged out, they keep checkpoints: a resumed sweep may promote them
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
	Pool     string    `json:"pool,omitempty"`  // the task of a shared pool whose ledger this is
	State    string    `json:"state"`           // ShardRunning, ShardEnded, ShardGone, shardUnknown or ShardOtherSweep
	Sweep    string    `json:"sweep,omitempty"` // the key of the sweep's definition
	Host     string    `json:"host"`
	PID      int       `json:"pid"`
	Started  time.Time `json:"started"`
	Sessions int       `json:"sessions"`
	Note     string    `json:"note,omitempty"` // the end record's
	Deferred int       `json:"deferred,omitempty"`
	Torn     bool      `json:"torn,omitempty"` // a record was being written
	// SessionRuns are the runs the shard's last session finished, in
	// SessionSeconds (to its end record, or to now while it runs): its
	// throughput, also once it has ended.
	SessionRuns    int     `json:"session_runs"`
	SessionSeconds float64 `json:"session_s"`
	// Unknown counts the records left out because their type is none
	// this nodepack knows (a newer nodepack's), by type.
	Unknown map[string]int `json:"unknown_records,omitempty"`
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
	d, err := ledger.ReadDir(dir, ledger.ReadOptions{})
	if err != nil {
		return nil, err
	}
	if _, err := d.Sweep(); err != nil {
		return nil, err // no ledger with a header
	}
	host, _ := os.Hostname()
	st := NewStatus(dir, now)
	total, totalKnown := 0, true
	left := 0 // runs not finished for good: pending, running, interrupted
	pooled := false
	for _, log := range d.Logs {
		pooled = pooled || len(log.Sessions) > 0 && !log.Other && log.Header().Pool != ""
	}
	poolTotal, poolKnown := 0, 0
	for _, log := range d.Logs {
		if len(log.Sessions) == 0 {
			continue // created, header not written yet
		}
		p, err := summarize(dir, log, host, now)
		if err != nil {
			return nil, err
		}
		if log.Other {
			p.shard.State = ShardOtherSweep
			st.Shards = append(st.Shards, p.shard)
			continue
		}
		st.Shards = append(st.Shards, p.shard)
		st.GPUsOut = append(st.GPUsOut, p.gpusOut...)
		lost := &st.LostToStops
		lost.Attempts += log.Lost.Attempts
		lost.Steps += log.Lost.Steps
		lost.Seconds += log.Lost.Seconds
		lost.GPUSeconds += log.Lost.GPUSeconds
		c := p.counts
		st.Counts.Running += c[ledger.StateRunning]
		st.Counts.Succeeded += c[ledger.StateSucceeded]
		st.Counts.Failed += c[ledger.StateFailed]
		st.Counts.Interrupted += c[ledger.StateInterrupted]
		st.Counts.Pruned += c[ledger.StatePruned]
		st.Counts.Paused += c[ledger.StatePaused]
		switch {
		case p.total == nil:
			totalKnown = false
		case log.Header().Pool != "" || pooled && log.Whole():
			// The tasks of a pool (and a ledger of the whole sweep
			// beside them) each know part of the same runs: their
			// total counts once, and what none knows is pending.
			poolTotal = max(poolTotal, *p.total)
			poolKnown += log.Members()
		default:
			total += *p.total
			st.Counts.Pending += p.pending
		}
		left += c[ledger.StateRunning] + c[ledger.StateInterrupted]
		st.Running = append(st.Running, p.running...)
		st.Failures = append(st.Failures, p.failures...)
		for _, f := range p.failures {
			st.Classes[failure.Class(f.Class)]++
		}
		st.RunsPerHour += p.runsPerHour
		priorStatus(st, log)
	}
	if pooled {
		total += poolTotal
		st.Counts.Pending += max(poolTotal-poolKnown, 0)
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

// priorStatus adds what log says of the prune prior to st.
func priorStatus(st *Status, log *ledger.Log) {
	dirs := log.Header().PrunePrior
	stopped, dropped, seen := log.PriorDid()
	if len(dirs) == 0 && !seen {
		return
	}
	if st.PrunePrior == nil {
		st.PrunePrior = &PriorStatus{Dirs: []ledger.Prior{}, Dropped: []string{}}
	}
	p := st.PrunePrior
	for _, d := range dirs {
		if !slices.ContainsFunc(p.Dirs, func(o ledger.Prior) bool { return o.Dir == d.Dir && o.Digest == d.Digest }) {
			p.Dirs = append(p.Dirs, d)
		}
	}
	p.Stopped += stopped
	p.Dropped = append(p.Dropped, dropped...)
}

// shardPart is what ReadStatus keeps of one shard ledger.
type shardPart struct {
	shard       ShardStatus
	gpusOut     []GPUOut
	counts      map[ledger.State]int
	total       *int // the shard's runs; nil when its source did not know
	pending     int  // runs of the shard's total the ledger does not know yet
	running     []RunStatus
	failures    []RunStatus
	runsPerHour float64 // in its last session, while it runs
}

// summarize is one shard ledger's part of the status, read on host at now.
func summarize(dir string, log *ledger.Log, host string, now time.Time) (shardPart, error) {
	h := log.Header()
	sh := ShardStatus{File: filepath.Base(log.Name), Index: 0, Count: 1, Host: h.Host, PID: h.PID, Started: h.Time,
		Sessions: len(log.Sessions), Torn: log.Torn > 0, Unknown: log.Unknown}
	if h.Shard != nil {
		sh.Index, sh.Count = h.Shard.Index, h.Shard.Count
	}
	sh.Pool = h.Pool
	if h.Sweep != nil {
		sh.Sweep = h.Sweep.Key()
	}
	switch {
	case log.End != nil:
		sh.State, sh.Note, sh.Deferred = ShardEnded, log.End.Note, log.End.Deferred
	case log.Gone:
		sh.State = ShardGone
	case h.Host == host:
		sh.State = ShardRunning
	default:
		sh.State = shardUnknown
	}
	p := shardPart{}
	for _, g := range log.GPUsOut {
		p.gpusOut = append(p.gpusOut, GPUOut{UUID: g.GPUs[0], Reason: g.Note, Time: g.Time, Host: h.Host, File: sh.File})
	}
	c := log.Count()
	p.counts = c
	sh.Failed, sh.Left, sh.Total = c[ledger.StateFailed], -1, -1
	if h.Total != nil && *h.Total >= 0 {
		p.total, sh.Total = h.Total, *h.Total
		if h.Pool == "" {
			p.pending = max(0, *h.Total-log.Members())
		}
		sh.Left = c[ledger.StateRunning] + c[ledger.StateInterrupted] + p.pending
	}
	finished := 0 // in the last session
	session := len(log.Sessions) - 1
	var shown []int // the running and failed runs, whose records the status shows
	for i := range log.Len() {
		run := log.At(i)
		if run.Retired {
			continue
		}
		if run.State == ledger.StateRunning || run.State == ledger.StateFailed {
			shown = append(shown, i)
		}
		if run.Session == session && (run.State == ledger.StateSucceeded || run.State == ledger.StateFailed || run.State == ledger.StatePruned || run.State == ledger.StatePaused) {
			finished++
		}
	}
	err := log.Last(shown, func(i int, s *ledger.Started, fin *ledger.Finished) error {
		run := log.At(i)
		if run.State == ledger.StateRunning {
			p.running = append(p.running, runStatus(dir, run, s, fin, now))
		} else {
			p.failures = append(p.failures, runStatus(dir, run, s, fin, now))
		}
		return nil
	})
	if err != nil {
		return p, err
	}
	// Last gives them in the order of the file: in the order of the runs.
	order := func(a, b RunStatus) int { i, _ := log.Find(a.ID); j, _ := log.Find(b.ID); return i - j }
	slices.SortFunc(p.running, order)
	slices.SortFunc(p.failures, order)
	sh.SessionRuns = finished
	switch sh.State {
	case ShardRunning, shardUnknown:
		if elapsed := now.Sub(h.Time).Hours(); elapsed > 0 && finished > 0 {
			p.runsPerHour = float64(finished) / elapsed
		}
		sh.SessionSeconds = max(now.Sub(h.Time).Seconds(), 0)
	case ShardEnded:
		sh.SessionSeconds = max(log.End.Time.Sub(h.Time).Seconds(), 0)
	}
	p.shard = sh
	return p, nil
}

// runStatus is a running or failed run, from its last records.
func runStatus(dir string, run ledger.Run, st *ledger.Started, fin *ledger.Finished, now time.Time) RunStatus {
	s := RunStatus{ID: run.ID, Attempt: run.Attempts, GPUs: []string{}}
	if st != nil {
		s.Origin, s.GPUs, s.CPUs, s.Host, s.Started = st.Origin, st.GPUs, st.CPUs, st.Host, st.Time
		if st.Lane != nil {
			s.Lane = *st.Lane
		}
		if s.GPUs == nil {
			s.GPUs = []string{}
		}
		s.Stdout, s.Stderr = logPath(dir, st.Stdout), logPath(dir, st.Stderr)
	}
	if run.State == ledger.StateRunning && st != nil {
		s.Elapsed = now.Sub(st.Time).Round(time.Millisecond).Seconds()
	}
	if fin != nil && run.State == ledger.StateFailed {
		s.ExitCode, s.Signal, s.Reason, s.Error = fin.ExitCode, fin.Signal, string(fin.Reason), fin.Error
		s.Class, s.StderrTail = string(ledger.ClassOf(fin)), fin.StderrTail
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

// logPath turns a ledger's log path (relative to its directory) into one
// usable from here.
func logPath(dir, p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}
