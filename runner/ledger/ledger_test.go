package ledger

import (
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/resources/usage"
	"github.com/nodepack/nodepack/runner/run"
)

const ledgerHeader = `{"type":"header","time":"2026-01-01T00:00:00Z","format":"nodepack.ledger/v1","pid":1}` + "\n"

func ledgerStarted(id string, attempt int) string {
	return `{"type":"started","time":"2026-01-01T00:00:01Z","id":"` + id + `","attempt":` + ledgerItoa(attempt) + `,"slot":0}` + "\n"
}

func ledgerFinished(id string, attempt int, reason string, retry bool) string {
	r := ""
	if retry {
		r = `,"retry":true`
	}
	return `{"type":"finished","time":"2026-01-01T00:00:02Z","id":"` + id + `","attempt":` + ledgerItoa(attempt) + `,"exit_code":0,"reason":"` + reason + `"` + r + "}\n"
}

func ledgerItoa(n int) string { return string(rune('0' + n)) }

const ledgerEnd = `{"type":"end","time":"2026-01-01T00:00:03Z","note":"done"}` + "\n"

func TestReadLedgerStates(t *testing.T) {
	tests := []struct {
		description string
		ledger      string
		want        map[string]State
		wantLive    bool
		wantTorn    bool
	}{
		{"ok, failed, interrupted", ledgerHeader + ledgerStarted("a", 1) + ledgerFinished("a", 1, "ok", false) +
			ledgerStarted("b", 1) + ledgerFinished("b", 1, "failed", false) + ledgerStarted("c", 1) + ledgerFinished("c", 1, "interrupted", false) + ledgerEnd,
			map[string]State{"a": StateSucceeded, "b": StateFailed, "c": StateInterrupted}, false, false},
		{"a timeout is a failure", ledgerHeader + ledgerStarted("a", 1) + ledgerFinished("a", 1, "timeout", false) + ledgerEnd,
			map[string]State{"a": StateFailed}, false, false},
		{"started in the live session: running", ledgerHeader + ledgerStarted("a", 1),
			map[string]State{"a": StateRunning}, true, false},
		{"between a failure and its retry: running", ledgerHeader + ledgerStarted("a", 1) + ledgerFinished("a", 1, "failed", true),
			map[string]State{"a": StateRunning}, true, false},
		{"started in a session that ended: interrupted", ledgerHeader + ledgerStarted("a", 1) + ledgerEnd,
			map[string]State{"a": StateInterrupted}, false, false},
		{"started in a killed session (a new header follows): interrupted", ledgerHeader + ledgerStarted("a", 1) + ledgerHeader,
			map[string]State{"a": StateInterrupted}, true, false},
		{"the last record wins", ledgerHeader + ledgerStarted("a", 1) + ledgerFinished("a", 1, "failed", false) + ledgerEnd + ledgerHeader + ledgerStarted("a", 2) + ledgerFinished("a", 2, "ok", false) + ledgerEnd,
			map[string]State{"a": StateSucceeded}, false, false},
		{"an unfinished last line is left out", ledgerHeader + ledgerStarted("a", 1) + `{"type":"finished","id":"a"`,
			map[string]State{"a": StateRunning}, true, true},
		{"empty", "", map[string]State{}, false, false},
		{"a run retired by the last header is not counted", ledgerHeader + ledgerStarted("a", 1) + ledgerFinished("a", 1, "ok", false) + ledgerStarted("b", 1) + ledgerFinished("b", 1, "ok", false) + ledgerEnd +
			strings.Replace(ledgerHeader, `"pid":1`, `"pid":1,"retired":["a"]`, 1),
			map[string]State{"b": StateSucceeded}, true, false},
		{"a retired run that runs again counts again", ledgerHeader + ledgerStarted("a", 1) + ledgerFinished("a", 1, "failed", false) + ledgerEnd +
			strings.Replace(ledgerHeader, `"pid":1`, `"pid":1,"retired":["a"]`, 1) + ledgerEnd + ledgerHeader + ledgerStarted("a", 2),
			map[string]State{"a": StateRunning}, true, false},
	}
	for _, tc := range tests {
		for _, read := range readers {
			t.Run(tc.description+"/"+read.name, func(t *testing.T) {
				log, err := read.read(t, tc.ledger)
				if err != nil {
					t.Fatal(err)
				}
				got := map[string]State{}
				for id, run := range runsOf(log) {
					if !run.Retired {
						got[id] = run.State
					}
				}
				counted := 0
				for _, n := range log.Count() {
					counted += n
				}
				if counted != len(got) || log.Members() != len(got) {
					t.Errorf("Count() covers %d runs, Members() %d, want %d", counted, log.Members(), len(got))
				}
				if len(got) != len(tc.want) {
					t.Errorf("runs %v, want %v", got, tc.want)
				}
				for id, state := range tc.want {
					if got[id] != state {
						t.Errorf("run %s: %s, want %s", id, got[id], state)
					}
				}
				if log.Live() != tc.wantLive || (log.Torn > 0) != tc.wantTorn {
					t.Errorf("live %v torn %d, want %v %v", log.Live(), log.Torn, tc.wantLive, tc.wantTorn)
				}
			})
		}
	}
}

