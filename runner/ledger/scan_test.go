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
		checkHead(t, line, h)
	}
}

// checkHead fails t when scanHead's head of line says other than
// encoding/json's decoding of it.
func checkHead(t *testing.T, line []byte, h head) {
	t.Helper()
	want, err := headOf(line)
	if err != nil {
		t.Fatalf("%s: scanHead reads it, encoding/json does not: %v", line, err)
	}
	if !reflect.DeepEqual(h.fields(), want.fields()) {
		t.Errorf("%s: scanHead reads %v; encoding/json %v", line, h.fields(), want.fields())
	}
}

// fields is what a head says, for a comparison.
func (h head) fields() []any {
	return []any{string(h.typ), string(h.id), string(h.reason), string(h.class), string(h.signal), h.attempt, h.retry, h.hasExit, h.exitCode}
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
		if h, ok := scanHead([]byte(line)); ok {
			checkHead(t, []byte(line), h)
		}
	})
}

// TestLastReadsTheLastRecords: Last gives each run's last started and
// finished records, as encoding/json reads them, whatever runs between
// them; and says so when the file is no longer the one read.
func TestLastReadsTheLastRecords(t *testing.T) {
	text := ledgerHeader + ledgerStarted("ok", 1) + ledgerStarted("failed", 1) + ledgerFinished("ok", 1, "ok", false) +
		strings.Replace(ledgerFinished("failed", 1, "failed", false), `"exit_code":0`, `"exit_code":3,"error":"a \"quoted\"\nerror"`, 1) +
		ledgerStarted("retried", 1) + ledgerFinished("retried", 1, "failed", true) + ledgerStarted("retried", 2) +
		ledgerStarted("later", 1) + ledgerFinished("later", 1, "failed", false) + ledgerEnd + ledgerHeader + ledgerStarted("later", 2) + ledgerFinished("later", 2, "ok", false)
	path := filepath.Join(t.TempDir(), "ledger.jsonl")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	log, err := ReadFile(path, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	err = log.LastAll(func(i int, s *Started, fin *Finished) error {
		desc := ""
		if s != nil {
			desc += fmt.Sprintf("started %d", s.Attempt)
		}
		if fin != nil {
			desc += fmt.Sprintf(" finished %d %s %d %q", fin.Attempt, fin.Reason, *fin.ExitCode, fin.Error)
		}
		got[log.At(i).ID] = desc
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"ok":      `started 1 finished 1 ok 0 ""`,
		"failed":  `started 1 finished 1 failed 3 "a \"quoted\"\nerror"`,
		"retried": `started 2 finished 1 failed 0 ""`,
		"later":   `started 2 finished 2 ok 0 ""`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Last gives\n%v\nwant\n%v", got, want)
	}
	i, _ := log.Find("failed")
	n := 0
	log.Last([]int{i}, func(j int, s *Started, fin *Finished) error { n++; return nil })
	if n != 1 {
		t.Errorf("Last of one run called f %d times", n)
	}
	// Started over: the file holds other records where the log read its own.
	if err := os.WriteFile(path, []byte(ledgerHeader+ledgerStarted("x", 1)+ledgerFinished("x", 1, "ok", false)+ledgerEnd+text), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := log.LastAll(func(int, *Started, *Finished) error { return nil }); err == nil || !strings.Contains(err.Error(), "changed since it was read") {
		t.Errorf("Last of a changed file: %v", err)
	}
}

// TestTimeline: a read for a timeline keeps every attempt with its
// ending: a killed session's attempt is interrupted at its last record,
// an ended session's at its end, and the live session's runs on.
func TestTimeline(t *testing.T) {
	at := func(s, typ, id string, attempt int, extra string) string {
		return fmt.Sprintf(`{"type":"%s","time":"2026-01-01T00:00:%sZ","id":"%s","attempt":%d,"slot":0%s}`+"\n", typ, s, id, attempt, extra)
	}
	header := func(s string) string {
		return `{"type":"header","time":"2026-01-01T00:00:` + s + `Z","format":"nodepack.ledger/v1","pid":1}` + "\n"
	}
	text := header("00") + at("01", "started", "a", 1, `,"gpus":["G0"],"cpus":"0-3","request":"gpus=0.25 cpus=4"`) + at("02", "started", "b", 1, "") +
		at("03", "finished", "a", 1, `,"exit_code":1,"reason":"failed","class":"cuda-oom","retry":true`) +
		// killed here: b's attempt ends with the session's last record
		header("10") + at("11", "started", "a", 2, "") + at("12", "finished", "a", 2, `,"exit_code":0,"reason":"ok"`) + at("13", "started", "c", 1, "") +
		`{"type":"end","time":"2026-01-01T00:00:15Z"}` + "\n" +
		header("20") + at("21", "started", "d", 1, "")
	log, err := readText(t, text, ReadOptions{Attempts: true})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range log.Attempts() {
		got = append(got, fmt.Sprintf("%s#%d %d-%d s%d %s %s %g %d %s", log.At(int(a.Run)).ID, a.N, a.Start%60000/1000, a.End%60000/1000, a.Session, a.Ending(), a.Class(), a.GPUShare, a.CPUs, log.GPUs(&a)))
	}
	want := []string{
		"a#1 1-3 s0 failed cuda-oom 0.25 4 G0",
		"b#1 2-3 s0 interrupted  0 1 ",
		"a#2 11-12 s1 ok  0 1 ",
		"c#1 13-15 s1 interrupted  0 1 ",
		"d#1 21-0 s2 running  0 1 ",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("attempts\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	spans := log.Spans()
	if len(spans) != 3 || spans[0].Last%60000 != 3000 || spans[1].End%60000 != 15000 || !spans[2].Live || spans[1].Live {
		t.Errorf("spans %+v", spans)
	}
}

// TestOpenFromReadsAChangedLedgerAgain checks that OpenFrom takes a read
// Log as the ledger's past only while the file is the one read, unchanged.
func TestOpenFromReadsAChangedLedgerAgain(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, FileName(0, 1))
	text := ledgerHeader + ledgerStarted("a", 1) + ledgerFinished("a", 1, "failed", false) + ledgerEnd
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		desc   string
		change func()
		same   bool
		state  State
	}{
		{"unchanged: the read is the past", func() {}, true, StateFailed},
		{"another session appended: read again", func() {
			f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteString(ledgerHeader + ledgerStarted("a", 2) + ledgerFinished("a", 2, "ok", false) + ledgerEnd)
			f.Close()
		}, false, StateSucceeded},
		{"replaced by another file: read again", func() {
			os.Remove(path)
			os.WriteFile(path, []byte(text), 0o644)
		}, false, StateFailed},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			d, err := ReadDir(dir, ReadOptions{})
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
			if got, _ := w.Past().Run("a"); got.State != tc.state {
				t.Errorf("run a %s, want %s", got.State, tc.state)
			}
		})
	}
}

// TestWrittenRecordsDecodeFast: every started and finished record a
// Writer makes, with params, metrics, curves, GPU usage and the bytes a
// command line or an error may bring, takes the fast decoder, and decodes
// as encoding/json decodes it.
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
		if !sameAsJSON(t, line) {
			t.Fatalf("the fast decoder declined %s", line)
		}
	}
	// An escaped string, a key in other letters, blanks, a leading zero,
	// another record type: encoding/json's.
	for _, line := range []string{
		`{"type":"started","id":"a\u0062","attempt":1}`,
		`{"type":"started","ID":"a","attempt":1}`,
		`{"type": "started","id":"a","attempt":1}`,
		`{"type":"started","id":"a","attempt":01}`,
		`{"type":"header","time":"2026-11-24T10:00:00Z"}`,
	} {
		if sameAsJSON(t, []byte(line)) {
			t.Errorf("the fast decoder took %s", line)
		}
	}
}

