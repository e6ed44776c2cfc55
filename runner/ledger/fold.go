package ledger

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/runner/failure"
	"github.com/nodepack/nodepack/runner/run"
)

// State is where a run stands according to its ledger.
type State string

const (
	StatePending     State = "pending"     // no record yet
	StateRunning     State = "running"     // started in the live session, not finished
	StateSucceeded   State = "succeeded"   // its last attempt exited 0
	StateFailed      State = "failed"      // its last attempt failed or timed out, and no retry followed
	StateInterrupted State = "interrupted" // stopped by the runner, or its session ended (or was killed) while it ran
	StatePruned      State = "pruned"      // stopped early by the pruning policy: neither failed nor run again
	StatePaused      State = "paused"      // judged out as pruned, but it keeps checkpoints: a resumed sweep under the same policy may promote it (resume it from its checkpoint)
)

// states numbers the states, for runState.
var states = []State{StatePending, StateRunning, StateSucceeded, StateFailed, StateInterrupted, StatePruned, StatePaused}

const (
	pending uint8 = iota
	running
	succeeded
	failed
	interrupted
	pruned
	paused
)

// Run is one run as its ledger tells it.
type Run struct {
	ID       string
	State    State
	Attempts int // the highest attempt number recorded
	Session  int // index in Log.Sessions of its last record
	// Class is why its last attempt failed, when it did (see ClassOf).
	Class failure.Class
	// Retired says the last session's header listed the run as not part
	// of its sweep; Count leaves it out.
	Retired bool
}

// Lost is the work that stops lost (see Steps): how many attempts lost
// some, the steps, the runs' time those steps took, and that time
// weighed by the GPUs each held (a share of one counts as its share).
type Lost struct {
	Attempts   int
	Steps      float64
	Seconds    float64
	GPUSeconds float64
}

// add counts the finished record line, whose steps object is steps.
func (l *Lost) add(line, steps []byte) {
	var st Steps
	if json.Unmarshal(steps, &st) != nil || st.Lost <= 0 {
		return
	}
	l.Attempts++
	l.Steps += st.Lost
	l.Seconds += st.LostSeconds
	var rec struct {
		Request string `json:"request"`
	}
	if json.Unmarshal(line, &rec) == nil && rec.Request != "" {
		if r, err := pack.ParseRequest(rec.Request, pack.Request{}, 0); err == nil {
			amount := r.GPUs*pack.GPUWhole + r.GPUShare
			if amount == 0 && r.GPUMem > 0 {
				amount = pack.GPUWhole // its part of the GPU is not known: the whole
			}
			l.GPUSeconds += st.LostSeconds * float64(amount) / pack.GPUWhole
		}
	}
}

// Log is one ledger file folded: its sessions and, for each run it has a
// record of, where the run stands and where its last records are. It is
// the one reading of a ledger: a resume, a status, the results table and
// the report all read it, and read the records they show from it (Last).
// It keeps a few dozen bytes a run, so that a ledger of millions of runs
// fits in little memory.
type Log struct {
	Name     string   // the file's path
	Sessions []Header // the headers, oldest first
	End      *End     // the last session's end; nil while it runs or if it was killed
	// GPUsOut are the last session's gpu_out records: the GPUs it took out
	// of use after a fault.
	GPUsOut []GPUOut
	// Densities are the density rule's decisions, every session's, oldest
	// first.
	Densities []Density
	// Lost is the work that stops lost, over every attempt of every
	// session: the steps since the runs' last checkpoints.
	Lost Lost
	// Size is the length of the complete lines; Torn the length of an
	// unfinished last line that was left out (a write in progress, or the
	// node lost power during one).
	Size, Torn int64
	// Unknown counts the records left out because their type is none this
	// nodepack knows (a newer nodepack's), by type, at most
	// maxUnknownTypes types (the rest under "…"): a reader reads the
	// records it knows and leaves the rest, as it leaves the fields it
	// does not know.
	Unknown map[string]int
	// Other says the log holds another sweep than its directory's newest
	// header (see ReadDir): a reader counts none of its runs. Gone says
	// its last session ran on this host and its nodepack is gone without
	// an end record: it was killed, and its running runs are interrupted.
	Other, Gone bool

	ids        idList
	byID       idIndex
	runs       []runState
	last       []lastAt
	judgements []run.Judgement
	attempts   []Attempt     // with ReadOptions.Attempts
	spans      []SessionSpan // with ReadOptions.Attempts
	open       map[[2]int32]int32
	timeline   bool
	dec        decoder
	texts      map[string]uint32 // gpuTexts' places
	gpuTexts   []string          // the attempts' GPUs, each once ("" first)
	shares     map[string]float32
	cpus       map[string]int16
	seen       atomic.Int64 // runs Dir.See found
	next       atomic.Int32 // the place after the run Find found last
	ident      os.FileInfo  // the file read, when it did not change during the read
}