// readers read a ledger's text from a reader, from a file, and from a
// file keeping every attempt for a timeline: all must tell the same
// states and errors.
var readers = []struct {
	name string
	read func(t testing.TB, text string) (*Log, error)
}{
	{"reader", func(t testing.TB, text string) (*Log, error) { return readLedger(strings.NewReader(text), "l") }},
	{"file", func(t testing.TB, text string) (*Log, error) { return readText(t, text, ReadOptions{}) }},
	{"timeline", func(t testing.TB, text string) (*Log, error) { return readText(t, text, ReadOptions{Attempts: true}) }},
}

// readLedger folds a ledger's text.
func readLedger(r io.Reader, name string) (*Log, error) { return read(r, name, 0, ReadOptions{}, nil) }

// readText writes text to a file and reads it with o, naming it "l" in
// errors.
func readText(t testing.TB, text string, o ReadOptions) (*Log, error) {
	path := filepath.Join(t.TempDir(), "l")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	log, err := ReadFile(path, o)
	if err != nil {
		// Name the ledger as the reader was told to.
		return nil, errors.New(strings.ReplaceAll(err.Error(), path, "l"))
	}
	return log, nil
}

// runsOf is the log's runs by id.
func runsOf(log *Log) map[string]Run {
	runs := map[string]Run{}
	for i := range log.Len() {
		r := log.At(i)
		runs[r.ID] = r
	}
	return runs
}

func TestReadLedgerCorruption(t *testing.T) {
	tests := []struct {
		description string
		ledger      string
		want        string // in the error
	}{
		{"not JSON", ledgerHeader + "garbage\n", "l:2: not a record"},
		{"an empty line", ledgerHeader + "\n" + ledgerStarted("a", 1), "l:2:"},
		{"a record before the header", ledgerStarted("a", 1), "l:1: \"started\" record before the first header"},
		{"a record of an unknown type without one", `{"type":"paused"}` + "\n", `l:1: "paused" record before the first header`},
		{"a started record after a success", ledgerHeader + ledgerStarted("a", 1) + ledgerFinished("a", 1, "ok", false) + ledgerEnd + ledgerHeader + ledgerStarted("a", 2),
			"l:6: started record of run a (attempt 2) after its success"},
		{"a paused run after its success", ledgerHeader + ledgerStarted("a", 1) + ledgerFinished("a", 1, "ok", false) + ledgerFinished("a", 1, "paused", false),
			"l:4: finished (paused) record of run a (attempt 1) after its success"},
		{"a failure after a success", ledgerHeader + ledgerStarted("a", 1) + ledgerFinished("a", 1, "ok", false) + ledgerFinished("a", 1, "failed", true),
			"l:4: finished (failed) record of run a (attempt 1) after its success"},
		{"another format", `{"type":"header","format":"nodepack.ledger/v9"}` + "\n", "l:1: header format"},
		{"a bad run id", ledgerHeader + ledgerStarted("a/b", 1), "l:2: started record: bad run id"},
		{"no attempt", ledgerHeader + `{"type":"started","id":"a"}` + "\n", "l:2:"},
		{"finished without an exit code", ledgerHeader + `{"type":"finished","id":"a","attempt":1,"reason":"ok"}` + "\n", "l:2: finished record without exit_code"},
		{"an unknown reason", ledgerHeader + strings.Replace(ledgerFinished("a", 1, "ok", false), `"ok"`, `"meh"`, 1), `l:2: finished record: unknown reason "meh"`},
		{"a record after the end", ledgerHeader + ledgerEnd + ledgerStarted("a", 1), "l:3: \"started\" record after the session's end"},
		{"a torn line that is not the last", ledgerHeader + `{"type":"started","id":"a"` + "\n" + ledgerStarted("b", 1), "l:2: not a record"},
	}
	for _, tc := range tests {
		for _, read := range readers {
			t.Run(tc.description+"/"+read.name, func(t *testing.T) {
				_, err := read.read(t, tc.ledger)
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("err = %v, want one containing %q", err, tc.want)
				}
			})
		}
	}
}

