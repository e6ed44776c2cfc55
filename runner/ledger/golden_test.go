package ledger

import (
	"encoding/json"
	"errors"
	"flag"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/resources/usage"
	"github.com/nodepack/nodepack/runner/failure"
	"github.com/nodepack/nodepack/runner/run"
	"github.com/nodepack/nodepack/runner/sweep"
)

var updateGolden = flag.Bool("update", false, "write testdata/records.golden.jsonl from the Writer")

// goldenEvents are a session with every kind of record and every field a
// record may hold.
func goldenSession(t *testing.T, w *Writer) {
	t.Helper()
	total := 4
	def := sweep.Definition{Kind: sweep.KindGrid, Source: "grid.yml", Command: []string{"python", "train.py"}, Env: []string{"A=1"}, Reps: 2, Shards: 2}
	if err := w.WriteHeader(Header{Version: "v1.2.3", Command: []string{"nodepack", "run", "--grid", "grid.yml"}, Cwd: "/home/u/sweeps",
		Shard: &sweep.Shard{Index: 1, Count: 2}, Total: &total, Node: json.RawMessage(`{"cpus":[0,1]}`), Plan: json.RawMessage(`{"slots":2}`),
		Sweep: &def, Retired: []string{"old1", "old2"},
		PrunePrior: []Prior{{Dir: "/home/u/sweeps/nodepack-train-1a2b3c4d", Sweep: "1a2b3c4d", Runs: 66, Finished: 20, MaxStep: 40, Digest: "5e6f7a8b9c0d"}}}); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 27, 12, 0, 0, 123456789, time.UTC)
	r := run.Run{ID: "r1", Index: 3, Origin: "grid.yml:3", Params: json.RawMessage(`{"lr":0.1,"model":"big"}`)}
	place := pack.Assignment{GPUs: []pack.GPU{{UUID: "GPU-a"}, {UUID: "GPU-b"}}, CPUs: []int{0, 1, 2, 3, 8}, Request: pack.Request{GPUs: 2, CPUs: 5}}
	dir := filepath.Dir(w.path)
	out, errp := filepath.Join(dir, "runs", "r1", "stdout.log"), filepath.Join(dir, "runs", "r1", "stderr.log")
	for _, ev := range []run.Event{
		{Kind: run.Started, Run: r, Attempt: 1, Lane: 1, Place: place, Stdout: out, Stderr: errp, Start: at, PID: 4242},
		{Kind: run.Judged, Run: r, Attempt: 1, Start: at.Add(time.Second), Judgement: &run.Judgement{Run: "r1", Metric: "loss", Rung: 0, Step: 100, At: 104, Value: 0.5, Cutoff: math.NaN(), Others: 0}},
		{Kind: run.Judged, Run: r, Attempt: 1, Start: at.Add(2 * time.Second), Judgement: &run.Judgement{Run: "r1", Metric: "loss", Rung: 1, Step: 300, At: 300, Value: math.Inf(1), Cutoff: 0.25, Others: 3, Stop: true}},
		{Kind: run.Judged, Run: r, Attempt: 1, Start: at.Add(2 * time.Second), Judgement: &run.Judgement{Run: "r1", Metric: "loss", Rung: 2, Step: 900, At: 901, Value: 0.4, Cutoff: 0.2, Others: 5,
			Forecasted: true, Forecast: 0.3, Optimistic: 0.18}},
		{Kind: run.Judged, Run: r, Attempt: 1, Start: at.Add(2 * time.Second), Judgement: &run.Judgement{Run: "r1", Metric: "loss", Rung: 3, Step: 1000, At: 1000, Value: 0.35, Cutoff: 0.2, Others: 6,
			Forecasted: true, Forecast: 0.3, Optimistic: 0.25, Stop: true, Prior: true, PriorDropped: "the prior's forecasts missed 3 of this sweep's 4 finished runs"}},
		{Kind: run.Finished, Run: r, Attempt: 1, Lane: 1, Place: place, Stdout: out, Stderr: errp, Start: at, PID: 4242,
			End: at.Add(2272 * time.Millisecond), ExitCode: 137, Signal: "SIGKILL", Reason: run.Failed, Err: errors.New("out of memory"), Retry: true,
			Usage: run.Usage{MaxRSS: 1 << 30, CPU: 1500 * time.Millisecond, Sampled: usage.Sampled{Samples: 3, TreeRSSPeak: 2 << 30,
				GPUs: []usage.GPU{{UUID: "GPU-a", PeakMemoryBytes: 1 << 33, ProcessPeakMemoryBytes: 1 << 32, MeanUtilization: 87.5, Samples: 3}}}},
			Class: failure.HostOOM, StderrTail: []string{"Killed", "tail \"quoted\" <html>"},
			Metrics: json.RawMessage(`{"loss":0.5,"acc":"nan"}`), Curves: json.RawMessage(`{"loss":[[100,0.5]]}`), MetricsSkipped: 2,
			Steps: &run.Steps{First: 101, Last: 300, Checkpoint: 250}},
		{Kind: run.Finished, Run: run.Run{ID: "r2", Index: 0}, Attempt: 1, Start: at, End: at, ExitCode: -1, Reason: run.Failed, Err: errors.New("exec: not found"), Class: failure.NotFound},
		{Kind: run.Started, Run: run.Run{ID: "r3"}, Attempt: 2, Place: pack.Assignment{CPUs: []int{5}, SharedCPUs: true}, Start: at, PID: 7},
		{Kind: run.Finished, Run: run.Run{ID: "r3"}, Attempt: 2, Start: at, End: at.Add(time.Second), ExitCode: 0, Reason: run.OK, Metrics: json.RawMessage(`{}`)},
	} {
		if err := w.Append(ev); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	w.PostDensity(Density{Time: at.Add(2 * time.Second), Shape: "python train.py --seed=#", From: 2, To: 3,
		Measured: []DensityAt{{Runs: 1, StepsPerSec: 10, Readings: 2}, {Runs: 2, StepsPerSec: 18.5, Readings: 4}}, Why: "2 runs: 1.85× the progress of 1: one more"}, nil)
	w.PostGPUOut(usage.GPUFault{UUID: "GPU-b", Reason: "Xid 79", Time: at.Add(3 * time.Second)}, func(err error) { done <- err })
	if err := w.Flush(); err != nil || <-done != nil {
		t.Fatal(err)
	}
	if err := w.WriteEnd("deadline: 3 runs left", 3); err != nil {
		t.Fatal(err)
	}
}

