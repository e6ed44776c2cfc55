package ledger

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/resources/usage"
	"github.com/nodepack/nodepack/runner/run"
)

// TestWrittenRecordsTakeTheFastPath checks that every record a Writer
// makes, with the bytes a command line, an error or a GPU's usage may
// bring, is read by scanHead, and read right: otherwise a big ledger
// falls back to encoding/json and a resume takes seconds again.
func TestWrittenRecordsTakeTheFastPath(t *testing.T) {
	l := &Writer{dir: "/out", host: "node-1"}
	r := run.Run{ID: "0123456789ab-2", Index: 7, Origin: "tasks.txt:3 \"quoted\" \\ tab\t é \u2028", Args: []string{"bash", "-c", "x"}}
	slot := pack.Assignment{CPUs: []int{0, 1, 4}, GPUs: []pack.GPU{{Index: 0, UUID: "GPU-a"}}, Request: pack.Request{GPUs: 1, CPUs: 3}}
	now := time.Date(2026, 11, 24, 1, 2, 3, 4, time.UTC)
	events := []run.Event{
		{Kind: run.Started, Run: r, Attempt: 1, Lane: 3, Place: slot, Stdout: "/out/runs/x/stdout.log", Stderr: "/out/runs/x/stderr.log", Start: now, PID: 42},
		{Kind: run.Finished, Run: r, Attempt: 1, Lane: 3, Place: slot, Start: now, End: now.Add(time.Second), ExitCode: 0, Reason: run.OK},
		{Kind: run.Finished, Run: r, Attempt: 2, Lane: 3, Place: slot, Start: now, End: now.Add(time.Second), ExitCode: 137, Signal: "SIGKILL", Reason: run.Failed, Retry: true,
			Err: errors.New("write \"log\":\nno space"), Usage: run.Usage{MaxRSS: 1 << 40, CPU: time.Minute, Sampled: usage.Sampled{TreeRSSPeak: 5, GPUs: []usage.GPU{{UUID: "GPU-a", ProcessPeakMemoryBytes: 9 << 30}}}}},
		{Kind: run.Finished, Run: r, Attempt: 3, Lane: 3, Place: slot, Start: now, End: now, ExitCode: -1, Reason: run.TimedOut},
		{Kind: run.Finished, Run: r, Attempt: 4, Lane: 3, Place: slot, Start: now, End: now, ExitCode: 143, Reason: run.Interrupted},
	}
	for _, ev := range events {
		line, err := json.Marshal(l.record(ev))
		if err != nil {
			t.Fatal(err)
		}
		h, ok := scanHead(line)
		if !ok {
			t.Errorf("scanHead does not read %s", line)
			continue
		}
		var rec Record
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Fatal(err)
		}
		checkHead(t, line, h, &rec)
	}
}

// checkHead fails t when scanHead's head of line says other than
// encoding/json's decoding of it.
func checkHead(t *testing.T, line []byte, h head, rec *Record) {
	t.Helper()
	if string(h.typ) != rec.Type || string(h.id) != rec.ID || string(h.reason) != string(rec.Reason) ||
		h.attempt != rec.Attempt || h.retry != rec.Retry || h.exitCode != (rec.ExitCode != nil) {
		t.Errorf("%s: scanHead reads type %q id %q reason %q attempt %d retry %v exit code %v; encoding/json %q %q %q %d %v %v",
			line, h.typ, h.id, h.reason, h.attempt, h.retry, h.exitCode, rec.Type, rec.ID, rec.Reason, rec.Attempt, rec.Retry, rec.ExitCode != nil)
	}
}