// FuzzReadLedger: any input either reads, with every run in a known
// state, or is an error naming a line; a torn tail never makes an error.
func FuzzReadLedger(f *testing.F) {
	f.Add(ledgerHeader + ledgerStarted("a", 1) + ledgerFinished("a", 1, "ok", false) + ledgerEnd)
	f.Add(ledgerHeader + ledgerStarted("a", 1) + `{"type":"fin`)
	f.Add(ledgerHeader + ledgerStarted("a", 1) + ledgerFinished("a", 1, "failed", true) + ledgerHeader + ledgerStarted("a", 2))
	f.Add("{}\n")
	f.Fuzz(func(t *testing.T, s string) {
		log, err := readLedger(strings.NewReader(s), "f")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "ledger f:") {
				t.Fatalf("error without file and line: %v", err)
			}
			return
		}
		if log.Size+log.Torn != int64(len(s)) {
			t.Fatalf("size %d + torn %d != %d", log.Size, log.Torn, len(s))
		}
		for _, run := range runsOf(log) {
			switch run.State {
			case StateRunning, StateSucceeded, StateFailed, StateInterrupted, StatePruned:
			default:
				t.Fatalf("run %s in state %q", run.ID, run.State)
			}
		}
		// A read for a timeline tells the same states, and gives every
		// attempt an ending.
		// (A read for a timeline reads times, lanes and GPUs a resume does
		// not need: one it cannot read is an error naming the line.)
		timeline, err := readers[2].read(t, s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "ledger l:") {
				t.Fatalf("error without file and line: %v", err)
			}
			return
		}
		runs := runsOf(log)
		if timeline.Len() != len(runs) {
			t.Fatalf("%d runs for a timeline, %d read", timeline.Len(), len(runs))
		}
		for id, run := range runsOf(timeline) {
			if run != runs[id] {
				t.Fatalf("run %s: for a timeline %+v, read %+v", id, run, runs[id])
			}
		}
		for _, a := range timeline.Attempts() {
			if a.Ending() == "running" && (!timeline.Live() || timeline.At(int(a.Run)).State != StateRunning) {
				t.Fatalf("attempt %d of %s runs on, in a log that is over or a run that is not running", a.N, timeline.At(int(a.Run)).ID)
			}
		}
		// Whatever follows a torn tail once it is completed must not change
		// what the complete lines said.
		if log.Torn > 0 {
			again, err := readLedger(strings.NewReader(s[:log.Size]), "f")
			if err != nil || again.Len() != log.Len() {
				t.Fatalf("the complete lines alone: %v, %d runs, want %d", err, again.Len(), log.Len())
			}
		}
	})
}

