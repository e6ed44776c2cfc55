package ledger

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"iter"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/pack/schedule"
	"github.com/nodepack/nodepack/resources/usage"
	"github.com/nodepack/nodepack/runner/failure"
	"github.com/nodepack/nodepack/runner/run"
	"github.com/nodepack/nodepack/runner/sweep"
)

// Format names the ledger's layout; every header record carries it.
const Format = "nodepack.ledger/v1"

// Ledger record types.
const (
	TypeHeader   = "header"   // a session begins: who, what, where
	TypeStarted  = "started"  // an attempt's process runs
	TypeFinished = "finished" // an attempt ended
	TypeEnd      = "end"      // the session ended without being killed
	typeGPUOut   = "gpu_out"  // a GPU reported a fault and was taken out of use
	typeRung     = "rung"     // a run was judged at a rung of the pruning policy (Record.Rung says)
)

// Record is one line of a ledger: a JSON object whose "type" says
// which of the fields below it holds. A ledger is a sequence of sessions,
// each a header, the started and finished records of its attempts, and,
// unless the session was killed, an end record.
type Record struct {
	Type string    `json:"type"`
	Time time.Time `json:"time"`

	// Header.
	Format  string            `json:"format,omitempty"`
	Version string            `json:"version,omitempty"`
	Command []string          `json:"command,omitempty"`
	Cwd     string            `json:"cwd,omitempty"`  // where Command ran
	Host    string            `json:"host,omitempty"` // also in started records
	PID     int               `json:"pid,omitempty"`  // header: the runner's; started: the run's
	Shard   *sweep.Shard      `json:"shard,omitempty"`
	Total   *int              `json:"total,omitempty"` // runs of this shard, when the source knows
	Node    json.RawMessage   `json:"node,omitempty"`
	Plan    json.RawMessage   `json:"plan,omitempty"`
	Sweep   *sweep.Definition `json:"sweep,omitempty"`
	// Retired lists the runs that earlier sessions of this ledger recorded
	// and that are not part of this session's sweep (its task file lost
	// those lines, say): they are left out of its counts.
	Retired []string `json:"retired,omitempty"`

	// Started and finished.
	ID      string   `json:"id,omitempty"`
	Index   int      `json:"index,omitempty"`
	Origin  string   `json:"origin,omitempty"`
	Attempt int      `json:"attempt,omitempty"`
	Lane    *int     `json:"slot,omitempty"` // its lane, NODEPACK_SLOT (the key is the variable's name)
	GPUs    []string `json:"gpus,omitempty"` // UUIDs
	CPUs    string   `json:"cpus,omitempty"` // "0-3,8"
	// Request is what the attempt held its GPUs, CPUs and memory for, as
	// pack.ParseRequest reads it ("gpus=0.25 gpu_mem=12GiB cpus=4"); in a
	// finished record, what it held at its end (gpu_mem=auto measures a
	// run and shrinks its claim to what it uses).
	Request string `json:"request,omitempty"`
	Stdout  string `json:"stdout,omitempty"`
	Stderr  string `json:"stderr,omitempty"`
	// Params (started) are the run's parameters, as its params.json has
	// them; none for a task-file line.
	Params json.RawMessage `json:"params,omitempty"`

	// Finished.
	ExitCode    *int        `json:"exit_code,omitempty"`
	Signal      string      `json:"signal,omitempty"`
	Reason      run.Reason  `json:"reason,omitempty"`
	Retry       bool        `json:"retry,omitempty"`
	Error       string      `json:"error,omitempty"`
	Seconds     float64     `json:"duration_s,omitempty"`
	MaxRSS      uint64      `json:"max_rss_bytes,omitempty"`
	CPUSeconds  float64     `json:"cpu_s,omitempty"`
	TreeRSSPeak uint64      `json:"tree_rss_peak_bytes,omitempty"`
	GPUUsage    []usage.GPU `json:"gpu_usage,omitempty"`
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

	// Rung (a run judged at a rung of the pruning policy, the record of a
	// schedule.Judgement): its Attempt, the Metric, the rung's index and
	// step, the step the run reported (Step) and its Value there (null
	// when not a finite number), the Cutoff it was compared with (null
	// when no run reached the rung before), how many had (Others), and
	// whether it was stopped (Pruned).
	Metric   string   `json:"metric,omitempty"`
	Rung     *int     `json:"rung,omitempty"`
	RungStep float64  `json:"rung_step,omitempty"`
	Step     float64  `json:"step,omitempty"`
	Value    *float64 `json:"value,omitempty"`
	Cutoff   *float64 `json:"cutoff,omitempty"`
	Others   int      `json:"others,omitempty"`
	Pruned   bool     `json:"pruned,omitempty"`

	// End.
	Note     string `json:"note,omitempty"`     // how the session ended
	Deferred int    `json:"deferred,omitempty"` // runs left for the next session
}

// FileName is the name of shard index's ledger in a sweep of count
// shards: ledger.jsonl when the sweep is not sharded.
func FileName(index, count int) string {
	if count <= 1 {
		return "ledger.jsonl"
	}
	return fmt.Sprintf("ledger-%d-of-%d.jsonl", index, count)
}

// Files lists the ledgers in dir, sorted; backups are not included.
func Files(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, e := range entries {
		if name := e.Name(); strings.HasPrefix(name, "ledger") && strings.HasSuffix(name, ".jsonl") && !e.IsDir() {
			files = append(files, filepath.Join(dir, name))
		}
	}
	return files, nil
}

// State is where a run stands according to its ledger.
type State string