// TestScanHeadDeclines lists lines scanHead must leave to encoding/json.
func TestScanHeadDeclines(t *testing.T) {
	for _, tc := range []struct{ desc, line string }{
		{"blanks between tokens", `{"type": "started","id":"a","attempt":1}`},
		{"an escape in a value it reads", `{"type":"started","id":"a\u0062","attempt":1}`},
		{"a key in other case", `{"type":"started","id":"a","ID":"b","attempt":1}`},
		{"a control byte in a string", "{\"type\":\"started\",\"origin\":\"a\nb\",\"id\":\"a\",\"attempt\":1}"},
		{"a torn line", `{"type":"started","id":"a"`},
		{"an unclosed array", `{"type":"started","gpus":["a","b"}`},
		{"a bad literal", `{"type":"finished","retry":ture}`},
		{"an attempt that is no integer", `{"type":"started","id":"a","attempt":1.5}`},
		{"trailing bytes", `{"type":"started","id":"a","attempt":1}}`},
		{"NUL bytes, as a crash leaves", "\x00\x00\x00\x00"},
	} {
		if _, ok := scanHead([]byte(tc.line)); ok {
			t.Errorf("%s: scanHead reads %s", tc.desc, tc.line)
		}
	}
}

// FuzzScanHead checks that scanHead never reads a line otherwise than
// encoding/json does.
func FuzzScanHead(f *testing.F) {
	f.Add(`{"type":"finished","time":"2026-01-01T00:00:02Z","id":"a","attempt":2,"exit_code":1,"reason":"failed","retry":true,"gpu_usage":[{"uuid":"x"}]}`)
	f.Add(`{"type":"started","id":"a","attempt":1,"slot":0,"gpus":["GPU-1"]}`)
	f.Add(`{"ID":"b","id":"a"}`)
	f.Fuzz(func(t *testing.T, line string) {
		h, ok := scanHead([]byte(line))
		var rec Record
		if !ok || json.Unmarshal([]byte(line), &rec) != nil {
			return
		}
		checkHead(t, []byte(line), h, &rec)
	})
}

// TestLeanReadKeepsWhatAResumeAndAStatusNeed compares a lean read of a
// ledger with Read: the same runs in the same states; the records of
// the runs that did not succeed, and none of those that did.
func TestLeanReadKeepsWhatAResumeAndAStatusNeed(t *testing.T) {
	text := ledgerHeader + ledgerStarted("ok", 1) + ledgerFinished("ok", 1, "ok", false) +
		ledgerStarted("failed", 1) + strings.Replace(ledgerFinished("failed", 1, "failed", false), `"exit_code":0`, `"exit_code":3,"error":"a \"quoted\"\nerror"`, 1) +
		ledgerStarted("retried", 1) + ledgerFinished("retried", 1, "failed", true) + ledgerStarted("retried", 2) +
		ledgerStarted("stopped", 1) + ledgerFinished("stopped", 1, "interrupted", false) +
		ledgerStarted("later", 1) + ledgerFinished("later", 1, "failed", false) + ledgerEnd + ledgerHeader + ledgerStarted("later", 2) + ledgerFinished("later", 2, "ok", false)
	full, err := readLedger(strings.NewReader(text), "l")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "ledger.jsonl")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	lean, err := readLean(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(full.Order, lean.Order) || len(full.Runs) != len(lean.Runs) || lean.Size != full.Size {
		t.Fatalf("lean read: runs %v size %d; Read: %v %d", lean.Order, lean.Size, full.Order, full.Size)
	}
	for id, f := range full.Runs {
		l := lean.Runs[id]
		if l.State != f.State || l.Attempts != f.Attempts || l.Session != f.Session || l.Retired != f.Retired {
			t.Errorf("run %s: lean %+v, Read %+v", id, l, f)
		}
		if f.State == StateSucceeded {
			if l.Started != nil || l.Finished != nil {
				t.Errorf("run %s succeeded: the lean read kept its records", id)
			}
			continue
		}
		if !reflect.DeepEqual(l.Started, f.Started) || !reflect.DeepEqual(l.Finished, f.Finished) {
			t.Errorf("run %s %s: lean records %+v %+v, Read %+v %+v", id, f.State, l.Started, l.Finished, f.Started, f.Finished)
		}
	}
	if f := lean.Runs["failed"].Finished; f == nil || f.Error != "a \"quoted\"\nerror" || *f.ExitCode != 3 {
		t.Errorf("failed run's record %+v", f)
	}
}