// runState is what a Log keeps of a run besides its id.
type runState struct {
	attempts, session int32
	index             int32 // where Dir.See found it in the sweep
	state, class      uint8 // class: 1 + its index in failure.Classes; 0 none
	retired, seen     bool
}

// span is where a record is in its ledger: at byte off, n bytes long,
// line no (from 1); n is 0 for none.
type span struct {
	off   int64
	n, no int32
}

// lastAt is where a run's last started and finished records are.
type lastAt struct{ started, finished span }

// ReadOptions says what a read of ledgers keeps beyond the runs.
type ReadOptions struct {
	// Attempts keeps every attempt as a timeline draws it (Log.Attempts)
	// and the sessions' spans (Log.Spans): every record is decoded.
	Attempts bool
	// Progress, if set, is called as the ledgers are read, with the bytes
	// read so far and in all, about every megabyte.
	Progress func(done, total int64)
}

// Attempt is one attempt as a timeline draws it (ReadOptions.Attempts).
type Attempt struct {
	Run        int32 // its run's place in the log (Log.At)
	N          int32 // the attempt's number
	Start, End int64 // ms since the epoch; End is 0 while it runs
	Session    int32 // in Log.Sessions
	Lane       int16
	CPUs       int16   // how many
	GPUShare   float32 // GPUs held: whole ones, or the share of one
	gpus       uint32  // in Log.texts: the UUIDs, comma-separated
	ending     uint8   // 0 running, else 1 + index in endings
	class      uint8   // as runState's
}

// endings are how an attempt ended, for Attempt.Ending.
var endings = []string{string(run.OK), string(run.Failed), string(run.TimedOut), string(run.Interrupted), string(run.Pruned), string(run.Paused)}

// Ending is how the attempt ended: a run.Reason, "running" while it
// runs, or "interrupted" when its session ended (or was killed) first.
func (a *Attempt) Ending() string {
	if a.ending == 0 {
		return "running"
	}
	return endings[a.ending-1]
}

// Class is why the attempt failed; "" when it did not.
func (a *Attempt) Class() failure.Class { return classAt(a.class) }

// GPUs returns the UUIDs of attempt a's GPUs, comma-separated; "" none.
func (log *Log) GPUs(a *Attempt) string { return log.gpuTexts[a.gpus] }

// SessionSpan is when a session ran (ReadOptions.Attempts): from its
// header to its last record, and its end record's time (0 none), in ms
// since the epoch; Live says no session followed it and it wrote no end.
type SessionSpan struct {
	Start, Last, End int64
	Live             bool
}

func classCode(c failure.Class) uint8 {
	if i := slices.Index(failure.Classes, c); i >= 0 {
		return uint8(i + 1)
	}
	return 0
}

func classAt(code uint8) failure.Class {
	if code == 0 {
		return ""
	}
	return failure.Classes[code-1]
}

// Len returns how many runs the log has a record of.
func (log *Log) Len() int { return log.ids.len() }

// At returns the i-th run the log has a record of, in the order of their
// first records.
func (log *Log) At(i int) Run {
	return log.run(i, log.ids.at(i))
}

// ID returns the id of the i-th run.
func (log *Log) ID(i int) string { return log.ids.at(i) }

// run is run i, whose id is id.
func (log *Log) run(i int, id string) Run {
	r := &log.runs[i]
	return Run{ID: id, State: states[r.state], Attempts: int(r.attempts), Session: int(r.session), Class: classAt(r.class), Retired: r.retired}
}

// Find returns the place of the run with id among the log's runs; ok is
// false when the log has no record of it.
func (log *Log) Find(id string) (i int, ok bool) {
	if log.byID.byHash == nil {
		return -1, false
	}
	// A sweep is looked up in the order of its runs, which is about the
	// order of their first records: the run after the last one found is
	// likely the one, and costs no hash.
	if next := int(log.next.Load()); next < log.ids.len() && string(log.ids.bytes(next)) == id {
		log.next.Store(int32(next + 1))
		return next, true
	}
	j, ok := log.byID.find(id, &log.ids)
	if ok {
		log.next.Store(j + 1)
	}
	return int(j), ok
}

// Run returns the run with id; ok is false when the log has no record of it.
func (log *Log) Run(id string) (Run, bool) {
	i, ok := log.Find(id)
	if !ok {
		return Run{ID: id, State: StatePending}, false
	}
	return log.run(i, id), true
}

// Attempts returns every attempt, in the order they started; nil unless
// the log was read with ReadOptions.Attempts.
func (log *Log) Attempts() []Attempt { return log.attempts }

// Spans returns when each session ran, as Sessions has them; nil unless
// the log was read with ReadOptions.Attempts.
func (log *Log) Spans() []SessionSpan { return log.spans }

// Judgements returns the judgements of the pruning policy the ledger
// records, every session's, in order: what a resumed sweep replays.
func (log *Log) Judgements() []run.Judgement { return log.judgements }