const (
	StatePending     State = "pending"     // no record yet
	StateRunning     State = "running"     // started in the live session, not finished
	StateSucceeded   State = "succeeded"   // its last attempt exited 0
	StateFailed      State = "failed"      // its last attempt failed or timed out, and no retry followed
	StateInterrupted State = "interrupted" // stopped by the runner, or its session ended (or was killed) while it ran
	StatePruned      State = "pruned"      // stopped early by the pruning policy: neither failed nor run again
)

// Run is one run's history in a ledger.
type Run struct {
	ID       string
	State    State
	Attempts int // the highest attempt number recorded
	Session  int // index in Log.Sessions of its last record
	// Started and Finished are its last started and finished records (nil
	// if none). A Log read for a resume or a status (ReadDir, Open) keeps
	// them only for the runs that did not succeed, which is what those
	// need, so that a ledger of millions of runs fits in little memory;
	// Read and ReadFile keep them for every run.
	Started  *Record
	Finished *Record
	// Retired says the last session's header listed the run as not part
	// of its sweep; Count leaves it out.
	Retired bool

	seen              bool // Dir.See found it in the sweep, at index
	index             int
	started, finished kept // where Started and Finished are, until they are decoded
}

// kept is where a line of a ledger is, to be decoded at the end of a lean
// read if its run still needs it then. A ledger holds a record per run in
// a million, so it is small.
type kept struct {
	off   int64
	n, no int32 // length and line number; n is 0 for none
}

// Log is what a ledger file holds, folded by run.
type Log struct {
	Name     string
	Sessions []Record // the headers, oldest first
	End      *Record  // the last session's end record; nil while it runs or if it was killed
	Runs     map[string]*Run
	Order    []string // run ids in order of first appearance
	// GPUsOut are the last session's gpu_out records: the GPUs it took out
	// of use after a fault (GPUs holds the UUID, Note the fault).
	GPUsOut []Record
	// Size is the length of the complete lines; Torn the length of an
	// unfinished last line that was left out (a write in progress, or the
	// node lost power during one).
	Size, Torn int64

	seen  atomic.Int64 // runs Dir.See found
	lean  bool         // keep the records of the runs that did not succeed only
	ident os.FileInfo  // the file read, when it did not change during the read
	// each, if not nil, is called with every record once it is folded in,
	// the place of its run among the log's (-1 for a header or an end) and
	// the length of its line.
	each func(rec *Record, run int, size int)
	// A streamed log (see Stream) keeps its runs slim: their ids and
	// slims, in the order of first appearance, found by id in byID, and no
	// record; Runs and Order are nil. scratch is the record each is called
	// with.
	stream  bool
	ids     []string
	slims   []slimRun
	byID    idIndex
	scratch Record
	decoder decoder
	// judgements are the rung records of every session, in order.
	judgements []schedule.Judgement
}

// Judgements returns the judgements of the pruning policy the ledger
// records, every session's, in order: what a resumed sweep replays.
func (log *Log) Judgements() []schedule.Judgement { return log.judgements }

