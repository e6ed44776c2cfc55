package run

import (
	"encoding/json"
	"time"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/resources/usage"
	"github.com/nodepack/nodepack/runner/failure"
)

// Usage is what one attempt used.
type Usage struct {
	// MaxRSS is the peak resident set, in bytes, of the run's process or of
	// the largest descendant it reaped (getrusage's ru_maxrss: one process,
	// not the sum of the tree). Zero where the system does not report it.
	MaxRSS uint64
	// CPU is the user plus system time of the run's process and of every
	// descendant that its parent reaped (escaped descendants the runner
	// kills are not counted).
	CPU time.Duration
	// Sampled holds the sampler's measurements; zero without one.
	Sampled usage.Sampled
}

// Reason says how an attempt ended.
type Reason string

const (
	OK          Reason = "ok"          // exit status 0
	Failed      Reason = "failed"      // non-zero exit, death by a signal not sent by the runner, or failure to start
	TimedOut    Reason = "timeout"     // the runner stopped it after its time limit
	Interrupted Reason = "interrupted" // the runner stopped it: the context was cancelled, Kill was called or the terminate deadline passed
	Pruned      Reason = "pruned"      // the runner stopped it early: its metric was outside the best at a rung (schedule.Prune); neither failed nor retried
	Paused      Reason = "paused"      // judged out as Pruned, but the run keeps checkpoints: stopped after one, to be promoted (resumed from it) while it may still win; neither failed nor retried
)

// JudgedOut reports whether the pruning policy stopped the attempt
// (Pruned or Paused): it did nothing wrong, and is not retried.
func (r Reason) JudgedOut() bool { return r == Pruned || r == Paused }

// EventKind tells a Started event from a Finished one.
type EventKind int

const (
	Started  EventKind = iota + 1 // the attempt's process runs
	Finished                      // the attempt ended, or could not start
	Judged                        // the attempt's run was judged at a rung of the pruning policy (Event.Judgement)
)

// String returns "started" or "finished".
func (k EventKind) String() string {
	switch k {
	case Started:
		return "started"
	case Finished:
		return "finished"
	case Judged:
		return "judged"
	}
	return "unknown"
}

// Event describes one attempt of one run. A Started event comes once the
// attempt's process runs; a Finished event ends every attempt, also one
// whose command could not start (ExitCode -1, Err set, no Started event).
// Fields after PID are set in Finished events only.
type Event struct {
	Kind    EventKind
	Run     Run
	Attempt int             // from 1
	Lane    int             // the place among those running at once, from 0 (NODEPACK_SLOT)
	Place   pack.Assignment // its GPUs, CPUs and the request they serve
	Stdout  string          // log path; empty without OutputDir
	Stderr  string          // log path; empty without OutputDir
	Start   time.Time       // when the start began, right after the last checks (the start interval, the drain deadline)
	PID     int             // the run's process, also its process group id; 0 if it did not start
	// Promoted says the attempt is of a promoted run: a paused run resumed
	// (schedule.Pruner.Promote), counted when it paused. Its Finished
	// event says so too.
	Promoted bool

	End      time.Time // when its process was seen to exit (or the start failed)
	ExitCode int       // exit status; 128+N for death by signal N; -1 if it did not start
	Signal   string    // the signal that killed the run's process ("SIGKILL"); empty if it exited
	Reason   Reason
	Err      error // why it did not start, or an I/O error on its output; nil otherwise
	Retry    bool  // another attempt follows
	Usage    Usage
	// Class is why the attempt failed; empty when it succeeded.
	Class failure.Class
	// StderrTail is the last lines of a failed attempt's standard error
	// (at most MaxTailLines, each at most MaxTailLine bytes), from its log.
	StderrTail []string
	// Metrics is what the run reported of its metrics by the attempt's
	// end, one JSON object: the last value of each per-step metric (its
	// metrics file's lines, and its standard output's matches), with the
	// values of its metrics.json on top; "{}" when it reported none, nil
	// when nothing was read (no run directory). Curves is each per-step
	// metric's curve, {"loss": [[step, value], …]}, thinned to a few
	// points; MetricsSkipped counts the lines of the metrics file that
	// were not a JSON object or too long.
	Metrics        json.RawMessage
	Curves         json.RawMessage
	MetricsSkipped int
	// Judgement is a Judged event's: the rung, the run's value of the
	// metric there and the cutoff it was compared with, and whether it
	// was stopped.
	Judgement *Judgement
	// Steps is how far the attempt got and what of it a checkpoint kept:
	// nil when it reported no step.
	Steps *Steps
}

// Steps is an attempt's progress: the steps it reported, and the step
// of the run's last checkpoint by its end (a {"checkpoint": N} line of its
// metrics, or its checkpoint folder changing while nodepack watched).
type Steps struct {
	First, Last float64 // the first and the last step the attempt reported
	Checkpoint  float64 // 0: none
}

// LostPart returns the part of the attempt's time a stop loses: its lost
// steps over the steps it made (all of it when it made one).
func (s Steps) LostPart() float64 {
	if made := s.Last - s.First; made > 0 {
		return min(s.Lost()/made, 1)
	}
	return min(s.Lost(), 1)
}

// Lost returns the steps a stop of the attempt loses: those since the
// last checkpoint, all of them without one.
func (s Steps) Lost() float64 { return max(s.Last-s.Checkpoint, 0) }

// Judgement is the decision the pruning policy (runner/schedule's Pruner)
// took on one run at one rung: a Judged event's, and a rung record's.
type Judgement struct {
	Run    string  // the run's id
	Metric string  // the policy's metric
	Rung   int     // from 0
	Step   float64 // the rung's step
	At     float64 // the step the run reported, at or past Step
	Value  float64 // its metric there
	Cutoff float64 // what it was compared with; NaN when no run reached the rung before
	Others int     // how many runs reached the rung before
	Stop   bool
	// Pause says the stop is a pause: the run keeps checkpoints, so it is
	// stopped after one and may be promoted later (schedule.Pruner.Pause).
	Pause bool
	// Forecast and Optimistic are the curve rule's (schedule.Prune.Curve)
	// or the forecast rule's (schedule.Prune.Forecast), when Forecasted:
	// the likeliest and the best value of the metric at the run's last
	// step that its curve so far (the sweep's finished runs) allows. When
	// the curve rule made one and runs before it did, Cutoff is theirs
	// (the best 1/Eta of their forecasts) and Optimistic was compared with
	// it; the forecast rule compares Optimistic with the best final of the
	// finished runs (Cutoff), and Others is how many finished, unless a
	// rank rung judged the run by its value after the forecast let it go
	// on.
	Forecasted           bool
	Forecast, Optimistic float64
	// Prior says the forecast learnt from earlier sweeps' runs too
	// (schedule.Pruner.UsePrior). PriorDropped, on the judgement after
	// which the policy stopped using them for good, says why.
	Prior        bool
	PriorDropped string
}

// MaxTailLines and MaxTailLine bound Event.StderrTail: it goes to the
// ledger with every failed attempt.
const (
	MaxTailLines = 5
	MaxTailLine  = 300
)

// ExitSignalBase is how shells report a death by signal N: exit status
// 128+N, since a process's own exit status uses only 7 bits of the byte.
// Event.ExitCode follows it, and so does nodepack's own exit status when a
// signal stops it.
const ExitSignalBase = 128
