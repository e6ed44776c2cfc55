package ledger

import (
	"encoding/json"
	"math"
	"time"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/resources/usage"
	"github.com/nodepack/nodepack/runner/failure"
	"github.com/nodepack/nodepack/runner/jsonscan"
	"github.com/nodepack/nodepack/runner/run"
	"github.com/nodepack/nodepack/runner/sweep"
)

// Format names the ledger's layout; every header record carries it.
const Format = "nodepack.ledger/v1"

// The record types: the "type" of a ledger line. A ledger is a sequence
// of sessions, each a header, the records of its attempts (started,
// finished, rung) and of the GPUs it took out of use (gpu_out), and,
// unless the session was killed, an end record.
const (
	TypeHeader   = "header"   // a session begins: who, what, where
	TypeStarted  = "started"  // an attempt's process runs
	TypeFinished = "finished" // an attempt ended
	TypeRung     = "rung"     // a run was judged at a rung of the pruning policy
	TypeGPUOut   = "gpu_out"  // a GPU reported a fault and was taken out of use
	TypeDensity  = "density"  // the density rule (gpus=auto) changed a shape's runs per GPU
	TypeEnd      = "end"      // the session ended without being killed
)

// Each record type is a Go type of its own, whose JSON is the line: its
// "type" and "time" first, then its fields in the order below
// (testdata/records.golden.jsonl holds them to it).

// PoolRetired is a pool task's word on another task's ledger (by its
// base name): the runs it recorded in its first Bytes bytes that are not
// part of the session's sweep. Only those records are retired, so a run
// the other task records again later (the line edited back) counts.
type PoolRetired struct {
	Ledger string   `json:"ledger"`
	Bytes  int64    `json:"bytes"`
	Runs   []string `json:"runs"`
}

// Header starts a session: who ran what sweep, where.
type Header struct {
	Type    string       `json:"type"`
	Time    time.Time    `json:"time"`
	Format  string       `json:"format,omitempty"`
	Version string       `json:"version,omitempty"`
	Command []string     `json:"command,omitempty"`
	Cwd     string       `json:"cwd,omitempty"` // where Command ran
	Host    string       `json:"host,omitempty"`
	PID     int          `json:"pid,omitempty"` // the runner's
	Shard   *sweep.Shard `json:"shard,omitempty"`
	// Pool names the task of a shared pool whose ledger this is (see
	// PoolFileName): the task runs the runs it claims of the whole sweep,
	// whose runs Total counts.
	Pool  string            `json:"pool,omitempty"`
	Total *int              `json:"total,omitempty"` // runs of this shard (of the whole sweep in a pool), when the source knows
	Node  json.RawMessage   `json:"node,omitempty"`
	Plan  json.RawMessage   `json:"plan,omitempty"`
	Sweep *sweep.Definition `json:"sweep,omitempty"`
	// Retired lists the runs that earlier sessions of this ledger recorded
	// and that are not part of this session's sweep (its task file lost
	// those lines, say): they are left out of its counts.
	Retired []string `json:"retired,omitempty"`
	// PoolRetired is, in a pool task's header, what it found of the other
	// tasks' ledgers: the runs they recorded that are not part of this
	// session's sweep (a line edited since), each ledger read so far.
	PoolRetired []PoolRetired `json:"pool_retired,omitempty"`
	// PrunePrior lists the earlier sweeps the session's pruning policy
	// learnt from (--prune-prior): what it read of each.
	PrunePrior []Prior `json:"prune_prior,omitempty"`
}

// Prior is what a session read of one earlier sweep's output directory
// for its pruning policy (a header's prune_prior): the directory, its
// sweep's key, the runs read that reported the policy's metric, those of
// them that reached the prior's last step, that step, and a digest of
// what was read, so that a resumed sweep tells a changed prior.
type Prior struct {
	Dir      string  `json:"dir"`
	Sweep    string  `json:"sweep,omitempty"`
	Runs     int     `json:"runs"`
	Finished int     `json:"finished"`
	MaxStep  float64 `json:"max_step,omitempty"`
	Digest   string  `json:"digest"`
}

// RunAttempt says which attempt of which run a record is of.
type RunAttempt struct {
	ID      string `json:"id,omitempty"`
	Index   int    `json:"index,omitempty"`
	Origin  string `json:"origin,omitempty"`
	Attempt int    `json:"attempt,omitempty"`
}