// judgementOf reads a rung record.
func judgementOf(rec *Record) schedule.Judgement {
	j := schedule.Judgement{Run: rec.ID, Metric: rec.Metric, Rung: *rec.Rung, Step: rec.RungStep, At: rec.Step, Value: math.NaN(), Cutoff: math.NaN(), Others: rec.Others, Stop: rec.Pruned}
	if rec.Value != nil {
		j.Value = *rec.Value
	}
	if rec.Cutoff != nil {
		j.Cutoff = *rec.Cutoff
	}
	return j
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
func (x *idIndex) find(id string, ids []string) (int32, bool) {
	if i, ok := x.byHash[maphash.String(x.seed, id)]; ok && ids[i] == id {
		return i, true
	}
	i, ok := x.overflow[id]
	return i, ok
}

// add notes that id is at place i.
func (x *idIndex) add(id string, i int32) {
	h := maphash.String(x.seed, id)
	if _, taken := x.byHash[h]; taken {
		x.overflow[id] = i
		return
	}
	x.byHash[h] = i
}

// slimRun is what a streamed log keeps of a run besides its id: a dozen
// bytes, where a Run takes a hundred.
type slimRun struct {
	attempts, session int32
	state             uint8 // in slimStates
	retired           bool
}

var slimStates = []State{StatePending, StateRunning, StateSucceeded, StateFailed, StateInterrupted, StatePruned}

// run returns run i of a streamed log as a Run of its own.
func (log *Log) run(i int) *Run {
	s := log.slims[i]
	return &Run{ID: log.ids[i], State: slimStates[s.state], Attempts: int(s.attempts), Session: int(s.session), Retired: s.retired}
}

// keep stores r as run i of a streamed log.
func (log *Log) keep(i int, r *Run) {
	state := max(slices.Index(slimStates, r.State), 0)
	log.slims[i] = slimRun{attempts: int32(r.Attempts), session: int32(r.Session), state: uint8(state), retired: r.Retired}
}

// Len returns how many runs the log has a record of.
func (log *Log) Len() int {
	if log.stream {
		return len(log.ids)
	}
	return len(log.Order)
}

// At returns the i-th run the log has a record of, in the order of their
// first records. The Run is the log's own, that changes with the log,
// except in a streamed log, which makes one for each call.
func (log *Log) At(i int) *Run {
	if log.stream {
		return log.run(i)
	}
	return log.Runs[log.Order[i]]
}

// find returns the run with id and its place among the log's runs (-1 in
// a log that is not streamed); nil if the log has none. A streamed log's
// run is a copy: a change is kept with keep.
func (log *Log) find(id string) (*Run, int) {
	if !log.stream {
		return log.Runs[id], -1
	}
	if i, ok := log.byID.find(id, log.ids); ok {
		return log.run(int(i)), int(i)
	}
	return nil, -1
}

// all calls f with every run, in no particular order; what f changes is
// kept.
func (log *Log) all(f func(*Run)) {
	if log.stream {
		for i := range log.ids {
			r := log.run(i)
			f(r)
			log.keep(i, r)
		}
		return
	}
	for _, r := range log.Runs {
		f(r)
	}
}

// readLedger reads a ledger. An unfinished last line is left out and
// counted in Torn; any other line that is not a valid record is an error
// naming name and the line. Runs still running when the last session
// ended are interrupted; those of a session without an end record are
// running (the session is live, or was killed: see Stop).
func readLedger(r io.Reader, name string) (*Log, error) { return read(r, name, nil, nil, false) }

// read reads a ledger. With lean, which reads the same bytes as r, it
// keeps the records of the runs that did not succeed only (see Run),
// and reads them again from lean at the end. With stream, it keeps no
// record (see Stream).
func read(r io.Reader, name string, lean io.ReaderAt, each func(rec *Record, run int, size int), stream bool) (*Log, error) {
	log := &Log{Name: name, lean: lean != nil, each: each, stream: stream, decoder: decoder{alias: stream}}
	if stream {
		log.byID = newIDIndex()
	} else {
		log.Runs = make(map[string]*Run)
	}
	br := bufio.NewReaderSize(r, 1<<20)
	lineNo := 1
	for ; ; lineNo++ {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			// A line longer than the buffer (a header with a big node):
			// read the rest of it.
			long := append([]byte(nil), line...)
			var rest []byte
			rest, err = br.ReadBytes('\n')
			line = append(long, rest...)
		}
		if err == io.EOF {
			log.Torn = int64(len(line))
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read ledger %s: %w", name, err)
		}
		rec, at, err := log.add(line[:len(line)-1], log.Size, lineNo)
		if err != nil {
			return nil, fmt.Errorf("ledger %s:%d: %w", name, lineNo, err)
		}
		if log.each != nil && rec != nil {
			log.each(rec, at, len(line))
		}
		log.Size += int64(len(line))
	}
	if lean != nil {
		// Decode the records of the runs that did not succeed, for a
		// status to show.
		var buf []byte
		for _, run := range log.Runs {
			if run == nil {
				continue
			}
			for _, k := range []struct {
				kept *kept
				rec  **Record
			}{{&run.started, &run.Started}, {&run.finished, &run.Finished}} {
				if k.kept.n == 0 {
					continue
				}
				buf = slices.Grow(buf[:0], int(k.kept.n))[:k.kept.n]
				if _, err := lean.ReadAt(buf, k.kept.off); err != nil {
					return nil, fmt.Errorf("read ledger %s: %w", name, err)
				}
				rec := new(Record)
				if err := json.Unmarshal(buf, rec); err != nil {
					return nil, fmt.Errorf("ledger %s:%d: not a record: %w", name, k.kept.no, err)
				}
				*k.rec, *k.kept = rec, kept{}
			}
		}
	}
	if log.End != nil {
		log.MarkInterrupted()
	}
	return log, nil
}