// PriorDid says what the pruning policy's prior (a header's prune_prior)
// did, from the judgements: how many stopped a run by a forecast that
// learnt from it, and why it was dropped, once per drop; seen is false
// when no judgement speaks of a prior.
func (log *Log) PriorDid() (stopped int, dropped []string, seen bool) {
	for _, j := range log.judgements {
		seen = seen || j.Prior || j.PriorDropped != ""
		if j.Stop && j.Prior {
			stopped++
		}
		if j.PriorDropped != "" {
			dropped = append(dropped, j.PriorDropped)
		}
	}
	return stopped, dropped, seen
}

// idList holds the runs' ids, in the order of their first records, in
// one text: no pointer per run for the collector to follow, as a million
// strings would be.
type idList struct {
	text []byte
	ends []uint32 // where each id ends in text
}

func (l *idList) len() int { return len(l.ends) }

// bytes returns id i, in the list's own text.
func (l *idList) bytes(i int) []byte {
	start := uint32(0)
	if i > 0 {
		start = l.ends[i-1]
	}
	return l.text[start:l.ends[i]]
}

func (l *idList) at(i int) string { return string(l.bytes(i)) }

func (l *idList) add(id []byte) {
	l.text = append(l.text, id...)
	l.ends = append(l.ends, uint32(len(l.text)))
}

// recentRuns is how many of the runs seen last a record is looked for
// among before its id is hashed: an attempt's finished record follows its
// started one by about as many records as runs run at once.
const recentRuns = 16

// recent returns the place of id among the last recentRuns runs of the
// log, newest first.
func (log *Log) recent(id []byte) (int32, bool) {
	n := log.ids.len()
	for i := n - 1; i >= max(n-recentRuns, 0); i-- {
		if string(log.ids.bytes(i)) == string(id) {
			return int32(i), true
		}
	}
	return 0, false
}

// idIndex finds a run's place by its id: by a hash of the id, which takes
// a third of a map of the ids themselves, and in full for the ids whose
// hash another id took first.
type idIndex struct {
	seed     maphash.Seed
	byHash   map[uint64]int32
	overflow map[string]int32
}

func newIDIndex() idIndex {
	return idIndex{seed: maphash.MakeSeed(), byHash: map[uint64]int32{}, overflow: map[string]int32{}}
}

// find returns the place of id among ids.
func (x *idIndex) find(id string, ids *idList) (int32, bool) {
	if i, ok := x.byHash[maphash.String(x.seed, id)]; ok && string(ids.bytes(int(i))) == id {
		return i, true
	}
	i, ok := x.overflow[id]
	return i, ok
}

// place returns the place of id among ids, or places it at next (and
// reports added) when it has none: one hash, one lookup.
func (x *idIndex) place(id []byte, next int32, ids *idList) (i int32, added bool) {
	h := maphash.Bytes(x.seed, id)
	i, taken := x.byHash[h]
	switch {
	case !taken:
		x.byHash[h] = next
		return next, true
	case string(ids.bytes(int(i))) == string(id):
		return i, false
	}
	if i, ok := x.overflow[string(id)]; ok {
		return i, false
	}
	x.overflow[string(id)] = next
	return next, true
}

// ReadFile reads and folds the ledger at path. An unfinished last line is
// left out and counted in Torn; any other line that is not a valid record
// is an error naming the file and line. Runs still running when the last
// session ended are interrupted; those of a session without an end record
// are running (the session is live, or was killed: see MarkInterrupted).
func ReadFile(path string, o ReadOptions) (*Log, error) { return readPath(path, o, nil) }

// read folds a ledger from r, named name, of size bytes (0: unknown).
// progress, if set, is called with the bytes read so far.
func read(r io.Reader, name string, size int64, o ReadOptions, progress func(int64)) (*Log, error) {
	log := &Log{Name: name, byID: newIDIndex(), timeline: o.Attempts}
	if o.Attempts {
		log.open, log.texts, log.shares, log.cpus = map[[2]int32]int32{}, map[string]uint32{"": 0}, map[string]float32{}, map[string]int16{}
		log.gpuTexts = []string{""}
	}
	// The lines are scanned in parallel, block by block, and folded in
	// in order.
	work := func(b *block[scanned]) {
		var dec decoder
		b.out = make([]scanned, 0, bytes.Count(b.data, []byte{'\n'}))
		lines(b.data, func(k int, line []byte) {
			if b.err != nil {
				return
			}
			sc, err := scanLine(&dec, line, o.Attempts)
			if err != nil {
				b.err = fmt.Errorf("ledger %s:%d: %w", name, b.first+int32(k), err)
				return
			}
			b.out = append(b.out, sc)
		})
	}
	var lineErr error // a line's, which names the ledger and line
	apply := func(b *block[scanned]) error {
		if b.first == 1 && size > int64(len(b.data)) && len(b.out) > 0 {
			// Room for the runs the file holds, as its first block has
			// them: two records a run, lines as long.
			runs := int(size / int64(len(b.data)) * int64(len(b.out)) / 2)
			log.runs = slices.Grow(log.runs, runs)
			log.last = slices.Grow(log.last, runs)
			log.ids.ends = slices.Grow(log.ids.ends, runs)
		}
		off, no := b.off, b.first
		for k := range b.out {
			sc := &b.out[k]
			if err := log.apply(sc, off, no); err != nil {
				lineErr = fmt.Errorf("ledger %s:%d: %w", name, no, err)
				return lineErr
			}
			off += int64(sc.n)
			no++
		}
		log.Size = off
		if progress != nil {
			progress(log.Size)
		}
		lineErr = b.err
		return b.err
	}
	torn, err := eachBlock(r, work, apply)
	if err != nil {
		if err == lineErr {
			return nil, err
		}
		return nil, fmt.Errorf("read ledger %s: %w", name, err)
	}
	log.Torn = torn
	if log.End != nil {
		log.MarkInterrupted()
	}
	log.settle()
	return log, nil
}