// TestOpenFromReadsAChangedLedgerAgain checks that OpenFrom takes a read
// Log as the ledger's past only while the file is the one read, unchanged.
func TestOpenFromReadsAChangedLedgerAgain(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, FileName(0, 1))
	text := ledgerHeader + ledgerStarted("a", 1) + ledgerFinished("a", 1, "ok", false) + ledgerEnd
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		desc   string
		change func()
		same   bool
		state  State
	}{
		{"unchanged: the read is the past", func() {}, true, StateSucceeded},
		{"another session appended: read again", func() {
			f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteString(ledgerHeader + ledgerStarted("a", 2) + ledgerFinished("a", 2, "failed", false) + ledgerEnd)
			f.Close()
		}, false, StateFailed},
		{"replaced by another file: read again", func() {
			os.Remove(path)
			os.WriteFile(path, []byte(text), 0o644)
		}, false, StateSucceeded},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			d, err := ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			tc.change()
			w, err := OpenFrom(path, d.Log(FileName(0, 1)))
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			if same := w.Past() == d.Log(FileName(0, 1)); same != tc.same {
				t.Errorf("past is the read Log: %v, want %v", same, tc.same)
			}
			if got := w.Past().Runs["a"].State; got != tc.state {
				t.Errorf("run a %s, want %s", got, tc.state)
			}
		})
	}
}

// TestWrittenRecordsDecodeFast: every started and finished record a
// Writer makes, with params, metrics, curves, GPU usage and the bytes a
// command line or an error may bring, takes decodeRecord, and decodes as
// encoding/json decodes it.
func TestWrittenRecordsDecodeFast(t *testing.T) {
	l := &Writer{dir: "/out", host: "node-1"}
	r := run.Run{ID: "0123456789ab", Index: 7, Origin: "grid.yml:3 é", Args: []string{"python"}, Params: json.RawMessage(`{"lr":0.1,"model":"resnet, 50","layers":[64,128]}`)}
	slot := pack.Assignment{CPUs: []int{0, 1, 4}, GPUs: []pack.GPU{{Index: 0, UUID: "GPU-a"}, {Index: 1, UUID: "GPU-b"}}, Request: pack.Request{GPUs: 2, CPUs: 3}}
	now := time.Date(2026, 11, 24, 1, 2, 3, 4, time.UTC)
	events := []run.Event{
		{Kind: run.Started, Run: r, Attempt: 1, Lane: 3, Place: slot, Stdout: "/out/runs/x/stdout.log", Stderr: "/out/runs/x/stderr.log", Start: now, PID: 42},
		{Kind: run.Finished, Run: r, Attempt: 1, Lane: 3, Place: slot, Start: now, End: now.Add(2272 * time.Millisecond), ExitCode: 0, Reason: run.OK,
			Metrics: json.RawMessage(`{"loss":0.41,"acc":"nan"}`), Curves: json.RawMessage(`{"loss":[[0,2.2],[100,1.6]]}`), MetricsSkipped: 2,
			Usage: run.Usage{MaxRSS: 1 << 40, CPU: time.Minute, Sampled: usage.Sampled{TreeRSSPeak: 5, GPUs: []usage.GPU{{UUID: "GPU-a", ProcessPeakMemoryBytes: 9 << 30}}}}},
		{Kind: run.Finished, Run: r, Attempt: 2, Lane: 0, Place: slot, Start: now, End: now, ExitCode: 137, Signal: "SIGKILL", Reason: run.Failed, Retry: true,
			Class: "host-oom", StderrTail: []string{"a", "b"}},
	}
	for _, ev := range events {
		line, err := json.Marshal(l.record(ev))
		if err != nil {
			t.Fatal(err)
		}
		var fast, slow Record
		if !decodeRecord(line, &fast) {
			t.Fatalf("decodeRecord declined %s", line)
		}
		if err := json.Unmarshal(line, &slow); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Errorf("decodeRecord differs from encoding/json on %s:\n%+v\n%+v", line, fast, slow)
		}
	}
	// An escaped string, a key in other letters, blanks: encoding/json's.
	for _, line := range []string{
		`{"type":"started","id":"a\u0062","attempt":1}`,
		`{"type":"started","ID":"a","attempt":1}`,
		`{"type": "started","id":"a","attempt":1}`,
		`{"type":"started","id":"a","attempt":01}`,
		`{"type":"header","time":"2026-11-24T10:00:00Z"}`,
	} {
		var rec Record
		if decodeRecord([]byte(line), &rec) {
			t.Errorf("decodeRecord took %s", line)
		}
	}
}