// add folds one complete line, line number no at offset off, into the log,
// and returns its record when it decoded the whole of it (a lean read
// takes only the head of most) and, for a streamed log, the place of its
// run (else -1).
func (log *Log) add(line []byte, off int64, no int) (*Record, int, error) {
	var h head
	fast := false
	if log.lean {
		h, fast = scanHead(line)
	}
	var rec *Record
	if !fast || string(h.typ) == TypeHeader || string(h.typ) == TypeEnd || string(h.typ) == typeGPUOut || string(h.typ) == typeRung {
		rec = new(Record)
		if log.stream {
			// The record lives until the next line: each may not keep it,
			// and a header or an end is copied where it is kept.
			log.scratch = Record{}
			rec = &log.scratch
		}
		if !log.decoder.decode(line, rec) {
			*rec = Record{}
			if err := json.Unmarshal(line, rec); err != nil {
				return nil, -1, fmt.Errorf("not a record: %w", err)
			}
		}
		h = head{typ: []byte(rec.Type), id: []byte(rec.ID), reason: []byte(rec.Reason), attempt: rec.Attempt, retry: rec.Retry, exitCode: rec.ExitCode != nil}
	}
	typ := string(h.typ)
	if typ != TypeHeader && len(log.Sessions) == 0 {
		return nil, -1, fmt.Errorf("%q record before the first header", typ)
	}
	switch typ {
	case TypeHeader:
		if rec.Format != Format {
			return nil, -1, fmt.Errorf("header format %q, want %q", rec.Format, Format)
		}
		if log.End == nil && len(log.Sessions) > 0 {
			log.MarkInterrupted() // the previous session was killed
		}
		log.Sessions = append(log.Sessions, *rec)
		log.End = nil
		log.GPUsOut = nil // a new session may r on another node
		log.all(func(r *Run) { r.Retired = false })
		for _, id := range rec.Retired {
			if r, i := log.find(id); r != nil {
				r.Retired = true
				if i >= 0 {
					log.keep(i, r)
				}
			}
		}
		return rec, -1, nil
	case TypeEnd:
		if log.End != nil {
			return nil, -1, errors.New("second end record in a session")
		}
		end := *rec
		log.End = &end
		return rec, -1, nil
	case typeGPUOut:
		if len(rec.GPUs) != 1 {
			return nil, -1, errors.New("gpu_out record without its GPU")
		}
		log.GPUsOut = append(log.GPUsOut, *rec)
		return rec, -1, nil
	case typeRung:
		if rec.Rung == nil || *rec.Rung < 0 || !run.ValidID(rec.ID) {
			return nil, -1, errors.New("rung record without its run or rung")
		}
		log.judgements = append(log.judgements, judgementOf(rec))
		r, at := log.find(rec.ID)
		if rec.Pruned && r != nil && r.State == StateRunning {
			// Judged out: final, also when the session is killed while
			// the run shuts down, before its end is recorded.
			r.State = StatePruned
			if log.stream {
				log.keep(at, r)
			}
		}
		return rec, at, nil
	case TypeStarted, TypeFinished:
	default:
		return nil, -1, fmt.Errorf("unknown record type %q", typ)
	}
	if log.End != nil {
		return nil, -1, fmt.Errorf("%q record after the session's end", typ)
	}
	if !run.ValidID(string(h.id)) || h.attempt < 1 {
		return nil, -1, fmt.Errorf("%s record: bad run id %q or attempt %d", typ, h.id, h.attempt)
	}
	r, at := log.find(string(h.id))
	if r == nil {
		id := string(h.id)
		if log.stream {
			at = len(log.ids)
			log.byID.add(id, int32(at))
			log.ids, log.slims = append(log.ids, id), append(log.slims, slimRun{})
			r = &Run{ID: id}
		} else {
			r = &Run{ID: id}
			log.Runs[id] = r
			log.Order = append(log.Order, id)
		}
	}
	r.Attempts = max(r.Attempts, h.attempt)
	r.Session = len(log.Sessions) - 1
	r.Retired = false
	keep := func() kept {
		if rec != nil || log.stream {
			return kept{}
		}
		return kept{off: off, n: int32(len(line)), no: int32(no)}
	}
	if log.stream {
		// Keep no record (the one read is scratch), and the run slim.
		defer func() { log.keep(at, r) }()
	}
	if typ == TypeStarted {
		r.Started, r.started = rec, keep()
		r.State = StateRunning
		return rec, at, nil
	}
	if !h.exitCode {
		return nil, -1, errors.New("finished record without exit_code")
	}
	r.Finished, r.finished = rec, keep()
	switch run.Reason(h.reason) {
	case run.OK:
		r.State = StateSucceeded
		if log.lean {
			r.Started, r.Finished, r.started, r.finished = nil, nil, kept{}, kept{}
		}
	case run.Failed, run.TimedOut:
		r.State = StateFailed
		if h.retry {
			r.State = StateRunning // between attempts
		}
	case run.Interrupted:
		r.State = StateInterrupted
	case run.Pruned:
		r.State = StatePruned
		if log.lean {
			r.Started, r.Finished, r.started, r.finished = nil, nil, kept{}, kept{}
		}
	default:
		return nil, -1, fmt.Errorf("finished record: unknown reason %q", h.reason)
	}
	return rec, at, nil
}

// MarkInterrupted marks the runs that the last session left running as
// interrupted: for a session known to be over (it wrote its end record, or
// its process is gone).
func (log *Log) MarkInterrupted() {
	log.all(func(run *Run) {
		if run.State == StateRunning {
			run.State = StateInterrupted
		}
	})
}

// Live reports whether the last session has not written its end record.
func (log *Log) Live() bool { return len(log.Sessions) > 0 && log.End == nil }

// Header returns the last session's header; the zero record if none.
func (log *Log) Header() Record {
	if len(log.Sessions) == 0 {
		return Record{}
	}
	return log.Sessions[len(log.Sessions)-1]
}

// Count returns how many runs of the last session's sweep are in each
// state; retired runs are left out.
func (log *Log) Count() map[State]int {
	counts := make(map[State]int)
	log.all(func(run *Run) {
		if !run.Retired {
			counts[run.State]++
		}
	})
	return counts
}

// Retire marks the runs ids as not part of the sweep, as a header that
// lists them in Retired does: Count and Members leave them out.
func (log *Log) Retire(ids []string) {
	for _, id := range ids {
		if run, i := log.find(id); run != nil {
			run.Retired = true
			if i >= 0 {
				log.keep(i, run)
			}
		}
	}
}

// Members returns how many runs of the last session's sweep the ledger
// knows: all but the retired ones.
func (log *Log) Members() int {
	n := 0
	log.all(func(run *Run) {
		if !run.Retired {
			n++
		}
	})
	return n
}

// ReadFile reads the ledger at path; see Read.
func ReadFile(path string) (*Log, error) { return readFile(path, nil, false) }

// readFile is ReadFile, calling each (when not nil) with every record in
// the order of the file, once it is checked, the place of its run among
// the log's (see Stream) and the length of its line; with stream, it keeps
// no record.
func readFile(path string, each func(rec *Record, run int, size int), stream bool) (*Log, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return read(f, path, nil, each, stream)
}

// readLean reads the ledger at path for a resume or a status, keeping the
// records of the runs that did not succeed only (see Run), and notes
// which file it read, for OpenFrom.
func readLean(path string) (*Log, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	log, err := read(f, path, f, nil, false)
	if err != nil {
		return nil, err
	}
	if log.Size+log.Torn == st.Size() {
		log.ident = st
	}
	return log, nil
}

