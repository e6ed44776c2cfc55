package report

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// writeDir writes an output directory: a node of two GPUs and two CPUs;
// a first session, killed, in which a 2-GPU run ran and a run sharing GPU
// 1 failed as cuda-oom, and a run was running when it was killed; a
// second session, 60 s later, that retried it
// beside another run sharing the same GPU, and ended.
func writeDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	node := `"node":{"hostname":"n1","cpus":[{"id":0},{"id":1}],"gpus":[{"uuid":"GPU-a"},{"uuid":"GPU-b"}]}`
	lines := []string{
		`{"type":"header","time":"2026-11-24T10:00:00Z","format":"nodepack.ledger/v1",` + node + `,"shard":{"index":0,"count":1},"sweep":{"kind":"tasks","source":"t.txt","reps":1,"shards":1}}`,
		`{"type":"started","time":"2026-11-24T10:00:00Z","id":"big","origin":"t.txt:1","attempt":1,"slot":0,"gpus":["GPU-a","GPU-b"],"cpus":"0","request":"gpus=2 cpus=1","stdout":"runs/big/stdout.log","stderr":"runs/big/stderr.log"}`,
		`{"type":"finished","time":"2026-11-24T10:00:20Z","id":"big","attempt":1,"exit_code":0,"reason":"ok","duration_s":20,"gpu_usage":[{"uuid":"GPU-a","peak_memory_bytes":9,"mean_utilization_percent":90,"samples":2,"energy_j":4500},{"uuid":"GPU-b","peak_memory_bytes":9,"mean_utilization_percent":90,"samples":2,"energy_j":4500}]}`,
		`{"type":"started","time":"2026-11-24T10:00:20Z","id":"small","origin":"t.txt:2","attempt":1,"slot":1,"gpus":["GPU-b"],"cpus":"1","request":"gpus=0.5 cpus=1","stdout":"runs/small/stdout.log","stderr":"runs/small/stderr.log"}`,
		`{"type":"started","time":"2026-11-24T10:00:25Z","id":"cut","origin":"t.txt:4","attempt":1,"slot":0,"gpus":["GPU-a"],"cpus":"0","request":"gpus=1 cpus=1","stdout":"runs/cut/stdout.log","stderr":"runs/cut/stderr.log"}`,
		`{"type":"finished","time":"2026-11-24T10:00:30Z","id":"small","attempt":1,"request":"gpus=0.5 cpus=1","exit_code":1,"reason":"failed","retry":true,"class":"cuda-oom","duration_s":10,"steps":{"first":1,"last":100,"checkpoint":80,"lost":20,"lost_s":2}}`,
		`{"type":"header","time":"2026-11-24T10:01:30Z","format":"nodepack.ledger/v1",` + node + `,"shard":{"index":0,"count":1},"sweep":{"kind":"tasks","source":"t.txt","reps":1,"shards":1}}`,
		`{"type":"started","time":"2026-11-24T10:01:30Z","id":"small","origin":"t.txt:2","attempt":2,"slot":1,"gpus":["GPU-b"],"cpus":"1","request":"gpus=0.5 cpus=1","stdout":"runs/small/stdout.log","stderr":"runs/small/stderr.log"}`,
		`{"type":"started","time":"2026-11-24T10:01:31Z","id":"other","origin":"t.txt:3","attempt":1,"slot":0,"gpus":["GPU-b"],"cpus":"0","request":"gpus=0.5 cpus=1","stdout":"runs/other/stdout.log","stderr":"runs/other/stderr.log"}`,
		`{"type":"density","time":"2026-11-24T10:01:35Z","shape":"python train.py --seed=#","from":1,"to":2,"measured":[{"runs":1,"steps_per_s":10,"readings":1}],"why":"1 run: 10 steps/s"}`,
		`{"type":"finished","time":"2026-11-24T10:01:40Z","id":"small","attempt":2,"exit_code":0,"reason":"ok","duration_s":10}`,
		`{"type":"finished","time":"2026-11-24T10:01:41Z","id":"other","attempt":1,"exit_code":0,"reason":"ok","duration_s":10}`,
		`{"type":"end","time":"2026-11-24T10:01:42Z","note":"done"}`,
	}
	if err := os.WriteFile(filepath.Join(dir, "ledger.jsonl"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestDocument: what the page draws, read back from the page.
func TestDocument(t *testing.T) {
	var page bytes.Buffer
	dir := writeDir(t)
	var done, total int64
	progress := func(d, t int64) { done, total = d, t }
	sum, err := Write(&page, dir, Options{Now: time.Date(2026, 11, 24, 11, 0, 0, 0, time.UTC), Progress: progress})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Runs != 4 || sum.Attempts != 5 || sum.Bytes != int64(page.Len()) {
		t.Errorf("summary %+v", sum)
	}
	if st, _ := os.Stat(filepath.Join(dir, "ledger.jsonl")); done != st.Size() || total != st.Size() {
		t.Errorf("progress ended at %d of %d bytes, want all %d", done, total, st.Size())
	}
	_, data, _ := strings.Cut(page.String(), `<script type="application/json" id="data">`)
	data, _, _ = strings.Cut(data, "</script>")
	var doc struct {
		Lanes    []string
		LaneRows []int
		States   []string
		Att      [][]int64
		Numbers  struct {
			Makespan float64 `json:"makespan_s"`
			Lost     float64 `json:"lost_to_failures_s"`
			Stops    struct {
				Attempts int     `json:"attempts"`
				Steps    float64 `json:"steps"`
				GPUs     float64 `json:"gpu_s"`
			} `json:"lost_to_stops"`
			GPUsBusy float64 `json:"gpus_busy_percent"`
			Gaps     []gap
		}
		Cols      []string
		Rows      [][]any
		Densities []densityDoc
	}
	if err := json.Unmarshal([]byte(data), &doc); err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	if strings.Join(doc.Lanes, "|") != "GPU GPU-a|GPU GPU-b" {
		t.Errorf("lanes %q: want the node's two GPUs, in its order", doc.Lanes)
	}
	if len(doc.LaneRows) != 2 || doc.LaneRows[1] != 2 {
		t.Errorf("rows per lane %v: GPU-b is shared by two runs at once", doc.LaneRows)
	}
	if len(doc.Att) != 5 || len(doc.Att[0]) != 9 {
		t.Fatalf("attempts %v: want 5, the 2-GPU one on two lanes", doc.Att)
	}
	// The run its killed nodepack left: interrupted at the session's last record.
	if cut := doc.Att[2]; cut[2] != 25000 || cut[3] != 30000 || doc.States[cut[4]] != "interrupted" {
		t.Errorf("the cut attempt %v (%s): want 25 s to 30 s, interrupted", cut, doc.States[cut[4]])
	}
	if doc.Numbers.Makespan != 101 || doc.Numbers.Lost != 10 {
		t.Errorf("makespan %v s (want 101), lost %v s (want 10)", doc.Numbers.Makespan, doc.Numbers.Lost)
	}
	var between bool
	for _, g := range doc.Numbers.Gaps {
		if g.From == 30000 && g.To == 90000 && strings.HasPrefix(g.Cause, "no nodepack ran the sweep") {
			between = true
		}
	}
	if !between {
		t.Errorf("gaps %+v: want the minute between the sessions", doc.Numbers.Gaps)
	}
	if len(doc.Rows) != 4 || doc.Cols[len(doc.Cols)-1] != "logs" {
		t.Errorf("table %v %v", doc.Cols, doc.Rows)
	}
	// What the cuda-oom attempt lost since its checkpoint: 20 steps, 2 s
	// on half a GPU.
	if st := doc.Numbers.Stops; st.Attempts != 1 || st.Steps != 20 || st.GPUs != 1 {
		t.Errorf("lost to stops %+v, want 1 attempt, 20 steps, 1 GPU-second", st)
	}
	// The density rule's decision, 95 s after the first start.
	if want := (densityDoc{T: 95000, Shape: "python train.py --seed=#", From: 1, To: 2, Measured: [][2]float64{{1, 10}}, Why: "1 run: 10 steps/s"}); len(doc.Densities) != 1 || !reflect.DeepEqual(doc.Densities[0], want) {
		t.Errorf("densities %+v, want %+v", doc.Densities, want)
	}
	// The run's share of its GPUs' energy, in watt-hours: 9,000 J.
	if e := slices.Index(doc.Cols, "energy_wh"); e < 0 || !slices.ContainsFunc(doc.Rows, func(r []any) bool { return r[e] == 2.5 }) {
		t.Errorf("no row with energy_wh 2.5 in %v %v", doc.Cols, doc.Rows)
	}
	if !strings.Contains(page.String(), `content="default-src 'none';`) || strings.Contains(page.String(), "TITLE") {
		t.Error("the page lacks its CSP, or its title")
	}
}

// TestWriteFile: the page is written whole, under its name only once
// complete and readable by others; it links the logs from where it is;
// a directory without a ledger writes nothing.
func TestWriteFile(t *testing.T) {
	dir := writeDir(t)
	pages := t.TempDir()
	path := filepath.Join(pages, "sweep.html")
	sum, err := WriteFile(path, dir, Options{})
	if err != nil || sum.Runs != 4 {
		t.Fatalf("WriteFile: %+v, %v", sum, err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Size() != sum.Bytes || st.Mode().Perm() != 0o644 {
		t.Fatalf("the page: %v, %v; want %d bytes, mode 0644", st, err, sum.Bytes)
	}
	if entries, _ := os.ReadDir(pages); len(entries) != 1 {
		t.Errorf("%d files beside the page, want the page alone (no temporary file left)", len(entries))
	}
	rel, _ := filepath.Rel(pages, dir)
	if b, _ := os.ReadFile(path); !strings.Contains(string(b), `"logBase":"`+filepath.ToSlash(rel)+`"`) {
		t.Errorf("the page does not link the logs from where it is (%s)", rel)
	}

	empty := t.TempDir()
	if _, err := WriteFile(filepath.Join(empty, "report.html"), empty, Options{}); err == nil {
		t.Error("a directory without a ledger: no error")
	}
	if entries, _ := os.ReadDir(empty); len(entries) != 0 {
		t.Errorf("a directory without a ledger: %d files written", len(entries))
	}
}