// FuzzDecodeRecord: what decodeRecord takes, encoding/json takes too, and
// reads the same.
func FuzzDecodeRecord(f *testing.F) {
	f.Add(`{"type":"finished","time":"2026-01-01T00:00:02Z","id":"a","attempt":2,"exit_code":1,"reason":"failed","retry":true,"gpu_usage":[{"uuid":"x"}],"metrics":{"loss":1},"curves":{"loss":[[1,2]]}}`)
	f.Add(`{"type":"started","id":"a","attempt":1,"slot":0,"gpus":["GPU-1"],"params":{"a":[1,"x"]},"time":"2026-01-01T00:00:02.5+01:00"}`)
	f.Add(`{"type":"started","stderr_tail":[],"duration_s":1e-3,"max_rss_bytes":18446744073709551615}`)
	f.Fuzz(func(t *testing.T, line string) {
		var fast, slow Record
		if !decodeRecord([]byte(line), &fast) {
			return
		}
		if err := json.Unmarshal([]byte(line), &slow); err != nil {
			t.Fatalf("decodeRecord took %q, which encoding/json refuses: %v", line, err)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("%q:\nfast %+v\njson %+v", line, fast, slow)
		}
	})
}

// TestStreamFoldsAsRead: a streamed read of a ledger (Stream) has the same
// runs, in the same order and states, as a full read, keeps no record, and
// calls each with every record and the place of its run.
func TestStreamFoldsAsRead(t *testing.T) {
	text := ledgerHeader + ledgerStarted("ok", 1) + ledgerFinished("ok", 1, "ok", false) +
		ledgerStarted("failed", 1) + ledgerFinished("failed", 1, "failed", false) +
		ledgerStarted("retried", 1) + ledgerFinished("retried", 1, "failed", true) + ledgerStarted("retried", 2) +
		ledgerStarted("stopped", 1) + ledgerFinished("stopped", 1, "interrupted", false) +
		ledgerStarted("cut", 1) + // killed: no end record
		ledgerHeader + ledgerStarted("later", 1) + ledgerFinished("later", 1, "ok", false) + ledgerEnd
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, FileName(0, 1)), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	full, err := sweepLogs(dir, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	var calls []string
	streamed, err := Stream(dir, func(file string, rec *Record, run, size int) {
		calls = append(calls, fmt.Sprintf("%s %s %d", rec.Type, rec.ID, run))
	})
	if err != nil {
		t.Fatal(err)
	}
	f, s := full[0], streamed[0]
	if s.Runs != nil || s.Order != nil || s.Len() != f.Len() || s.Size != f.Size {
		t.Fatalf("streamed: %d runs, map %v; full: %d", s.Len(), s.Runs, f.Len())
	}
	for i := range f.Len() {
		a, b := f.At(i), s.At(i)
		if a.ID != b.ID || a.State != b.State || a.Attempts != b.Attempts || a.Session != b.Session || a.Retired != b.Retired {
			t.Errorf("run %d: streamed %+v, full %+v", i, b, a)
		}
		if b.Started != nil || b.Finished != nil {
			t.Errorf("run %s: the streamed read kept its records", b.ID)
		}
	}
	want := "header  -1|started ok 0|finished ok 0|started failed 1|finished failed 1|started retried 2|finished retried 2|started retried 2|started stopped 3|finished stopped 3|started cut 4|header  -1|started later 5|finished later 5|end  -1"
	if got := strings.Join(calls, "|"); got != want {
		t.Errorf("each was called with\n%s\nwant\n%s", got, want)
	}
}