// Writer appends the record of a sweep to a ledger file: one JSON line per
// record. Records are written in group commits: those that arrive within
// commitInterval of the last commit wait and go together, in one write,
// followed by one fsync when any of them is a finished attempt (see Post).
// Open one per shard: a ledger has one writer, and Open locks it against a
// second one. Its methods may be called concurrently.
//
// A Writer watches over its file. Before every write it checks that its
// file is still the one at its path; if someone deleted or replaced it, it
// writes the file again from what it holds open (nothing is lost) and
// reports a Problem. It also keeps room allocated past the end of the
// file, so that when the disk fills up the records of the runs still
// running and the session's end record still fit: the Problem then says
// the disk is full, before any write fails.
type Writer struct {
	path   string
	dir    string
	absDir string // dir made absolute once, for relative; "" if that failed
	host   string
	past   *Log     // what the file held when opened
	lock   *os.File // the lock directory, held for the life of the Ledger
	backup string   // where --restart moved the old ledger

	mu        sync.Mutex
	file      ledgerFile
	size      int64
	reserved  int64 // the file's blocks are allocated up to here
	noReserve bool  // the file system cannot reserve space
	err       error // the first write error; no record is written after it
	problem   error // the first reason to start no more runs
	warn      []string
	buf       []byte // a commit's records

	commits committer
}

// ledgerFile is what Ledger needs of its file (tests use a full disk).
type ledgerFile interface {
	io.Writer
	io.ReaderAt
	Sync() error
	Truncate(size int64) error
	Close() error
	Stat() (os.FileInfo, error)
}

// ledgerReserve is the room a Ledger keeps allocated past the end of its
// file: enough for the finished records of a few hundred running runs and
// the end record. It is topped up when less than half of it is left.
const ledgerReserve = 256 << 10

// lockName is the name of the lock of the ledger at path: a directory
// beside it, which a cleanup that deletes ledger files does not remove.
func lockName(path string) string { return path + ".lock" }

// Open opens the ledger at path for appending, creating it and its
// directory if needed. First it takes the ledger's lock (see [lockName]):
// if another nodepack holds it, Open fails naming its pid and host.
// With restart, it then moves the old ledger out of the way (to
// path.<UTC time>.bak; see Backup) and starts an empty one.
//
// It reads what the file holds: any line that is not a valid record is an
// error naming the file and line, while an unfinished last line (the node
// lost power during a write) is cut off, with a warning. Runs the last
// session left running count as interrupted, since its writer is gone.
// Past keeps the records of the runs that did not succeed only (see Run).
func Open(path string, restart bool) (*Writer, error) { return open(path, restart, nil) }

// OpenFrom is Open without restart for a ledger read before, without the
// lock, into read (a Log of ReadDir): when the file is still the one read,
// unchanged, read is its Past and the file is not read again — a ledger of
// a million records takes a second to read. Otherwise (another nodepack
// wrote to it meanwhile, say) it is read again, as Open does.
func OpenFrom(path string, read *Log) (*Writer, error) { return open(path, false, read) }

func open(path string, restart bool, known *Log) (*Writer, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("open ledger: %w", err)
	}
	lock, err := lockLedger(path)
	if err != nil {
		return nil, err
	}
	l := &Writer{path: path, dir: dir, lock: lock}
	l.absDir, _ = filepath.Abs(dir)
	fail := func(err error) (*Writer, error) {
		if l.file != nil {
			l.file.Close()
		}
		lock.Close()
		return nil, err
	}
	if restart {
		if l.backup, err = backupLedger(path); err != nil {
			return fail(err)
		}
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND|noFollow, 0o644)
	if err != nil {
		return fail(fmt.Errorf("open ledger: %w", linkError(path, err)))
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		return fail(fmt.Errorf("open ledger: %s: not a regular file: %w", path, run.ErrLink))
	}
	l.file = f
	past := known
	if st, err := f.Stat(); err != nil || known == nil || known.ident == nil || !os.SameFile(known.ident, st) ||
		st.Size() != known.Size+known.Torn || !st.ModTime().Equal(known.ident.ModTime()) {
		if past, err = read(f, path, f, nil, false); err != nil {
			return fail(err)
		}
	}
	past.MarkInterrupted()
	l.past, l.size = past, past.Size
	l.host, _ = os.Hostname()
	if past.Torn > 0 {
		if err := f.Truncate(past.Size); err != nil {
			return fail(fmt.Errorf("open ledger: cut the unfinished last line: %w", err))
		}
		l.warn = append(l.warn, fmt.Sprintf("%s: left out an unfinished last line (%d bytes): the write was cut off", path, past.Torn))
	}
	if _, err := f.Seek(0, io.SeekEnd); err != nil {
		return fail(fmt.Errorf("open ledger: %w", err))
	}
	return l, nil
}

// linkError names path for an open that met a symbolic link (ELOOP with
// O_NOFOLLOW) or a file where a directory should be: the ledger and its
// lock are never written through a link nodepack did not make.
func linkError(path string, err error) error {
	if errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.ENOTDIR) {
		return fmt.Errorf("%s: %w", path, run.ErrLink)
	}
	return err
}

// lockOwner is what the lock directory's owner file says.
type lockOwner struct {
	PID   int       `json:"pid"`
	Host  string    `json:"host"`
	Since time.Time `json:"since"`
}