// maxUnknownTypes bounds the types Log.Unknown names.
const maxUnknownTypes = 8

// settle gives the attempts that did not end an ending: those of a run
// still running in a live session run on; the others were interrupted,
// when their session wrote its end record, or else (it was killed) by its
// last record.
func (log *Log) settle() {
	if !log.timeline {
		return
	}
	stopped := uint8(slices.Index(endings, string(run.Interrupted)) + 1)
	for k := range log.attempts {
		a := &log.attempts[k]
		if a.ending != 0 {
			continue // it ended by its record, or was settled before
		}
		switch span := log.spans[a.Session]; {
		case span.Live && log.runs[a.Run].state == running:
			// It runs on.
		case span.End != 0:
			a.End, a.ending = span.End, stopped
		default:
			a.End, a.ending = span.Last, stopped
		}
	}
}

// scanned is a line as the fold takes it: its head, its timing (for a
// timeline), its length with its newline, and the line itself for a
// record decoded whole in order (a header, an end, a gpu_out, a rung).
type scanned struct {
	h    head
	t    timing
	line []byte
	n    int32
}

// scanLine reads what the fold needs of a line: its head and, with
// timeline, its timing; the part of reading a ledger that runs in
// parallel.
func scanLine(dec *decoder, line []byte, timeline bool) (scanned, error) {
	sc := scanned{n: int32(len(line) + 1), line: line}
	var t *timing
	if timeline {
		t = &sc.t
	}
	h, ok := dec.scan(line, t)
	if !ok {
		var err error
		if h, err = headOf(line); err != nil {
			return sc, fmt.Errorf("not a record: %w", err)
		}
		if t != nil && (string(h.typ) == TypeStarted || string(h.typ) == TypeFinished) {
			var s Started
			if err := json.Unmarshal(line, &s); err != nil {
				return sc, fmt.Errorf("not a record: %w", err)
			}
			*t = timing{time: s.Time, lane: s.Lane, gpus: s.GPUs, cpus: s.CPUs, request: s.Request}
		}
	}
	sc.h = h
	return sc, nil
}