// sameAsJSON decodes line with the fast decoder, as a started and as a
// finished record, and fails t where encoding/json reads it otherwise; it
// reports whether the fast decoder took it.
func sameAsJSON(t *testing.T, line []byte) bool {
	t.Helper()
	var d decoder
	var fs, ss Started
	var ff, sf Finished
	took := false
	if d.started(line, &fs) {
		took = true
		if err := json.Unmarshal(line, &ss); err != nil {
			t.Fatalf("the fast decoder took %q, which encoding/json refuses: %v", line, err)
		}
		if !reflect.DeepEqual(fs, ss) {
			t.Fatalf("%q:\nfast %+v\njson %+v", line, fs, ss)
		}
	}
	if d.finished(line, &ff) {
		took = true
		if err := json.Unmarshal(line, &sf); err != nil {
			t.Fatalf("the fast decoder took %q, which encoding/json refuses: %v", line, err)
		}
		if !reflect.DeepEqual(ff, sf) {
			t.Fatalf("%q:\nfast %+v\njson %+v", line, ff, sf)
		}
	}
	var tm timing
	if _, ok := d.scan(line, &tm); ok {
		var want struct {
			Time    time.Time `json:"time"`
			Lane    *int      `json:"slot"`
			GPUs    []string  `json:"gpus"`
			CPUs    string    `json:"cpus"`
			Request string    `json:"request"`
		}
		if err := json.Unmarshal(line, &want); err != nil {
			t.Fatalf("the scan for a timeline took %q, which encoding/json refuses: %v", line, err)
		}
		if !tm.time.Equal(want.Time) || !reflect.DeepEqual(tm.lane, want.Lane) || !reflect.DeepEqual(tm.gpus, want.GPUs) || tm.cpus != want.CPUs || tm.request != want.Request {
			t.Fatalf("%q: the scan for a timeline reads %+v; json %+v", line, tm, want)
		}
	}
	return took
}

