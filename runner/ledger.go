package runner

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nodepack/nodepack/pack"
)

// LedgerFormat names the ledger's layout; every header record carries it.
const LedgerFormat = "nodepack.ledger/v1"

// Ledger record types.
const (
	RecordHeader   = "header"   // a session begins: who, what, where
	RecordStarted  = "started"  // an attempt's process runs
	RecordFinished = "finished" // an attempt ended
	RecordEnd      = "end"      // the session ended without being killed
)

// LedgerRecord is one line of a ledger: a JSON object whose "type" says
// which of the fields below it holds. A ledger is a sequence of sessions,
// each a header, the started and finished records of its attempts, and,
// unless the session was killed, an end record.
type LedgerRecord struct {
	Type string    `json:"type"`
	Time time.Time `json:"time"`

	// Header.
	Format  string          `json:"format,omitempty"`
	Version string          `json:"version,omitempty"`
	Command []string        `json:"command,omitempty"`
	Host    string          `json:"host,omitempty"` // also in started records
	PID     int             `json:"pid,omitempty"`  // header: the runner's; started: the run's
	Shard   *Shard          `json:"shard,omitempty"`
	Total   *int            `json:"total,omitempty"` // runs of this shard, when the source knows
	Node    json.RawMessage `json:"node,omitempty"`
	Plan    json.RawMessage `json:"plan,omitempty"`

	// Started and finished.
	ID      string   `json:"id,omitempty"`
	Index   int      `json:"index,omitempty"`
	Origin  string   `json:"origin,omitempty"`
	Attempt int      `json:"attempt,omitempty"`
	Slot    *int     `json:"slot,omitempty"`
	GPUs    []string `json:"gpus,omitempty"` // UUIDs
	CPUs    string   `json:"cpus,omitempty"` // "0-3,8"
	Stdout  string   `json:"stdout,omitempty"`
	Stderr  string   `json:"stderr,omitempty"`

	// Finished.
	ExitCode    *int       `json:"exit_code,omitempty"`
	Signal      string     `json:"signal,omitempty"`
	Reason      Reason     `json:"reason,omitempty"`
	Retry       bool       `json:"retry,omitempty"`
	Error       string     `json:"error,omitempty"`
	Seconds     float64    `json:"duration_s,omitempty"`
	MaxRSS      uint64     `json:"max_rss_bytes,omitempty"`
	CPUSeconds  float64    `json:"cpu_s,omitempty"`
	TreeRSSPeak uint64     `json:"tree_rss_peak_bytes,omitempty"`
	GPUUsage    []GPUUsage `json:"gpu_usage,omitempty"`

	// End.
	Note     string `json:"note,omitempty"`     // how the session ended
	Deferred int    `json:"deferred,omitempty"` // runs left for the next session
}

// LedgerFileName is the name of shard index's ledger in a sweep of count
// shards: ledger.jsonl when the sweep is not sharded.
func LedgerFileName(index, count int) string {
	if count <= 1 {
		return "ledger.jsonl"
	}
	return fmt.Sprintf("ledger-%d-of-%d.jsonl", index, count)
}