// apply folds one scanned line, line number no at offset off, into the
// log, in order.
func (log *Log) apply(sc *scanned, off int64, no int32) error {
	h, line := &sc.h, sc.line
	t := &sc.t
	if string(h.typ) != TypeHeader && len(log.Sessions) == 0 {
		return fmt.Errorf("%q record before the first header", h.typ)
	}
	switch string(h.typ) {
	case TypeHeader:
		var rec Header
		if err := json.Unmarshal(line, &rec); err != nil {
			return fmt.Errorf("not a record: %w", err)
		}
		return log.header(&rec)
	case TypeEnd:
		if log.End != nil {
			return errors.New("second end record in a session")
		}
		end := new(End)
		if err := json.Unmarshal(line, end); err != nil {
			return fmt.Errorf("not a record: %w", err)
		}
		log.End = end
		log.sawTime(end.Time.UnixMilli())
		if log.timeline {
			log.spans[len(log.spans)-1].End = end.Time.UnixMilli()
		}
		return nil
	case TypeDensity:
		var rec Density
		if err := json.Unmarshal(line, &rec); err != nil {
			return fmt.Errorf("not a record: %w", err)
		}
		if rec.To < 1 {
			return errors.New("density record without its runs per GPU")
		}
		log.Densities = append(log.Densities, rec)
		log.sawTime(rec.Time.UnixMilli())
		return nil
	case TypeGPUOut:
		var rec GPUOut
		if err := json.Unmarshal(line, &rec); err != nil {
			return fmt.Errorf("not a record: %w", err)
		}
		if len(rec.GPUs) != 1 {
			return errors.New("gpu_out record without its GPU")
		}
		log.GPUsOut = append(log.GPUsOut, rec)
		log.sawTime(rec.Time.UnixMilli())
		return nil
	case TypeRung:
		var rec Rung
		if err := json.Unmarshal(line, &rec); err != nil {
			return fmt.Errorf("not a record: %w", err)
		}
		return log.rung(&rec)
	case TypeStarted, TypeFinished:
	default:
		// A newer nodepack's record: left out, and counted.
		if log.Unknown == nil {
			log.Unknown = map[string]int{}
		}
		typ := string(h.typ)
		if _, ok := log.Unknown[typ]; !ok && len(log.Unknown) >= maxUnknownTypes {
			typ = "…"
		}
		log.Unknown[typ]++
		return nil
	}
	if log.End != nil {
		return fmt.Errorf("%q record after the session's end", h.typ)
	}
	if !run.ValidID(string(h.id)) || h.attempt < 1 {
		return fmt.Errorf("%s record: bad run id %q or attempt %d", h.typ, h.id, h.attempt)
	}
	if string(h.typ) == TypeFinished && !h.hasExit {
		return errors.New("finished record without exit_code")
	}
	var reason uint8
	if string(h.typ) == TypeFinished {
		i := slices.Index(endings, string(h.reason))
		if i < 0 {
			return fmt.Errorf("finished record: unknown reason %q", h.reason)
		}
		reason = uint8(i + 1)
	}
	i, recent := log.recent(h.id)
	added := false
	if !recent {
		i, added = log.byID.place(h.id, int32(log.ids.len()), &log.ids)
	}
	if added {
		log.ids.add(h.id)
		log.runs = append(log.runs, runState{index: -1})
		log.last = append(log.last, lastAt{})
	}
	r := &log.runs[i]
	if r.state == succeeded && (string(h.typ) == TypeStarted || run.Reason(endings[reason-1]) != run.OK) {
		// Nothing undoes a success: a record that would (a tampered or
		// damaged ledger) is refused, not taken as a reason to run the
		// run again.
		what := string(h.typ)
		if what == TypeFinished {
			what = "finished (" + string(h.reason) + ")"
		}
		return fmt.Errorf("%s record of run %s (attempt %d) after its success", what, h.id, h.attempt)
	}
	r.attempts = max(r.attempts, int32(h.attempt))
	r.session = int32(len(log.Sessions) - 1)
	r.retired = false
	at := span{off: off, n: sc.n - 1, no: no}
	if string(h.typ) == TypeStarted {
		log.last[i].started = at
		r.state = running
		if log.timeline {
			log.startAttempt(t, i, h.attempt)
		}
		return nil
	}
	log.last[i].finished = at
	if h.steps != nil && bytes.Contains(h.steps, []byte(`"lost"`)) && run.Reason(endings[reason-1]) != run.Pruned {
		log.Lost.add(line, h.steps) // a pruned run's, recorded by an older nodepack, is spent, not lost
	}
	r.class = 0
	switch run.Reason(endings[reason-1]) {
	case run.OK:
		r.state = succeeded
	case run.Failed, run.TimedOut:
		r.state = failed
		r.class = classCode(h.classOf())
		if h.retry {
			r.state = running // between attempts
		}
	case run.Interrupted:
		r.state = interrupted
	case run.Pruned:
		r.state = pruned
	case run.Paused:
		r.state = paused
	}
	if log.timeline {
		log.endAttempt(t, i, h.attempt, reason, r.class)
	}
	return nil
}

// header folds a session's header in.
func (log *Log) header(rec *Header) error {
	if rec.Format != Format {
		return fmt.Errorf("header format %q, want %q", rec.Format, Format)
	}
	if log.End == nil && len(log.Sessions) > 0 {
		log.MarkInterrupted() // the previous session was killed
	}
	log.Sessions = append(log.Sessions, *rec)
	log.End = nil
	log.GPUsOut = nil // a new session may run on another node
	for i := range log.runs {
		log.runs[i].retired = false
	}
	log.Retire(rec.Retired)
	if log.timeline {
		if n := len(log.spans); n > 0 {
			log.spans[n-1].Live = false
		}
		t := rec.Time.UnixMilli()
		log.spans = append(log.spans, SessionSpan{Start: t, Last: t, Live: true})
		clear(log.open)
	}
	return nil
}