// Started says an attempt's process runs.
type Started struct {
	Type string    `json:"type"`
	Time time.Time `json:"time"`
	Host string    `json:"host,omitempty"`
	PID  int       `json:"pid,omitempty"` // the run's
	RunAttempt
	Lane *int     `json:"slot,omitempty"` // its lane, NODEPACK_SLOT (the key is the variable's name)
	GPUs []string `json:"gpus,omitempty"` // UUIDs
	CPUs string   `json:"cpus,omitempty"` // "0-3,8"
	// Request is what the attempt holds its GPUs, CPUs and memory for, as
	// pack.ParseRequest reads it ("gpus=0.25 gpu_mem=12GiB cpus=4").
	Request string `json:"request,omitempty"`
	Stdout  string `json:"stdout,omitempty"` // relative to the ledger's directory
	Stderr  string `json:"stderr,omitempty"`
	// Params are the run's parameters, as its params.json has them; none
	// for a task-file line.
	Params json.RawMessage `json:"params,omitempty"`
	// Promoted says the attempt resumes a paused run, from its checkpoint.
	Promoted bool `json:"promoted,omitempty"`
}

// Finished says how an attempt ended.
type Finished struct {
	Type string    `json:"type"`
	Time time.Time `json:"time"`
	RunAttempt
	Lane *int `json:"slot,omitempty"`
	// Request is what the attempt held at its end (gpu_mem=auto measures
	// a run and shrinks its claim to what it uses).
	Request  string     `json:"request,omitempty"`
	Stdout   string     `json:"stdout,omitempty"`
	Stderr   string     `json:"stderr,omitempty"`
	ExitCode *int       `json:"exit_code,omitempty"`
	Signal   string     `json:"signal,omitempty"`
	Reason   run.Reason `json:"reason,omitempty"`
	Retry    bool       `json:"retry,omitempty"` // another attempt follows
	Error    string     `json:"error,omitempty"`
	Seconds  float64    `json:"duration_s,omitempty"`
	Use
	// Class is why the attempt failed (see runner/failure), StderrTail
	// the last lines of its standard error.
	Class      failure.Class `json:"class,omitempty"`
	StderrTail []string      `json:"stderr_tail,omitempty"`
	// Metrics, Curves and MetricsSkipped are what the run reported of its
	// metrics by the attempt's end (see run.Event.Metrics); a ledger
	// written before nodepack recorded them has none, not even "{}".
	Metrics        json.RawMessage `json:"metrics,omitempty"`
	Curves         json.RawMessage `json:"curves,omitempty"`
	MetricsSkipped int             `json:"metrics_skipped,omitempty"`
	// Steps is how far the attempt got (run.Event.Steps); nil when it
	// reported no step.
	Steps *Steps `json:"steps,omitempty"`
}

// Steps is an attempt's progress in its finished record: its last step,
// the step of the run's last checkpoint by its end (0: none), and the
// steps a stop lost (Lost: those since the checkpoint), recorded for an
// attempt that did not succeed.
type Steps struct {
	First      float64 `json:"first"`
	Last       float64 `json:"last"`
	Checkpoint float64 `json:"checkpoint,omitempty"`
	Lost       float64 `json:"lost,omitempty"`
	// LostSeconds is the attempt's time that its lost steps took: its
	// duration times lost over the steps it made.
	LostSeconds float64 `json:"lost_s,omitempty"`
}

// Use is what an attempt used, in its finished record.
type Use struct {
	MaxRSS      uint64      `json:"max_rss_bytes,omitempty"`
	CPUSeconds  float64     `json:"cpu_s,omitempty"`
	TreeRSSPeak uint64      `json:"tree_rss_peak_bytes,omitempty"`
	GPUUsage    []usage.GPU `json:"gpu_usage,omitempty"`
}

// PeakRSS is the largest of the sampled tree's peak and the kernel's.
func (u Use) PeakRSS() uint64 { return max(u.TreeRSSPeak, u.MaxRSS) }

// PeakGPUMemory is the attempt's own peak GPU memory, summed over its GPUs.
func (u Use) PeakGPUMemory() uint64 {
	var n uint64
	for _, g := range u.GPUUsage {
		n += g.ProcessPeakMemoryBytes
	}
	return n
}