// FuzzDecodeRecord: what the fast decoder takes, encoding/json takes too,
// and reads the same.
func FuzzDecodeRecord(f *testing.F) {
	f.Add(`{"type":"finished","time":"2026-01-01T00:00:02Z","id":"a","attempt":2,"exit_code":1,"reason":"failed","retry":true,"gpu_usage":[{"uuid":"x"}],"metrics":{"loss":1},"curves":{"loss":[[1,2]]}}`)
	f.Add(`{"type":"started","id":"a","attempt":1,"slot":0,"gpus":["GPU-1"],"params":{"a":[1,"x"]},"time":"2026-01-01T00:00:02.5+01:00"}`)
	f.Add(`{"type":"started","stderr_tail":[],"duration_s":1e-3,"max_rss_bytes":18446744073709551615}`)
	f.Fuzz(func(t *testing.T, line string) {
		sameAsJSON(t, []byte(line))
	})
}

// TestLastWithoutCurves: NoCurves gives each run's last records as Last
// does, but for a finished record's curves and what follows them, left
// out; also where a record is not as json.Marshal writes it (read with
// encoding/json).
func TestLastWithoutCurves(t *testing.T) {
	fin := `{"type":"finished","time":"2026-01-01T00:00:02Z","id":"a","attempt":1,"exit_code":0,"reason":"ok","metrics":{"loss":0.5},"curves":{"loss":[[1,0.9],[2,0.5]]},"metrics_skipped":2,"steps":{"first":1,"last":2}}` + "\n"
	spaced := `{"type": "finished", "time": "2026-01-01T00:00:02Z", "id": "b", "attempt": 1, "exit_code": 0, "reason": "ok", "metrics": {"loss": 0.7}, "curves": {"loss": [[1, 0.9]]}, "steps": {"first": 1, "last": 1}}` + "\n"
	path := filepath.Join(t.TempDir(), "ledger.jsonl")
	os.WriteFile(path, []byte(ledgerHeader+ledgerStarted("a", 1)+fin+ledgerStarted("b", 1)+spaced+ledgerEnd), 0o644)
	log, err := ReadFile(path, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	all, without := map[string]Finished{}, map[string]Finished{}
	log.LastAll(func(i int, _ *Started, f *Finished) error { all[f.ID] = *f; return nil })
	for _, read := range []func(func(int, *Started, *Finished) error) error{
		func(f func(int, *Started, *Finished) error) error { return log.LastAllFields(NoCurves, f) },
		func(f func(int, *Started, *Finished) error) error { return log.LastFields([]int{0, 1}, NoCurves, f) },
	} {
		if err := read(func(i int, _ *Started, f *Finished) error { without[f.ID] = *f; return nil }); err != nil {
			t.Fatal(err)
		}
		for id, f := range all {
			g := without[id]
			if f.Curves == nil || f.Steps == nil || g.Curves != nil || g.Steps != nil || g.MetricsSkipped != 0 || string(g.Metrics) != string(f.Metrics) || g.Reason != f.Reason || !g.Time.Equal(f.Time) {
				t.Errorf("run %s: all fields %+v, without curves %+v", id, f, g)
			}
		}
	}
}