// LedgerFiles lists the ledgers in dir, sorted; backups are not included.
func LedgerFiles(dir string) ([]string, error) {
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

// RunState is where a run stands according to its ledger.
type RunState string

const (
	StatePending     RunState = "pending"     // no record yet
	StateRunning     RunState = "running"     // started in the live session, not finished
	StateSucceeded   RunState = "succeeded"   // its last attempt exited 0
	StateFailed      RunState = "failed"      // its last attempt failed or timed out, and no retry followed
	StateInterrupted RunState = "interrupted" // stopped by the runner, or its session ended (or was killed) while it ran
)

// LedgerRun is one run's history in a ledger.
type LedgerRun struct {
	ID       string
	State    RunState
	Attempts int           // the highest attempt number recorded
	Session  int           // index in LedgerLog.Sessions of its last record
	Started  *LedgerRecord // its last started record; nil if none
	Finished *LedgerRecord // its last finished record; nil if none
}

// LedgerLog is what a ledger file holds, folded by run.
type LedgerLog struct {
	Name     string
	Sessions []LedgerRecord // the headers, oldest first
	End      *LedgerRecord  // the last session's end record; nil while it runs or if it was killed
	Runs     map[string]*LedgerRun
	Order    []string // run ids in order of first appearance
	// Size is the length of the complete lines; Torn the length of an
	// unfinished last line that was left out (a write in progress, or the
	// node lost power during one).
	Size, Torn int64
}

// ReadLedger reads a ledger. An unfinished last line is left out and
// counted in Torn; any other line that is not a valid record is an error
// naming name and the line. Runs still running when the last session
// ended are interrupted; those of a session without an end record are
// running (the session is live, or was killed: see Stop).
func ReadLedger(r io.Reader, name string) (*LedgerLog, error) {
	log := &LedgerLog{Name: name, Runs: make(map[string]*LedgerRun)}
	br := bufio.NewReaderSize(r, 64<<10)
	for lineNo := 1; ; lineNo++ {
		line, err := br.ReadBytes('\n')
		if err == io.EOF {
			log.Torn = int64(len(line))
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read ledger %s: %w", name, err)
		}
		if err := log.add(line[:len(line)-1]); err != nil {
			return nil, fmt.Errorf("ledger %s:%d: %w", name, lineNo, err)
		}
		log.Size += int64(len(line))
	}
	if log.End != nil {
		log.Stop()
	}
	return log, nil
}

// add folds one complete line into the log.
func (log *LedgerLog) add(line []byte) error {
	var rec LedgerRecord
	if err := json.Unmarshal(line, &rec); err != nil {
		return fmt.Errorf("not a record: %w", err)
	}
	if rec.Type != RecordHeader && len(log.Sessions) == 0 {
		return fmt.Errorf("%q record before the first header", rec.Type)
	}
	switch rec.Type {
	case RecordHeader:
		if rec.Format != LedgerFormat {
			return fmt.Errorf("header format %q, want %q", rec.Format, LedgerFormat)
		}
		if log.End == nil && len(log.Sessions) > 0 {
			log.Stop() // the previous session was killed
		}
		log.Sessions = append(log.Sessions, rec)
		log.End = nil
		return nil
	case RecordEnd:
		if log.End != nil {
			return errors.New("second end record in a session")
		}
		log.End = &rec
		return nil
	case RecordStarted, RecordFinished:
	default:
		return fmt.Errorf("unknown record type %q", rec.Type)
	}
	if log.End != nil {
		return fmt.Errorf("%q record after the session's end", rec.Type)
	}
	if !validID(rec.ID) || rec.Attempt < 1 {
		return fmt.Errorf("%s record: bad run id %q or attempt %d", rec.Type, rec.ID, rec.Attempt)
	}
	run := log.Runs[rec.ID]
	if run == nil {
		run = &LedgerRun{ID: rec.ID}
		log.Runs[rec.ID] = run
		log.Order = append(log.Order, rec.ID)
	}
	run.Attempts = max(run.Attempts, rec.Attempt)
	run.Session = len(log.Sessions) - 1
	if rec.Type == RecordStarted {
		run.Started = &rec
		run.State = StateRunning
		return nil
	}
	if rec.ExitCode == nil {
		return errors.New("finished record without exit_code")
	}
	run.Finished = &rec
	switch rec.Reason {
	case OK:
		run.State = StateSucceeded
	case Failed, TimedOut:
		run.State = StateFailed
		if rec.Retry {
			run.State = StateRunning // between attempts
		}
	case Interrupted:
		run.State = StateInterrupted
	default:
		return fmt.Errorf("finished record: unknown reason %q", rec.Reason)
	}
	return nil
}

// Stop marks the runs that the last session left running as interrupted:
// for a session known to be over (it wrote its end record, or its process
// is gone).
func (log *LedgerLog) Stop() {
	for _, run := range log.Runs {
		if run.State == StateRunning {
			run.State = StateInterrupted
		}
	}
}

// Live reports whether the last session has not written its end record.
func (log *LedgerLog) Live() bool { return len(log.Sessions) > 0 && log.End == nil }

// Header returns the last session's header; the zero record if none.
func (log *LedgerLog) Header() LedgerRecord {
	if len(log.Sessions) == 0 {
		return LedgerRecord{}
	}
	return log.Sessions[len(log.Sessions)-1]
}

// Count returns how many runs are in each state.
func (log *LedgerLog) Count() map[RunState]int {
	counts := make(map[RunState]int)
	for _, run := range log.Runs {
		counts[run.State]++
	}
	return counts
}

// Ledger appends the record of a sweep to a ledger file: one JSON line per
// record, each written with a single write, the file synced after every
// finished attempt. Open one per shard: a ledger has one writer, and
// OpenLedger takes an advisory lock to keep a second one out. Its methods
// may be called concurrently.
type Ledger struct {
	path string
	dir  string
	host string
	past *LedgerLog // what the file held when opened

	mu   sync.Mutex
	file ledgerFile
	size int64
	err  error // the first write error; no record is written after it
	warn []string
}

// ledgerFile is what Ledger needs of its file (tests use a full disk).
type ledgerFile interface {
	io.Writer
	Sync() error
	Truncate(size int64) error
	Close() error
}

// OpenLedger opens the ledger at path for appending, creating it and its
// directory if needed. It reads what the file holds first: any line that
// is not a valid record is an error naming the file and line, while an
// unfinished last line (the node lost power during a write) is cut off,
// with a warning. Runs the last session left running count as interrupted,
// since the lock shows its writer is gone.
func OpenLedger(path string) (*Ledger, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("open ledger: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open ledger: %w", err)
	}
	if err := lockFile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("open ledger %s: another nodepack is writing it: %w", path, err)
	}
	past, err := ReadLedger(f, path)
	if err != nil {
		f.Close()
		return nil, err
	}
	past.Stop()
	l := &Ledger{path: path, dir: dir, past: past, file: f, size: past.Size}
	l.host, _ = os.Hostname()
	if past.Torn > 0 {
		if err := f.Truncate(past.Size); err != nil {
			f.Close()
			return nil, fmt.Errorf("open ledger: cut the unfinished last line: %w", err)
		}
		l.warn = append(l.warn, fmt.Sprintf("%s: left out an unfinished last line (%d bytes): the write was cut off", path, past.Torn))
	}
	if _, err := f.Seek(0, io.SeekEnd); err != nil {
		f.Close()
		return nil, fmt.Errorf("open ledger: %w", err)
	}
	return l, nil
}