// lockLedger takes the lock of the ledger at path: an exclusive flock on
// its lock directory, whose owner file names the holder for the next one.
func lockLedger(path string) (*os.File, error) {
	name := lockName(path)
	if err := os.Mkdir(name, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("open ledger: lock: %w", err)
	}
	dir, err := os.OpenFile(name, os.O_RDONLY|noFollow|directory, 0)
	if err != nil {
		return nil, fmt.Errorf("open ledger: lock: %w", linkError(name, err))
	}
	if err := lockFile(dir); err != nil {
		dir.Close()
		holder := "another nodepack"
		var o lockOwner
		if b, rerr := os.ReadFile(filepath.Join(name, "owner")); rerr == nil && json.Unmarshal(b, &o) == nil && o.PID > 0 {
			holder = fmt.Sprintf("another nodepack (pid %d on %s, since %s)", o.PID, o.Host, o.Since.Local().Format(time.DateTime))
		}
		return nil, fmt.Errorf("%s is in use: %s is writing it: %w", path, holder, err)
	}
	host, _ := os.Hostname()
	b, _ := json.Marshal(lockOwner{PID: os.Getpid(), Host: host, Since: time.Now().UTC()})
	if err := writeOwner(dir, append(b, '\n')); err != nil {
		dir.Close()
		return nil, fmt.Errorf("open ledger: lock: %w", err)
	}
	return dir, nil
}

// Backup returns where Open moved the old ledger for a restart; ""
// if there was none or it was no restart.
func (l *Writer) Backup() string { return l.backup }

// Past returns what the ledger held when it was opened.
func (l *Writer) Past() *Log { return l.past }

// Warnings returns what Open found worth telling.
func (l *Writer) Warnings() []string { return l.warn }

// Err returns the first write error, after which the ledger writes nothing.
func (l *Writer) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Problem returns the first reason the sweep should start no more runs: a
// write error, the disk filling up (records still fit), the file having
// been deleted or replaced behind the ledger's back (it was written again),
// or a record that could not be encoded, and so is not in the ledger.
// It is nil while all is well.
func (l *Writer) Problem() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.problem
}

// Check makes sure the ledger's file is still the one at its path now,
// not at the next commit (see Problem), and returns Problem. A caller that
// must not start a run while the ledger is in trouble calls it first.
func (l *Writer) Check() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err == nil {
		l.checkPresent()
	}
	return l.problem
}

// PriorAttempts returns how many attempts the run had in the log, for
// execute.Options.PriorAttempts.
func (log *Log) PriorAttempts(runID string) int {
	if run := log.Runs[runID]; run != nil {
		return run.Attempts
	}
	return 0
}

// WriteHeader starts a session. h holds what the caller knows (version,
// command, shard, total, node, plan, sweep); type, time, format, host and
// pid are filled in. The write is synced and room is reserved for the
// session's last records, so a full disk shows here, before anything runs.
func (l *Writer) WriteHeader(h Record) error {
	h.Type, h.Time, h.Format, h.Host, h.PID = TypeHeader, time.Now().UTC(), Format, l.host, os.Getpid()
	if err := l.writeNow(&h); err != nil {
		return err
	}
	return l.Problem()
}

// WriteEnd ends the session: note says how, deferred counts the runs left
// for the next one. It commits what waits, then the end record, at once.
func (l *Writer) WriteEnd(note string, deferred int) error {
	return l.writeNow(&Record{Type: TypeEnd, Time: time.Now().UTC(), Note: note, Deferred: deferred})
}

// Append records a run.Event at once, synced, and returns the write's
// error: Post without the wait for the next group commit.
func (l *Writer) Append(ev run.Event) error { return l.writeNow(l.record(ev)) }

// Post records a run.Event, for execute.Options.OnEvent: a started
// record, or a finished one. It returns at once; the record goes with the
// next group commit, at most commitInterval after the last one, and a
// finished record makes that commit fsync the file. done, if not nil, is
// called once the record is durable (a started record: written), or with
// the error that lost it; it is called from the committing goroutine, in
// the order of the Posts, never concurrently: the place to report a run's
// end to the user, which must not come before its record is on disk. done
// must not call Append, WriteHeader, WriteEnd or Flush.
func (l *Writer) Post(ev run.Event, done func(error)) {
	rec := l.record(ev)
	l.commits.post(l, rec, rec.Type == TypeFinished, false, done)
}

// PostGPUOut records that a GPU reported fault f and was taken out of use,
// synced with the next commit; done is called as Post's.
func (l *Writer) PostGPUOut(f usage.GPUFault, done func(error)) {
	rec := &Record{Type: typeGPUOut, Time: f.Time.UTC(), GPUs: []string{f.UUID}, Note: f.Reason}
	l.commits.post(l, rec, true, true, done)
}

// Flush commits every record posted so far, at once, and returns when
// their done functions have run; its error is Err's.
func (l *Writer) Flush() error {
	l.commits.post(l, nil, false, true, nil)
	l.commits.wait(l)
	return l.Err()
}