// EnergyJoules is the attempt's share of its GPUs' energy, summed over them.
func (u Use) EnergyJoules() float64 {
	var j float64
	for _, g := range u.GPUUsage {
		j += g.EnergyJoules
	}
	return j
}

// Rung is a run judged at a rung of the pruning policy (the record of a
// run.Judgement): its attempt, the Metric, the rung's index and step, the
// step the run reported (Step) and its Value there (null when not a
// finite number), the Cutoff it was compared with (null when no run
// reached the rung before), how many had (Others), and whether it was
// stopped (Pruned).
type Rung struct {
	Type string    `json:"type"`
	Time time.Time `json:"time"`
	RunAttempt
	Metric   string   `json:"metric,omitempty"`
	Rung     *int     `json:"rung,omitempty"`
	RungStep float64  `json:"rung_step,omitempty"`
	Step     float64  `json:"step,omitempty"`
	Value    *float64 `json:"value,omitempty"`
	Cutoff   *float64 `json:"cutoff,omitempty"`
	Others   int      `json:"others,omitempty"`
	Pruned   bool     `json:"pruned,omitempty"`
	// Paused says the stop was a pause: the run keeps checkpoints and may
	// be promoted (resumed from its checkpoint) later.
	Paused bool `json:"paused,omitempty"`
	// Forecast and Optimistic are the curve or forecast rule's forecasts of the run's
	// value at its last step (see run.Judgement); null when it made none.
	Forecast   *float64 `json:"forecast,omitempty"`
	Optimistic *float64 `json:"optimistic,omitempty"`
	// Prior says the forecast learnt from the earlier sweeps of the
	// header's prune_prior too; PriorDropped, on the judgement after which
	// the policy stopped using them for good, says why.
	Prior        bool   `json:"prior,omitempty"`
	PriorDropped string `json:"prior_dropped,omitempty"`
}

// GPUOut says a GPU reported a fault and was taken out of use.
type GPUOut struct {
	Type string    `json:"type"`
	Time time.Time `json:"time"`
	GPUs []string  `json:"gpus,omitempty"` // the GPU's UUID, alone
	Note string    `json:"note,omitempty"` // the fault
}

// Density is a decision of the density rule (gpus=auto, --runs-per-gpu
// auto): the runs of Shape (their command with its numbers blanked out)
// now share a GPU To at a time, where they shared it From at a time;
// Final says the rule tries no more; Measured is the GPU's progress in
// the shape's steps per second with each number of runs on it so far;
// Why says it in words.
type Density struct {
	Type     string      `json:"type"`
	Time     time.Time   `json:"time"`
	Shape    string      `json:"shape,omitempty"`
	From     int         `json:"from"`
	To       int         `json:"to"`
	Final    bool        `json:"final,omitempty"`
	Measured []DensityAt `json:"measured,omitempty"`
	Why      string      `json:"why,omitempty"`
}

// DensityAt is the progress measured with Runs runs on a GPU: StepsPerSec
// from Readings readings.
type DensityAt struct {
	Runs        int     `json:"runs"`
	StepsPerSec float64 `json:"steps_per_s"`
	Readings    int     `json:"readings"`
}

// End ends a session that was not killed.
type End struct {
	Type     string    `json:"type"`
	Time     time.Time `json:"time"`
	Note     string    `json:"note,omitempty"`     // how the session ended
	Deferred int       `json:"deferred,omitempty"` // runs left for the next session
}

// ClassOf returns the failure class of a finished record: the one it
// holds, or for a record written before classes were, the one its exit
// status, signal and reason give.
func ClassOf(fin *Finished) failure.Class {
	if fin.Class != "" {
		return fin.Class
	}
	o := failure.Outcome{Signal: fin.Signal, TimedOut: fin.Reason == run.TimedOut, Interrupted: fin.Reason == run.Interrupted}
	if fin.ExitCode != nil {
		o.ExitCode = *fin.ExitCode
	}
	return failure.Classify(o, nil, nil)
}

// A recorded field lives in this file: its place in a record type, how
// the Writer fills it from a run.Event (record), and how the fast decoder
// reads it back (started, finished); encoding/json reads what the fast
// decoder does not take.