// rung folds a judgement of the pruning policy in.
func (log *Log) rung(rec *Rung) error {
	if rec.Rung == nil || *rec.Rung < 0 || !run.ValidID(rec.ID) {
		return errors.New("rung record without its run or rung")
	}
	j := run.Judgement{Run: rec.ID, Metric: rec.Metric, Rung: *rec.Rung, Step: rec.RungStep, At: rec.Step, Value: math.NaN(), Cutoff: math.NaN(), Others: rec.Others, Stop: rec.Pruned || rec.Paused, Pause: rec.Paused,
		Forecasted: rec.Forecast != nil && rec.Optimistic != nil, Prior: rec.Prior, PriorDropped: rec.PriorDropped}
	for _, f := range []struct {
		to   *float64
		from *float64
	}{{&j.Value, rec.Value}, {&j.Cutoff, rec.Cutoff}, {&j.Forecast, rec.Forecast}, {&j.Optimistic, rec.Optimistic}} {
		if f.from != nil {
			*f.to = *f.from
		}
	}
	log.judgements = append(log.judgements, j)
	if i, ok := log.Find(rec.ID); ok && (rec.Pruned || rec.Paused) && log.runs[i].state == running {
		// Judged out: final (or paused), also when the session is killed
		// while the run shuts down, before its end is recorded.
		log.runs[i].state = pruned
		if rec.Paused {
			log.runs[i].state = paused
		}
	}
	log.sawTime(rec.Time.UnixMilli())
	return nil
}

// sawTime notes a record's time in its session's span.
func (log *Log) sawTime(t int64) {
	if log.timeline {
		s := &log.spans[len(log.spans)-1]
		s.Last = max(s.Last, t)
	}
}

// startAttempt keeps a started record's attempt, for a timeline.
func (log *Log) startAttempt(s *timing, i int32, n int) {
	t := s.time.UnixMilli()
	log.sawTime(t)
	gpus := strings.Join(s.gpus, ",")
	g, ok := log.texts[gpus]
	if !ok {
		g = uint32(len(log.gpuTexts))
		log.texts[gpus] = g
		log.gpuTexts = append(log.gpuTexts, gpus)
	}
	a := Attempt{Run: i, N: int32(n), Start: t, Session: int32(len(log.Sessions) - 1), gpus: g, CPUs: 1, GPUShare: float32(len(s.gpus))}
	if s.lane != nil {
		a.Lane = int16(*s.lane)
	}
	if n, ok := log.cpus[s.cpus]; ok {
		a.CPUs = n
	} else {
		if ids, err := pack.ParseCPUList(s.cpus); err == nil && len(ids) > 0 {
			a.CPUs = int16(min(len(ids), math.MaxInt16))
		}
		log.cpus[s.cpus] = a.CPUs
	}
	if len(s.gpus) == 1 && s.request != "" {
		share, ok := log.shares[s.request]
		if !ok {
			share = 1
			if q, err := pack.ParseRequest(s.request, pack.Request{}, 0); err == nil && q.GPUs == 0 && q.GPUShare > 0 {
				share = float32(q.GPUShare) / pack.GPUWhole
			}
			log.shares[s.request] = share
		}
		a.GPUShare = share
	}
	log.open[[2]int32{i, a.N}] = int32(len(log.attempts))
	log.attempts = append(log.attempts, a)
}

// endAttempt ends a started attempt, for a timeline.
func (log *Log) endAttempt(f *timing, i int32, n int, reason, class uint8) {
	t := f.time.UnixMilli()
	log.sawTime(t)
	key := [2]int32{i, int32(n)}
	if k, ok := log.open[key]; ok {
		delete(log.open, key)
		a := &log.attempts[k]
		a.End, a.ending, a.class = t, reason, class
	}
}

// MarkInterrupted marks the runs that the last session left running as
// interrupted: for a session known to be over (it wrote its end record, or
// its process is gone).
func (log *Log) MarkInterrupted() {
	for i := range log.runs {
		if log.runs[i].state == running {
			log.runs[i].state = interrupted
		}
	}
}

// Live reports whether the last session has not written its end record.
func (log *Log) Live() bool { return len(log.Sessions) > 0 && log.End == nil }

// Header returns the last session's header; the zero record if none.
func (log *Log) Header() Header {
	if len(log.Sessions) == 0 {
		return Header{}
	}
	return log.Sessions[len(log.Sessions)-1]
}

// Count returns how many runs of the last session's sweep are in each
// state; retired runs are left out.
func (log *Log) Count() map[State]int {
	counts := make(map[State]int)
	for i := range log.runs {
		if r := &log.runs[i]; !r.retired {
			counts[states[r.state]]++
		}
	}
	return counts
}

// Retire marks the runs ids as not part of the sweep, as a header that
// lists them in Retired does: Count and Members leave them out.
func (log *Log) Retire(ids []string) {
	for _, id := range ids {
		if i, ok := log.Find(id); ok {
			log.runs[i].retired = true
		}
	}
}

// Members returns how many runs of the last session's sweep the ledger
// knows: all but the retired ones.
func (log *Log) Members() int {
	n := 0
	for i := range log.runs {
		if !log.runs[i].retired {
			n++
		}
	}
	return n
}

// PriorAttempts returns how many attempts the run had in the log, for
// execute.Options.PriorAttempts.
func (log *Log) PriorAttempts(runID string) int {
	if i, ok := log.Find(runID); ok {
		return int(log.runs[i].attempts)
	}
	return 0
}