func TestResume(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out", "ledger.jsonl")
	ledger := ledgerHeader + ledgerStarted("ok", 1) + ledgerFinished("ok", 1, "ok", false) +
		ledgerStarted("bad", 1) + ledgerFinished("bad", 1, "failed", false) +
		ledgerStarted("cut", 1) + ledgerFinished("cut", 1, "interrupted", false) +
		ledgerStarted("killed", 2) // nodepack died here: no end record
	os.MkdirAll(filepath.Dir(path), 0o755)
	os.WriteFile(path, []byte(ledger), 0o644)
	l, err := Open(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	runs := run.Runs(run.Run{ID: "ok"}, run.Run{ID: "bad"}, run.Run{ID: "cut"}, run.Run{ID: "killed"}, run.Run{ID: "new"})
	for _, tc := range []struct {
		retryFailed bool
		want        []string
		counts      ResumeCounts
	}{
		{false, []string{"cut", "killed", "new"}, ResumeCounts{SkippedSucceeded: 1, SkippedFailed: 1, Interrupted: 2, New: 1}},
		{true, []string{"bad", "cut", "killed", "new"}, ResumeCounts{SkippedSucceeded: 1, RetriedFailed: 1, Interrupted: 2, New: 1}},
	} {
		var retry func(Run) bool
		if tc.retryFailed {
			retry = func(Run) bool { return true }
		}
		pending, counts := resume(l.Past(), runs, retry)
		var got []string
		for run := range pending {
			got = append(got, run.ID)
		}
		if strings.Join(got, " ") != strings.Join(tc.want, " ") || counts() != tc.counts {
			t.Errorf("retryFailed %v: ran %v, counts %+v; want %v, %+v", tc.retryFailed, got, counts(), tc.want, tc.counts)
		}
	}
	if l.Past().PriorAttempts("killed") != 2 || l.Past().PriorAttempts("new") != 0 {
		t.Errorf("prior attempts %d, %d; want 2, 0", l.Past().PriorAttempts("killed"), l.Past().PriorAttempts("new"))
	}
}

func TestOpenLedgerIsExclusive(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.jsonl")
	l, err := Open(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := Open(path, false); err == nil || !strings.Contains(err.Error(), "another nodepack") {
		t.Errorf("second Open: %v, want it refused", err)
	}
}

// fullDisk is a ledger file on a disk that fills up after room bytes.
// Space reserved with Reserve stays writable; with noReserve the file
// system cannot reserve at all.
type fullDisk struct {
	b         []byte
	room      int
	reserved  int
	noReserve bool
}

func (f *fullDisk) Write(p []byte) (int, error) {
	n := min(len(p), max(f.room, f.reserved)-len(f.b))
	f.b = append(f.b, p[:n]...)
	if n < len(p) {
		return n, syscall.ENOSPC
	}
	return n, nil
}
func (f *fullDisk) Reserve(off, n int64) error {
	if f.noReserve {
		return errors.ErrUnsupported
	}
	if int(off+n) > f.room {
		return syscall.ENOSPC
	}
	f.reserved = max(f.reserved, int(off+n))
	return nil
}
func (f *fullDisk) ReadAt(p []byte, off int64) (int, error) {
	return strings.NewReader(string(f.b)).ReadAt(p, off)
}
func (f *fullDisk) Stat() (os.FileInfo, error) { return nil, errors.ErrUnsupported }
func (f *fullDisk) Sync() error                { return nil }
func (f *fullDisk) Truncate(size int64) error  { f.b = f.b[:size]; return nil }
func (f *fullDisk) Close() error               { return nil }
func (f *fullDisk) contents() string           { return string(f.b) }
func (f *fullDisk) records() (*Log, error) {
	return readLedger(strings.NewReader(f.contents()), "disk")
}

func startedEvent(i int) run.Event {
	return run.Event{Kind: run.Started, Run: run.Run{ID: "run" + strconv.Itoa(i)}, Attempt: 1, Start: time.Now()}
}

// TestFullDiskKeepsTheLedgerWhole: where no room can be reserved, a write
// cut short by a full disk is taken back, and nothing is written after it.
func TestFullDiskKeepsTheLedgerWhole(t *testing.T) {
	disk := &fullDisk{room: 700, noReserve: true}
	l := &Writer{path: "disk", dir: ".", past: &Log{byID: newIDIndex()}, file: disk}
	if err := l.WriteHeader(Header{Version: "test"}); err != nil {
		t.Fatal(err)
	}
	var err error
	for i := 0; err == nil && i < 100; i++ {
		err = l.Append(startedEvent(i))
	}
	if !errors.Is(err, syscall.ENOSPC) || !errors.Is(l.Err(), syscall.ENOSPC) || !errors.Is(l.Problem(), syscall.ENOSPC) {
		t.Fatalf("err %v, ledger err %v, problem %v; want ENOSPC", err, l.Err(), l.Problem())
	}
	size := len(disk.b)
	if err := l.WriteEnd("done", 0); !errors.Is(err, syscall.ENOSPC) || len(disk.b) != size {
		t.Errorf("a write after the error: %v, %d bytes more", err, len(disk.b)-size)
	}
	log, err := disk.records()
	if err != nil || log.Torn != 0 || log.Len() == 0 {
		t.Errorf("after a full disk the ledger reads %v, torn %d, %d runs; want whole records", err, log.Torn, log.Len())
	}
}

// TestFullDiskIsSeenBeforeWritesFail: with room reserved past the end, a
// disk that fills up is a Problem while records still fit, so the sweep
// stops starting runs and still records the running ones and its end.
func TestFullDiskIsSeenBeforeWritesFail(t *testing.T) {
	disk := &fullDisk{room: 1 << 30}
	l := &Writer{path: "disk", dir: ".", past: &Log{byID: newIDIndex()}, file: disk}
	if err := l.WriteHeader(Header{Version: "test"}); err != nil {
		t.Fatal(err)
	}
	disk.room = len(disk.b) + 100 // another program fills the disk
	i := 0
	for ; l.Problem() == nil && i < 10000; i++ {
		if err := l.Append(startedEvent(i)); err != nil {
			t.Fatalf("record %d: %v before the problem was reported", i, err)
		}
	}
	if p := l.Problem(); p == nil || !strings.Contains(p.Error(), "disk full") || !errors.Is(p, syscall.ENOSPC) {
		t.Fatalf("problem %v, want disk full", p)
	}
	for j := range 200 { // the running runs end
		if err := l.Append(run.Event{Kind: run.Finished, Run: run.Run{ID: "run" + strconv.Itoa(j)}, Attempt: 1, Reason: run.OK}); err != nil {
			t.Fatalf("finished record %d after the problem: %v", j, err)
		}
	}
	if err := l.WriteEnd("stopped: disk full", 3); err != nil {
		t.Fatalf("end record: %v", err)
	}
	log, err := disk.records()
	if err != nil || log.End == nil || log.End.Note != "stopped: disk full" {
		t.Errorf("ledger reads %v, end %+v", err, log.End)
	}
}

// TestFullDiskOnARealFileSystem fills a small tmpfs under an open ledger:
// the ledger reports the full disk while its reserve still takes the last
// records and the end record. It needs root to mount the tmpfs.
func TestFullDiskOnARealFileSystem(t *testing.T) {
	dir := t.TempDir()
	if err := exec.Command("mount", "-t", "tmpfs", "-o", "size=2m", "nodepack-test", dir).Run(); err != nil {
		t.Skipf("cannot mount a tmpfs here (needs root): %v", err)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	path := filepath.Join(dir, "out", "ledger.jsonl")
	l, err := Open(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.WriteHeader(Header{Version: "test"}); err != nil {
		t.Fatal(err)
	}
	filler, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 4096)
	for {
		if _, err := filler.Write(chunk); err != nil {
			break
		}
	}
	filler.Close()
	i := 0
	for ; l.Problem() == nil && i < 100000; i++ {
		if err := l.Append(startedEvent(i)); err != nil {
			t.Fatalf("record %d failed before the full disk was reported: %v", i, err)
		}
	}
	if p := l.Problem(); p == nil || !errors.Is(p, syscall.ENOSPC) {
		t.Fatalf("after %d records: problem %v, want the full disk", i, p)
	}
	for j := range 100 {
		if err := l.Append(run.Event{Kind: run.Finished, Run: run.Run{ID: "run" + strconv.Itoa(j)}, Attempt: 1, Reason: run.OK}); err != nil {
			t.Fatalf("finished record %d: %v", j, err)
		}
	}
	if err := l.WriteEnd("stopped: disk full", 0); err != nil {
		t.Fatalf("end record: %v", err)
	}
	log, err := ReadFile(path, ReadOptions{})
	if err != nil || log.End == nil || log.Torn != 0 {
		t.Fatalf("the ledger reads %v, end %v, torn %d", err, log.End, log.Torn)
	}
}

// TestDeletedLedgerIsWrittenAgain: a ledger deleted under a running sweep
// is written again from the open file with every record, the sweep is told
// to stop starting runs, and the lock still keeps a second writer out.
func TestDeletedLedgerIsWrittenAgain(t *testing.T) {
	l, path := openTestLedger(t)
	l.Append(startedEvent(1))
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path, false); err == nil || !strings.Contains(err.Error(), "is writing it") {
		t.Errorf("a second writer after the delete: %v, want it refused", err)
	}
	if err := l.Append(run.Event{Kind: run.Finished, Run: run.Run{ID: "run1"}, Attempt: 1, Reason: run.OK}); err != nil {
		t.Fatal(err)
	}
	if p := l.Problem(); p == nil || !strings.Contains(p.Error(), "was deleted while the sweep ran") {
		t.Errorf("problem %v, want the deletion", p)
	}
	log, err := ReadFile(path, ReadOptions{})
	if r, _ := log.Run("run1"); err != nil || len(log.Sessions) != 1 || r.State != StateSucceeded {
		t.Fatalf("the ledger on disk: %v, %+v", err, log)
	}
	// Written again with the mode it had, so that other accounts reading
	// status over a shared file system still may.
	if after, err := os.Stat(path); err != nil || after.Mode().Perm() != before.Mode().Perm() {
		t.Errorf("the ledger written again has mode %v (%v), it had %v", after.Mode().Perm(), err, before.Mode().Perm())
	}
}

// TestReplacedLedgerIsKeptBeside: a file put in the ledger's place is not
// overwritten; the sweep's records go to a file beside it, which the
// problem names.
func TestReplacedLedgerIsKeptBeside(t *testing.T) {
	l, path := openTestLedger(t)
	os.Remove(path)
	os.WriteFile(path, []byte("someone else's\n"), 0o644)
	l.Append(startedEvent(1))
	p := l.Problem()
	if p == nil || !strings.Contains(p.Error(), "replaced by another file") {
		t.Fatalf("problem %v", p)
	}
	recovered, _ := filepath.Glob(path + ".*.recovered")
	if len(recovered) != 1 || !strings.Contains(p.Error(), recovered[0]) {
		t.Fatalf("recovered files %v, problem %v", recovered, p)
	}
	if b, _ := os.ReadFile(path); string(b) != "someone else's\n" {
		t.Errorf("the other file was overwritten: %q", b)
	}
	if log, err := ReadFile(recovered[0], ReadOptions{}); err != nil || log.PriorAttempts("run1") == 0 {
		t.Errorf("recovered ledger: %v", err)
	}
}

// TestRestartTakesTheLockFirst: --restart while another nodepack writes the
// ledger is refused, naming it, and the live ledger stays where it is.
func TestRestartTakesTheLockFirst(t *testing.T) {
	l, path := openTestLedger(t)
	host, _ := os.Hostname()
	_, err := Open(path, true)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("pid %d on %s", os.Getpid(), host)) {
		t.Errorf("restart while in use: %v, want it refused naming pid and host", err)
	}
	if backups, _ := filepath.Glob(path + ".*.bak"); len(backups) != 0 {
		t.Errorf("the live ledger was moved to %v", backups)
	}
	l.Close()
	r, err := Open(path, true)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Backup() == "" || len(r.Past().Sessions) != 0 {
		t.Errorf("restart after the other ended: backup %q, %d sessions", r.Backup(), len(r.Past().Sessions))
	}
}

// openTestLedger opens a new ledger with a header, closed at the test's end.
func openTestLedger(t *testing.T) (*Writer, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ledger.jsonl")
	l, err := Open(path, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if err := l.WriteHeader(Header{Version: "test"}); err != nil {
		t.Fatal(err)
	}
	return l, path
}

// TestRequestAndMeasuredGPUMemory: started and finished records say what
// the run asked for, in the form --request takes, and the finished record
// holds the GPU memory its own processes used at their peak.
func TestRequestAndMeasuredGPUMemory(t *testing.T) {
	l, path := openTestLedger(t)
	req := pack.Request{GPUMem: 12 << 30, CPUs: 2}
	place := pack.Assignment{Request: req, GPUs: []pack.GPU{{UUID: "GPU-a"}}, CPUs: []int{4, 5}, SharedGPUs: true}
	r1 := run.Run{ID: "run1"}
	start := time.Now()
	if err := l.Append(run.Event{Kind: run.Started, Run: r1, Attempt: 1, Start: start, Lane: 3, Place: place}); err != nil {
		t.Fatal(err)
	}
	ended := run.Event{Kind: run.Finished, Run: r1, Attempt: 1, Start: start, End: start.Add(time.Second), Lane: 3, Place: place, Reason: run.OK}
	ended.Usage.Sampled.GPUs = []usage.GPU{{UUID: "GPU-a", Samples: 4, ProcessPeakMemoryBytes: 9 << 30}}
	if err := l.Append(ended); err != nil {
		t.Fatal(err)
	}
	log, err := ReadFile(path, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var started *Started
	var finished *Finished
	log.LastAll(func(_ int, s *Started, f *Finished) error { started, finished = s, f; return nil })
	if started == nil || finished == nil || started.Request != "gpu_mem=12GiB cpus=2" || finished.Request != "gpu_mem=12GiB cpus=2" {
		t.Fatalf("requests recorded: %+v %+v", started, finished)
	}
	if g := finished.GPUUsage; len(g) != 1 || g[0].UUID != "GPU-a" || g[0].ProcessPeakMemoryBytes != 9<<30 {
		t.Errorf("GPU usage recorded: %+v, want GPU-a's 9 GiB", g)
	}
}

// TestLogPathsRelativeToTheLedger: a record names a log by its path from
// the ledger's directory when the log is inside it, else by the path given.
func TestLogPathsRelativeToTheLedger(t *testing.T) {
	l := &Writer{absDir: "/out"}
	for _, c := range []struct{ desc, path, want string }{
		{"a run's log", "/out/runs/a-1/stdout.log", "runs/a-1/stdout.log"},
		{"no log", "", ""},
		{"a directory beside, with the same prefix", "/out2/runs/a/stdout.log", "/out2/runs/a/stdout.log"},
		{"outside", "/elsewhere/x.log", "/elsewhere/x.log"},
		{"not clean, inside", "/out/runs/../runs/a/stdout.log", "runs/a/stdout.log"},
		{"not clean, leading outside", "/out/../x.log", "/out/../x.log"},
		{"relative", "runs/a/stdout.log", "runs/a/stdout.log"},
	} {
		if got := l.relative(c.path); got != c.want {
			t.Errorf("%s: relative(%q) = %q, want %q", c.desc, c.path, got, c.want)
		}
	}
	root := &Writer{absDir: "/"}
	if got := root.relative("/runs/a/stdout.log"); got != "runs/a/stdout.log" {
		t.Errorf("ledger in /: %q", got)
	}
}

// resume filters runs by ResumeFilter, as a source that does not leave
// runs out itself would.
func resume(log *Log, runs iter.Seq2[run.Run, error], retry func(Run) bool) (iter.Seq2[run.Run, error], func() ResumeCounts) {
	skip, counts := log.ResumeFilter(retry)
	return func(yield func(run.Run, error) bool) {
		for r, err := range runs {
			if err != nil {
				yield(r, err)
				return
			}
			if !skip(r.ID) && !yield(r, nil) {
				return
			}
		}
	}, counts
}

// TestUnknownRecordsAreLeftOut: a record of a type this nodepack does not
// know (a newer nodepack's) is left out and counted, by type, at most
// maxUnknownTypes of them named, and the runs read as before; a rerun's
// writer says so.
func TestUnknownRecordsAreLeftOut(t *testing.T) {
	text := ledgerHeader + `{"type":"forecast","id":"a","step":3}` + "\n" + ledgerStarted("a", 1) + `{"type":"forecast","id":"a","step":6}` + "\n" +
		ledgerFinished("a", 1, "ok", false)
	for i := range maxUnknownTypes + 2 {
		text += fmt.Sprintf(`{"type":"t%d"}`, i) + "\n"
	}
	for _, read := range readers {
		t.Run(read.name, func(t *testing.T) {
			log, err := read.read(t, text)
			if err != nil {
				t.Fatal(err)
			}
			if r, _ := log.Run("a"); r.State != StateSucceeded {
				t.Errorf("run a %s, want succeeded", r.State)
			}
			if len(log.Unknown) != maxUnknownTypes+1 || log.Unknown["forecast"] != 2 || log.Unknown["…"] != 3 {
				t.Errorf("unknown records %v; want forecast ×2 and %d types named, the rest as …", log.Unknown, maxUnknownTypes)
			}
		})
	}
	path := filepath.Join(t.TempDir(), FileName(0, 1))
	os.WriteFile(path, []byte(text), 0o644)
	w, err := Open(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if warn := w.Warnings(); len(warn) != 1 || !strings.Contains(warn[0], `left out 12 records of types this nodepack does not know ("forecast" ×2, "t0" ×1,`) {
		t.Errorf("warnings %q", warn)
	}
}