// Path returns the ledger's file name.
func (l *Ledger) Path() string { return l.path }

// Past returns what the ledger held when it was opened.
func (l *Ledger) Past() *LedgerLog { return l.past }

// Warnings returns what OpenLedger found worth telling.
func (l *Ledger) Warnings() []string { return l.warn }

// Err returns the first write error, after which the ledger writes nothing.
func (l *Ledger) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// PriorAttempts returns how many attempts the run had before, for
// Options.PriorAttempts.
func (l *Ledger) PriorAttempts(runID string) int {
	if run := l.past.Runs[runID]; run != nil {
		return run.Attempts
	}
	return 0
}

// WriteHeader starts a session. h holds what the caller knows (version,
// command, shard, total, node, plan); type, time, format, host and pid
// are filled in. The write is synced, so a full disk shows here, before
// anything runs.
func (l *Ledger) WriteHeader(h LedgerRecord) error {
	h.Type, h.Time, h.Format, h.Host, h.PID = RecordHeader, time.Now().UTC(), LedgerFormat, l.host, os.Getpid()
	return l.write(&h, true)
}

// WriteEnd ends the session: note says how, deferred counts the runs left
// for the next one.
func (l *Ledger) WriteEnd(note string, deferred int) error {
	return l.write(&LedgerRecord{Type: RecordEnd, Time: time.Now().UTC(), Note: note, Deferred: deferred}, true)
}

// Record appends an Event, for Options.OnEvent: a started record, or a
// finished one, which is synced.
func (l *Ledger) Record(ev Event) error {
	slot := ev.Slot.Slot
	rec := LedgerRecord{
		ID: ev.Run.ID, Index: ev.Run.Index, Origin: ev.Run.Origin, Attempt: ev.Attempt, Slot: &slot,
		Stdout: l.relative(ev.Stdout), Stderr: l.relative(ev.Stderr),
	}
	if ev.Kind == Started {
		rec.Type, rec.Time = RecordStarted, ev.Start.UTC()
		rec.Host, rec.PID = l.host, ev.PID
		rec.GPUs = gpuUUIDs(ev.Slot)
		rec.CPUs = pack.FormatCPUList(ev.Slot.CPUs)
		return l.write(&rec, false)
	}
	code := ev.ExitCode
	rec.Type, rec.Time = RecordFinished, ev.End.UTC()
	rec.ExitCode, rec.Signal, rec.Reason, rec.Retry = &code, ev.Signal, ev.Reason, ev.Retry
	if ev.Err != nil {
		rec.Error = ev.Err.Error()
	}
	rec.Seconds = roundSeconds(ev.End.Sub(ev.Start))
	rec.MaxRSS = ev.Usage.MaxRSS
	rec.CPUSeconds = roundSeconds(ev.Usage.CPU)
	rec.TreeRSSPeak = ev.Usage.Sampled.TreeRSSPeak
	rec.GPUUsage = ev.Usage.Sampled.GPUs
	return l.write(&rec, true)
}