// Fields says what LastFields and LastAllFields decode of a finished
// record.
type Fields uint8

const (
	// AllFields decodes all of it, as Last and LastAll do.
	AllFields Fields = iota
	// NoCurves decodes it up to its curves and leaves them, and what
	// follows them (steps, metrics_skipped), out: for a reader that shows
	// no curve, in about half the time. The line was read whole when the
	// fold read it.
	NoCurves
	// ParamsAndMetrics decodes of both records only the run and attempt
	// (id, index, attempt), the started record's params and the finished
	// record's metrics, as NoCurves up to the curves: for a reader that
	// needs only those (the columns of a table).
	ParamsAndMetrics
)

// LastFields is Last, decoding the finished records' fields as fields
// says.
func (log *Log) LastFields(places []int, fields Fields, f func(i int, s *Started, fin *Finished) error) error {
	if len(places) == 0 {
		return nil
	}
	return log.lastOf(places, fields, f)
}

// LastAllFields is LastAll, decoding the finished records' fields as
// fields says.
func (log *Log) LastAllFields(fields Fields, f func(i int, s *Started, fin *Finished) error) error {
	return log.lastOf(nil, fields, f)
}

// Last reads the last started and finished records of the runs at places
// from the log's file, in one pass in the file's order, and calls f with
// each run's place and its records (nil for one it has none of), which are
// f's to keep. A run's two records come together once both are read. No
// places is no call (LastAll is every run). A file that no longer holds
// what was read (a restart moved it away) is an error.
func (log *Log) Last(places []int, f func(i int, s *Started, fin *Finished) error) error {
	if len(places) == 0 {
		return nil
	}
	return log.lastOf(places, AllFields, f)
}

// LastAll is Last of every run of the log.
func (log *Log) LastAll(f func(i int, s *Started, fin *Finished) error) error {
	return log.lastOf(nil, AllFields, f)
}

func (log *Log) lastOf(places []int, fields Fields, f func(i int, s *Started, fin *Finished) error) error {
	file, err := openRead(log.Name)
	if err != nil {
		return err
	}
	defer file.Close()
	p := lastPairs{log: log, f: f, pending: map[int32]*pair{}, fields: fields}
	if places == nil {
		return p.all(file)
	}
	type want struct {
		span
		place    int32
		finished bool
	}
	var wants []want
	for _, i := range places {
		l := log.last[i]
		if l.started.n > 0 {
			wants = append(wants, want{l.started, int32(i), false})
		}
		if l.finished.n > 0 {
			wants = append(wants, want{l.finished, int32(i), true})
		}
	}
	slices.SortFunc(wants, func(a, b want) int { return cmp.Compare(a.off, b.off) })
	br := bufio.NewReaderSize(file, 1<<20)
	var pos int64
	var buf []byte
	for _, w := range wants {
		if gap := w.off - pos; gap > int64(br.Buffered())+1<<20 {
			// Far ahead (a few runs of a big ledger): seek, rather than
			// read all that lies between.
			if _, err := file.Seek(w.off, io.SeekStart); err != nil {
				return log.changed(err)
			}
			br.Reset(file)
		} else if _, err := br.Discard(int(gap)); err != nil {
			return log.changed(err)
		}
		buf = slices.Grow(buf[:0], int(w.n))[:w.n]
		if _, err := io.ReadFull(br, buf); err != nil {
			return log.changed(err)
		}
		pos = w.off + int64(w.n)
		st, fin, err := p.decode(&log.dec, buf, w.finished)
		if err != nil {
			return err
		}
		if id := string(log.ids.bytes(int(w.place))); fin != nil && fin.ID != id || st != nil && st.ID != id {
			return log.changed(nil)
		}
		if err := p.take(w.place, st, fin); err != nil {
			return err
		}
	}
	return nil
}

// lastPairs gathers a run's last started and finished records for Last.
type lastPairs struct {
	log     *Log
	f       func(i int, s *Started, fin *Finished) error
	pending map[int32]*pair
	fields  Fields
}

type pair struct {
	s    *Started
	fin  *Finished
	left int
}

// decode decodes line, a started or a finished record, with dec.
func (p *lastPairs) decode(dec *decoder, line []byte, finished bool) (*Started, *Finished, error) {
	log := p.log
	if finished {
		fin := new(Finished)
		var stop []byte
		if p.fields != AllFields {
			stop = []byte("curves")
		}
		if !dec.finishedUntil(line, stop, fin, p.fields == ParamsAndMetrics) {
			*fin = Finished{}
			if json.Unmarshal(line, fin) != nil || fin.Type != TypeFinished {
				return nil, nil, log.changed(nil)
			}
			if stop != nil {
				fin.Curves, fin.Steps, fin.MetricsSkipped = nil, nil, 0
			}
		}
		return nil, fin, nil
	}
	s := new(Started)
	if !dec.startedOf(line, s, p.fields == ParamsAndMetrics) {
		*s = Started{}
		if json.Unmarshal(line, s) != nil || s.Type != TypeStarted {
			return nil, nil, log.changed(nil)
		}
	}
	return s, nil, nil
}