// record makes a run.Event's record.
func (l *Writer) record(ev run.Event) *Record {
	slot := ev.Lane
	rec := &Record{
		ID: ev.Run.ID, Index: ev.Run.Index, Origin: ev.Run.Origin, Attempt: ev.Attempt, Lane: &slot,
		Stdout: l.relative(ev.Stdout), Stderr: l.relative(ev.Stderr),
	}
	if len(ev.Place.CPUs) > 0 || len(ev.Place.GPUs) > 0 {
		rec.Request = ev.Place.Request.String()
	}
	if j := ev.Judgement; ev.Kind == run.Judged && j != nil {
		rung := j.Rung
		rec.Type, rec.Time, rec.Metric, rec.Rung, rec.RungStep, rec.Step, rec.Others, rec.Pruned = typeRung, ev.Start.UTC(), j.Metric, &rung, j.Step, j.At, j.Others, j.Stop
		rec.Stdout, rec.Stderr, rec.Lane, rec.Request = "", "", nil, ""
		if finite(j.Value) {
			v := j.Value
			rec.Value = &v
		}
		if finite(j.Cutoff) {
			c := j.Cutoff
			rec.Cutoff = &c
		}
		return rec
	}
	if ev.Kind == run.Started {
		rec.Type, rec.Time = TypeStarted, ev.Start.UTC()
		rec.Host, rec.PID = l.host, ev.PID
		rec.GPUs = ev.Place.UUIDs()
		rec.CPUs = pack.FormatCPUList(ev.Place.CPUs)
		rec.Params = ev.Run.Params
		return rec
	}
	code := ev.ExitCode
	rec.Type, rec.Time = TypeFinished, ev.End.UTC()
	rec.ExitCode, rec.Signal, rec.Reason, rec.Retry = &code, ev.Signal, ev.Reason, ev.Retry
	if ev.Err != nil {
		rec.Error = ev.Err.Error()
	}
	rec.Seconds = roundSeconds(ev.End.Sub(ev.Start))
	rec.MaxRSS = ev.Usage.MaxRSS
	rec.CPUSeconds = roundSeconds(ev.Usage.CPU)
	rec.TreeRSSPeak = ev.Usage.Sampled.TreeRSSPeak
	rec.GPUUsage = ev.Usage.Sampled.GPUs
	rec.Class, rec.StderrTail = ev.Class, ev.StderrTail
	rec.Metrics, rec.Curves, rec.MetricsSkipped = ev.Metrics, ev.Curves, ev.MetricsSkipped
	return rec
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// roundSeconds is d in seconds, to the millisecond, as the float64 that
// prints so (Duration.Seconds of 2.272 s is 2.2720000000000002).
func roundSeconds(d time.Duration) float64 {
	return float64(d.Round(time.Millisecond)/time.Millisecond) / 1000
}

// relative makes a log path relative to the ledger's directory, so that a
// reader on another machine finds it from there.
func (l *Writer) relative(path string) string {
	if path == "" || l.absDir == "" {
		return path
	}
	// The logs are in the ledger's directory: a cut, not a filepath.Rel,
	// for every start and end.
	if rest, ok := strings.CutPrefix(path, l.absDir); ok && strings.HasPrefix(rest, "/") && filepath.Clean(path) == path {
		return rest[1:]
	}
	if rel, err := filepath.Rel(l.absDir, path); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return path
}

// writeNow commits what waits and rec, synced, at once, and returns rec's
// error.
func (l *Writer) writeNow(rec *Record) error {
	errc := make(chan error, 1)
	l.commits.post(l, rec, true, true, func(err error) { errc <- err })
	return <-errc
}

// commit appends lines with one write, synced if sync. A failed write (a
// full disk) is cut off again, so the file stays a sequence of whole
// records, and ends the ledger: every later commit returns the same error.
func (l *Writer) commit(lines []byte, sync bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return l.err
	}
	if len(lines) == 0 {
		return nil
	}
	l.checkPresent()
	n, err := l.file.Write(lines)
	if err == nil && sync {
		err = l.file.Sync()
	}
	if err != nil {
		if n > 0 {
			l.file.Truncate(l.size)
		}
		l.err = fmt.Errorf("ledger %s: %w", l.path, err)
		if l.problem == nil {
			l.problem = l.err
		}
		return l.err
	}
	l.size += int64(n)
	l.topUp()
	return nil
}

// topUp keeps ledgerReserve bytes allocated past the end of the file. A
// file system that cannot allocate ahead is left alone; one that is full
// is a Problem while the rest of the reserve still holds the last records.
func (l *Writer) topUp() {
	if l.noReserve || l.reserved-l.size >= ledgerReserve/2 {
		return
	}
	switch err := reserve(l.file, l.size, ledgerReserve); {
	case err == nil:
		l.reserved = l.size + ledgerReserve
	case errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT):
		l.noReserve = true
		if l.problem == nil {
			l.problem = fmt.Errorf("disk full: %s: no room to keep recording runs (%w)", l.path, err)
		}
	default:
		l.noReserve = true
	}
}

// reserve allocates n bytes of f from off without changing its size, so
// later writes there cannot fail for want of space.
func reserve(f ledgerFile, off, n int64) error {
	if r, ok := f.(interface{ Reserve(off, n int64) error }); ok {
		return r.Reserve(off, n)
	}
	if osf, ok := f.(*os.File); ok {
		return reserveFile(osf, off, n)
	}
	return errors.ErrUnsupported
}

// checkPresent makes sure the file at the ledger's path is the one it
// writes. If it was deleted or replaced, the ledger writes what it holds
// to a new file there (or, if another file took the name, beside it),
// carries on in that file, and records the Problem.
func (l *Writer) checkPresent() {
	held, err := l.file.Stat()
	if err != nil {
		return
	}
	onDisk, err := os.Stat(l.path)
	if err == nil && os.SameFile(held, onDisk) {
		return
	}
	what := "deleted"
	if err == nil {
		what = "replaced by another file"
	}
	dest, rerr := l.rewrite()
	switch {
	case rerr != nil:
		l.problem = fmt.Errorf("%s was %s while the sweep ran, and could not be written again: %w", l.path, what, rerr)
	case dest != l.path:
		l.problem = fmt.Errorf("%s was %s while the sweep ran: this sweep's records are now in %s", l.path, what, dest)
		l.path = dest
	default:
		l.problem = fmt.Errorf("%s was %s while the sweep ran: it was written again from the open file, nothing is lost", l.path, what)
	}
}