// TestRecordsGolden: the records a Writer writes are byte for byte those
// of testdata/records.golden.jsonl (the header's time, host and pid
// aside), the nodepack.ledger/v1 format that every reader, old and new,
// reads. Each record type is its own Go type; this holds their JSON to it.
func TestRecordsGolden(t *testing.T) {
	dir := t.TempDir()
	w, err := Open(filepath.Join(dir, "ledger.jsonl"), false)
	if err != nil {
		t.Fatal(err)
	}
	goldenSession(t, w)
	w.Close()
	got, err := os.ReadFile(filepath.Join(dir, "ledger.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	mask := regexp.MustCompile(`("type":"header","time":)"[^"]*"(.*"host":)"[^"]*","pid":[0-9]+`)
	got = mask.ReplaceAll(got, []byte(`$1"TIME"$2"HOST","pid":1`))
	mask = regexp.MustCompile(`("type":"end","time":)"[^"]*"`)
	got = mask.ReplaceAll(got, []byte(`$1"TIME"`))
	mask = regexp.MustCompile(`"host":"[^"]*","pid":(4242|7)`)
	got = mask.ReplaceAll(got, []byte(`"host":"HOST","pid":$1`))
	golden := filepath.Join("testdata", "records.golden.jsonl")
	if *updateGolden {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("the Writer's records differ from %s:\ngot:\n%s\nwant:\n%s", golden, got, want)
	}
}

// TestLedgerDocumented: every key of every record type is in the table of
// its type in docs/ledger.md, so the format's page cannot fall behind it.
func TestLedgerDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "ledger.md"))
	if err != nil {
		t.Fatal(err)
	}
	for typ, rec := range map[string]any{TypeHeader: Header{}, TypeStarted: Started{}, TypeFinished: Finished{}, TypeRung: Rung{}, TypeGPUOut: GPUOut{}, TypeDensity: Density{}, TypeEnd: End{}} {
		_, section, ok := strings.Cut(string(doc), "\n## "+typ+"\n")
		if !ok {
			t.Errorf("docs/ledger.md has no section for %s records", typ)
			continue
		}
		section, _, _ = strings.Cut(section, "\n## ")
		for _, key := range jsonKeys(reflect.TypeOf(rec)) {
			if !strings.Contains(section, "`"+key+"`") {
				t.Errorf("docs/ledger.md's %s section does not name %q", typ, key)
			}
		}
	}
}

// jsonKeys lists the JSON keys of a struct type, its embedded structs' too.
func jsonKeys(typ reflect.Type) []string {
	var keys []string
	for i := range typ.NumField() {
		f := typ.Field(i)
		if f.Anonymous {
			keys = append(keys, jsonKeys(f.Type)...)
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		keys = append(keys, name)
	}
	return keys
}