// take takes run i's last started or finished record, and calls f once
// the run has all it has.
func (p *lastPairs) take(i int32, s *Started, fin *Finished) error {
	log := p.log
	pr := p.pending[i]
	if pr == nil {
		pr = &pair{left: 1}
		if l := log.last[i]; l.started.n > 0 && l.finished.n > 0 {
			pr.left = 2
		}
		p.pending[i] = pr
	}
	if s != nil {
		pr.s = s
	}
	if fin != nil {
		pr.fin = fin
	}
	if pr.left--; pr.left > 0 {
		return nil
	}
	delete(p.pending, i)
	return p.f(int(i), pr.s, pr.fin)
}

// all reads the whole file through for Last of every run: the lines to
// decode are marked by number, a bit each, rather than listed and sorted,
// and decoded in parallel, block by block.
func (p *lastPairs) all(file *os.File) error {
	log := p.log
	var marks []uint64
	mark := func(no int32) {
		for int(no)/64 >= len(marks) {
			marks = append(marks, 0)
		}
		marks[no/64] |= 1 << (no % 64)
	}
	for _, l := range log.last {
		if l.started.n > 0 {
			mark(l.started.no)
		}
		if l.finished.n > 0 {
			mark(l.finished.no)
		}
	}
	type decoded struct {
		place int32
		s     *Started
		fin   *Finished
	}
	work := func(b *block[decoded]) {
		var dec decoder
		dp := &lastPairs{log: log, fields: p.fields}
		lines(b.data, func(k int, line []byte) {
			no := b.first + int32(k)
			if b.err != nil || int(no)/64 >= len(marks) || marks[no/64]&(1<<(no%64)) == 0 {
				return
			}
			// The type comes first in what json.Marshal writes; else read it.
			var finished bool
			switch {
			case bytes.HasPrefix(line, []byte(`{"type":"finished"`)):
				finished = true
			case bytes.HasPrefix(line, []byte(`{"type":"started"`)):
			default:
				h, err := headOf(line)
				if err != nil {
					b.err = log.changed(nil)
					return
				}
				finished = string(h.typ) == TypeFinished
			}
			st, fin, err := dp.decode(&dec, line, finished)
			if err != nil {
				b.err = err
				return
			}
			id := ""
			if fin != nil {
				id = fin.ID
			} else {
				id = st.ID
			}
			i, ok := log.byID.find(id, &log.ids)
			if !ok {
				b.err = log.changed(nil)
				return
			}
			if l := log.last[i]; finished && l.finished.no != no || !finished && l.started.no != no {
				b.err = log.changed(nil)
				return
			}
			b.out = append(b.out, decoded{i, st, fin})
		})
	}
	apply := func(b *block[decoded]) error {
		for _, d := range b.out {
			if err := p.take(d.place, d.s, d.fin); err != nil {
				return err
			}
		}
		return b.err
	}
	_, err := eachBlock(io.LimitReader(file, log.Size), work, apply)
	if err != nil {
		var pathErr *os.PathError
		if errors.As(err, &pathErr) {
			return log.changed(err)
		}
		return err
	}
	if len(p.pending) > 0 {
		return log.changed(nil) // a record the file no longer holds
	}
	return nil
}

// changed is the error of a Last that did not find what the log read.
func (log *Log) changed(err error) error {
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("ledger %s: changed since it was read (started over?): read it again", log.Name)
	}
	return fmt.Errorf("read ledger %s: %w", log.Name, err)
}

// maxHeaderLine bounds the first line FirstHeader reads: a header holds
// the node (every CPU and GPU), a few hundred KiB on the largest nodes.
const maxHeaderLine = 16 << 20

// FirstHeader returns the header of the first session of the ledger at
// path, reading no further than its first line.
func FirstHeader(path string) (Header, error) {
	f, err := openRead(path)
	if err != nil {
		return Header{}, err
	}
	defer f.Close()
	line, err := bufio.NewReader(io.LimitReader(f, maxHeaderLine)).ReadBytes('\n')
	if err != nil {
		return Header{}, fmt.Errorf("ledger %s:1: %w", path, noLine(err))
	}
	var h Header
	if err := json.Unmarshal(line, &h); err != nil || h.Type != TypeHeader {
		return Header{}, fmt.Errorf("ledger %s:1: not a header record", path)
	}
	return h, nil
}

// noLine says what an end of file before the first line's end means.
func noLine(err error) error {
	if err == io.EOF {
		return errors.New("no complete first line")
	}
	return err
}