func roundSeconds(d time.Duration) float64 { return d.Round(time.Millisecond).Seconds() }

// relative makes a log path relative to the ledger's directory, so that a
// reader on another machine finds it from there.
func (l *Ledger) relative(path string) string {
	if path == "" {
		return ""
	}
	dir, err := filepath.Abs(l.dir)
	if err != nil {
		return path
	}
	if rel, err := filepath.Rel(dir, path); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return path
}

// write appends one record with one write. A failed write (a full disk)
// is cut off again, so the file stays a sequence of whole records, and
// ends the ledger: every later write returns the same error.
func (l *Ledger) write(rec *LedgerRecord, sync bool) error {
	line, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("ledger %s: %w", l.path, err)
	}
	line = append(line, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return l.err
	}
	n, err := l.file.Write(line)
	if err == nil && sync {
		err = l.file.Sync()
	}
	if err != nil {
		if n > 0 {
			l.file.Truncate(l.size)
		}
		l.err = fmt.Errorf("ledger %s: %w", l.path, err)
		return l.err
	}
	l.size += int64(n)
	return nil
}

// Close closes the file.
func (l *Ledger) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.file.Close()
}

// ResumeCounts says what a resumed sweep did with the runs its ledger
// knew. Skipped runs do not run again; the others do.
type ResumeCounts struct {
	SkippedSucceeded int // succeeded before
	SkippedFailed    int // failed before; rerun only with retryFailed
	RetriedFailed    int // failed before, rerun because of retryFailed
	Interrupted      int // interrupted, or started and never finished
	New              int // not in the ledger
}

// Resume returns the runs of runs that still have to run according to the
// ledger, keyed on Run.ID: those it has no record of, those interrupted or
// started and never finished, and, with retryFailed, those that failed.
// Runs that succeeded, and those that failed without retryFailed, are
// skipped. counts returns the tally so far; it may be called at any time.
func (l *Ledger) Resume(runs iter.Seq2[Run, error], retryFailed bool) (pending iter.Seq2[Run, error], counts func() ResumeCounts) {
	var mu sync.Mutex
	var c ResumeCounts
	pending = func(yield func(Run, error) bool) {
		for run, err := range runs {
			if err != nil {
				yield(run, err)
				return
			}
			skip := false
			mu.Lock()
			switch state := l.stateOf(run.ID); {
			case state == StateSucceeded:
				c.SkippedSucceeded++
				skip = true
			case state == StateFailed && !retryFailed:
				c.SkippedFailed++
				skip = true
			case state == StateFailed:
				c.RetriedFailed++
			case state == StatePending:
				c.New++
			default:
				c.Interrupted++
			}
			mu.Unlock()
			if !skip && !yield(run, nil) {
				return
			}
		}
	}
	counts = func() ResumeCounts {
		mu.Lock()
		defer mu.Unlock()
		return c
	}
	return pending, counts
}

func (l *Ledger) stateOf(id string) RunState {
	if id == "" {
		return StatePending
	}
	if run := l.past.Runs[id]; run != nil {
		return run.State
	}
	return StatePending
}

// BackupLedger renames the ledger at path out of the way, to
// path.<UTC time>.bak, and returns the new name; "" if there was none.
func BackupLedger(path string) (string, error) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	backup := path + "." + time.Now().UTC().Format("20060102T150405.000Z") + ".bak"
	if err := os.Rename(path, backup); err != nil {
		return "", fmt.Errorf("back up ledger: %w", err)
	}
	return backup, nil
}

// SortedRuns returns the log's runs in the order of first appearance.
func (log *LedgerLog) SortedRuns() []*LedgerRun {
	runs := make([]*LedgerRun, 0, len(log.Order))
	for _, id := range log.Order {
		runs = append(runs, log.Runs[id])
	}
	return runs
}