// record makes a run.Event's record: a *Started, *Finished or *Rung.
func (l *Writer) record(ev run.Event) any {
	of := RunAttempt{ID: ev.Run.ID, Index: ev.Run.Index, Origin: ev.Run.Origin, Attempt: ev.Attempt}
	if j := ev.Judgement; ev.Kind == run.Judged && j != nil {
		rung := j.Rung
		rec := &Rung{Type: TypeRung, Time: ev.Start.UTC(), RunAttempt: of, Metric: j.Metric, Rung: &rung, RungStep: j.Step, Step: j.At, Others: j.Others, Pruned: j.Stop && !j.Pause, Paused: j.Stop && j.Pause}
		if finite(j.Value) {
			v := j.Value
			rec.Value = &v
		}
		if finite(j.Cutoff) {
			c := j.Cutoff
			rec.Cutoff = &c
		}
		if j.Forecasted && finite(j.Forecast) && finite(j.Optimistic) {
			f, o := j.Forecast, j.Optimistic
			rec.Forecast, rec.Optimistic = &f, &o
		}
		rec.Prior, rec.PriorDropped = j.Prior, j.PriorDropped
		return rec
	}
	lane := ev.Lane
	var request string
	if len(ev.Place.CPUs) > 0 || len(ev.Place.GPUs) > 0 {
		request = ev.Place.Request.String()
	}
	if ev.Kind == run.Started {
		return &Started{Type: TypeStarted, Time: ev.Start.UTC(), Host: l.host, PID: ev.PID, RunAttempt: of, Lane: &lane,
			GPUs: ev.Place.UUIDs(), CPUs: pack.FormatCPUList(ev.Place.CPUs), Request: request,
			Stdout: l.relative(ev.Stdout), Stderr: l.relative(ev.Stderr), Params: ev.Run.Params, Promoted: ev.Promoted}
	}
	code := ev.ExitCode
	rec := &Finished{Type: TypeFinished, Time: ev.End.UTC(), RunAttempt: of, Lane: &lane, Request: request,
		Stdout: l.relative(ev.Stdout), Stderr: l.relative(ev.Stderr),
		ExitCode: &code, Signal: ev.Signal, Reason: ev.Reason, Retry: ev.Retry, Seconds: roundSeconds(ev.End.Sub(ev.Start)),
		Use:   Use{MaxRSS: ev.Usage.MaxRSS, CPUSeconds: roundSeconds(ev.Usage.CPU), TreeRSSPeak: ev.Usage.Sampled.TreeRSSPeak, GPUUsage: ev.Usage.Sampled.GPUs},
		Class: ev.Class, StderrTail: ev.StderrTail, Metrics: ev.Metrics, Curves: ev.Curves, MetricsSkipped: ev.MetricsSkipped}
	if ev.Err != nil {
		rec.Error = ev.Err.Error()
	}
	if st := ev.Steps; st != nil {
		rec.Steps = &Steps{First: st.First, Last: st.Last, Checkpoint: st.Checkpoint}
		if ev.Reason != run.OK && ev.Reason != run.Pruned {
			// A pruned run is never resumed: what it did is spent, not lost
			// to be done again.
			rec.Steps.Lost = st.Lost()
			rec.Steps.LostSeconds = roundSeconds(time.Duration(float64(ev.End.Sub(ev.Start)) * st.LostPart()))
		}
	}
	return rec
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// roundSeconds is d in seconds, to the millisecond, as the float64 that
// prints so (Duration.Seconds of 2.272 s is 2.2720000000000002).
func roundSeconds(d time.Duration) float64 {
	return float64(d.Round(time.Millisecond)/time.Millisecond) / 1000
}

// started decodes line into s, which must be zero.
func (d *decoder) started(line []byte, s *Started) bool { return d.startedOf(line, s, false) }

// startedOf is started; with objects, it sets only the type, the run and
// attempt (id, index, attempt) and the params (see ParamsAndMetrics).
func (d *decoder) startedOf(line []byte, s *Started, objects bool) bool {
	return jsonscan.Compact.EachField(line, func(key, val []byte) bool {
		if objects && !objectsField(key) {
			return true
		}
		var ok bool
		switch string(key) {
		case "type":
			s.Type, ok = d.repeated(val)
			ok = ok && s.Type == TypeStarted
		case "time":
			ok = val[0] == '"' && s.Time.UnmarshalJSON(val) == nil
		case "host":
			s.Host, ok = d.repeated(val)
		case "pid":
			s.PID, ok = intOf(val)
		case "slot":
			s.Lane, ok = intPtrOf(val)
		case "gpus":
			s.GPUs, ok = textsOf(val)
		case "cpus":
			s.CPUs, ok = d.repeated(val)
		case "request":
			s.Request, ok = d.repeated(val)
		case "stdout":
			s.Stdout, ok = textOf(val)
		case "stderr":
			s.Stderr, ok = textOf(val)
		case "params":
			s.Params, ok = rawOf(val)
		default:
			ok = d.runAttempt(&s.RunAttempt, key, val)
		}
		return ok
	}) && s.Type == TypeStarted
}

// finished decodes line into f, which must be zero.
func (d *decoder) finished(line []byte, f *Finished) bool {
	return d.finishedUntil(line, nil, f, false)
}

// finishedUntil decodes line into f up to the field stop (nil: all of
// it); with objects, only the type, the run and attempt and the metrics
// (see ParamsAndMetrics).
func (d *decoder) finishedUntil(line, stop []byte, f *Finished, objects bool) bool {
	return jsonscan.Compact.EachFieldUntil(line, stop, func(key, val []byte) bool {
		if objects && !objectsField(key) {
			return true
		}
		var ok bool
		switch string(key) {
		case "type":
			f.Type, ok = d.repeated(val)
			ok = ok && f.Type == TypeFinished
		case "time":
			ok = val[0] == '"' && f.Time.UnmarshalJSON(val) == nil
		case "slot":
			f.Lane, ok = intPtrOf(val)
		case "request":
			f.Request, ok = d.repeated(val)
		case "stdout":
			f.Stdout, ok = textOf(val)
		case "stderr":
			f.Stderr, ok = textOf(val)
		case "exit_code":
			f.ExitCode, ok = intPtrOf(val)
		case "signal":
			f.Signal, ok = d.repeated(val)
		case "reason":
			var s string
			s, ok = d.repeated(val)
			f.Reason = run.Reason(s)
		case "retry":
			f.Retry, ok = string(val) == "true", string(val) == "true" || string(val) == "false"
		case "error":
			f.Error, ok = textOf(val)
		case "duration_s":
			f.Seconds, ok = floatOf(val)
		case "max_rss_bytes":
			f.MaxRSS, ok = uintOf(val)
		case "cpu_s":
			f.CPUSeconds, ok = floatOf(val)
		case "tree_rss_peak_bytes":
			f.TreeRSSPeak, ok = uintOf(val)
		case "gpu_usage":
			ok = val[0] == '[' && json.Unmarshal(val, &f.GPUUsage) == nil
		case "class":
			var s string
			s, ok = d.repeated(val)
			f.Class = failure.Class(s)
		case "stderr_tail":
			f.StderrTail, ok = textsOf(val)
		case "metrics":
			f.Metrics, ok = rawOf(val)
		case "curves":
			f.Curves, ok = rawOf(val)
		case "metrics_skipped":
			f.MetricsSkipped, ok = intOf(val)
		case "steps":
			ok = val[0] == '{' && json.Unmarshal(val, &f.Steps) == nil
		default:
			ok = d.runAttempt(&f.RunAttempt, key, val)
		}
		return ok
	}) && f.Type == TypeFinished
}

// objectsField says key is one ParamsAndMetrics decodes.
func objectsField(key []byte) bool {
	switch string(key) {
	case "type", "id", "index", "attempt", "params", "metrics":
		return true
	}
	return false
}

// runAttempt sets the field of a that key names; false for another key.
func (d *decoder) runAttempt(a *RunAttempt, key, val []byte) bool {
	var ok bool
	switch string(key) {
	case "id":
		a.ID, ok = textOf(val)
	case "index":
		a.Index, ok = intOf(val)
	case "origin":
		a.Origin, ok = textOf(val)
	case "attempt":
		a.Attempt, ok = intOf(val)
	}
	return ok
}

// recordName names a record for a message: its type and, for an
// attempt's, its run.
func recordName(rec any) string {
	switch r := rec.(type) {
	case *Started:
		return "started record of run " + r.ID
	case *Finished:
		return "finished record of run " + r.ID
	case *Rung:
		return "rung record of run " + r.ID
	case *Header:
		return "header"
	case *GPUOut:
		return "gpu_out record"
	case *Density:
		return "density record"
	case *End:
		return "end record"
	}
	return "record"
}