// rewrite copies what the ledger holds into a new file at its path, or
// beside it when another file has the name, and writes there from now on.
func (l *Writer) rewrite() (string, error) {
	tmp, err := os.CreateTemp(l.dir, ".ledger-rewrite-")
	if err != nil {
		return "", err
	}
	// The mode the ledger had (CreateTemp's is 0600): other accounts that
	// read status over a shared file system keep reading it.
	if st, err := l.file.Stat(); err == nil {
		tmp.Chmod(st.Mode().Perm())
	}
	if _, err := io.Copy(tmp, io.NewSectionReader(l.file, 0, l.size)); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return "", err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return "", err
	}
	dest := l.path
	if err := os.Link(tmp.Name(), dest); err != nil {
		dest = l.path + "." + time.Now().UTC().Format("20060102T150405.000Z") + ".recovered"
		if err := os.Rename(tmp.Name(), dest); err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
			return "", err
		}
	} else {
		os.Remove(tmp.Name())
	}
	l.file.Close()
	l.file = tmp
	l.reserved = 0
	l.topUp()
	return dest, nil
}

// Close commits what waits, closes the file and gives up the lock.
func (l *Writer) Close() error {
	l.Flush()
	l.mu.Lock()
	defer l.mu.Unlock()
	err := l.file.Close()
	l.lock.Close()
	return err
}

// retryAll is the retry of Resume that runs every failed run again.
func retryAll(*Run) bool { return true }

// ResumeCounts says what a resumed sweep did with the runs its ledger
// knew. Skipped runs do not run again; the others do.
type ResumeCounts struct {
	SkippedSucceeded int // succeeded before
	SkippedPruned    int // pruned before: stopped early, not run again
	SkippedFailed    int // failed before, not rerun
	RetriedFailed    int // failed before, rerun as retry said
	Interrupted      int // interrupted, or started and never finished
	New              int // not in the ledger
}

// Resume returns the runs of runs that still have to run according to the
// log, keyed on run.Run.ID: those it has no record of, those interrupted or
// started and never finished, and the failed ones retry says yes to (nil:
// none; retryAll: every one). Runs that succeeded, and the failed ones
// retry leaves out, are skipped. counts returns the tally so far; it may
// be called at any time.
func (log *Log) Resume(runs iter.Seq2[run.Run, error], retry func(*Run) bool) (pending iter.Seq2[run.Run, error], counts func() ResumeCounts) {
	skip, counts := log.ResumeFilter(retry)
	pending = func(yield func(run.Run, error) bool) {
		for run, err := range runs {
			if err != nil {
				yield(run, err)
				return
			}
			if !skip(run.ID) && !yield(run, nil) {
				return
			}
		}
	}
	return pending, counts
}

// ResumeFilter is Resume as a filter, for a source that leaves runs out
// itself (sweep.Source.RunsExcept): skip, called with the ID of every run
// in order, counts it and says whether Resume would skip it.
func (log *Log) ResumeFilter(retry func(*Run) bool) (skip func(id string) bool, counts func() ResumeCounts) {
	var mu sync.Mutex
	var c ResumeCounts
	skip = func(id string) bool {
		mu.Lock()
		defer mu.Unlock()
		switch state := log.stateOf(id); {
		case state == StateSucceeded:
			c.SkippedSucceeded++
			return true
		case state == StatePruned:
			c.SkippedPruned++
			return true
		case state == StateFailed && (retry == nil || !retry(log.Runs[id])):
			c.SkippedFailed++
			return true
		case state == StateFailed:
			c.RetriedFailed++
		case state == StatePending:
			c.New++
		default:
			c.Interrupted++
		}
		return false
	}
	counts = func() ResumeCounts {
		mu.Lock()
		defer mu.Unlock()
		return c
	}
	return skip, counts
}

func (log *Log) stateOf(id string) State {
	if id == "" {
		return StatePending
	}
	if run := log.Runs[id]; run != nil {
		return run.State
	}
	return StatePending
}

// backupLedger renames the ledger at path out of the way, to
// path.<UTC time>.bak, and returns the new name; "" if there was none.
func backupLedger(path string) (string, error) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	backup := path + "." + time.Now().UTC().Format("20060102T150405.000Z") + ".bak"
	if err := os.Rename(path, backup); err != nil {
		return "", fmt.Errorf("back up ledger: %w", err)
	}
	return backup, nil
}

// InOrder returns the log's runs in the order of first appearance.
func (log *Log) InOrder() []*Run {
	runs := make([]*Run, 0, len(log.Order))
	for _, id := range log.Order {
		runs = append(runs, log.Runs[id])
	}
	return runs
}

// maxHeaderLine bounds the first line FirstHeader reads: a header holds
// the node (every CPU and GPU), a few hundred KiB on the largest nodes.
const maxHeaderLine = 16 << 20

// FirstHeader returns the first record of the ledger at path, the header
// of its first session, reading no further than its first line.
func FirstHeader(path string) (Record, error) {
	f, err := os.Open(path)
	if err != nil {
		return Record{}, err
	}
	defer f.Close()
	line, err := bufio.NewReader(io.LimitReader(f, maxHeaderLine)).ReadBytes('\n')
	if err != nil {
		return Record{}, fmt.Errorf("ledger %s:1: %w", path, noLine(err))
	}
	var h Record
	if err := json.Unmarshal(line, &h); err != nil || h.Type != TypeHeader {
		return Record{}, fmt.Errorf("ledger %s:1: not a header record", path)
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
