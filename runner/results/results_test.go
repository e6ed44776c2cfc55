package results

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nodepack/nodepack/runner/ledger"
	"github.com/nodepack/nodepack/runner/metrics"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// sweepDir writes an output directory as nodepack leaves it: a ledger of
// a params sweep, and run directories with params.json, metrics.json and
// logs. Its runs cover values with commas, quotes and unicode, a key some
// runs lack, a nested value, a parameter named like a column, a failed
// run, a running one, a retried one, a broken metrics.json and a run with
// no logs read yet.
func sweepDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"ledger.jsonl": strings.Join([]string{
			`{"type":"header","time":"2026-11-24T10:00:00Z","format":"nodepack.ledger/v1","command":["nodepack","run","--params","p.jsonl","--","./job.sh"],"cwd":"/w","host":"vm","pid":1,"shard":{"index":0,"count":1},"total":5,"sweep":{"kind":"params","source":"p.jsonl","command":["./job.sh"],"reps":1,"shards":1}}`,
			`{"type":"started","time":"2026-11-24T10:00:01Z","host":"vm","pid":10,"id":"aaaaaaaaaaaa","origin":"p.jsonl:1","attempt":1,"slot":0,"gpus":["GPU-1","GPU-2"],"cpus":"0-3","stdout":"runs/a-aaaaaaaaaaaa/stdout.log","stderr":"runs/a-aaaaaaaaaaaa/stderr.log"}`,
			`{"type":"started","time":"2026-11-24T10:00:01.5Z","host":"vm","pid":11,"id":"bbbbbbbbbbbb","origin":"p.jsonl:2","attempt":1,"slot":1,"cpus":"4","stdout":"runs/b-bbbbbbbbbbbb/stdout.log","stderr":"runs/b-bbbbbbbbbbbb/stderr.log"}`,
			`{"type":"finished","time":"2026-11-24T10:00:11Z","id":"aaaaaaaaaaaa","origin":"p.jsonl:1","attempt":1,"slot":0,"stdout":"runs/a-aaaaaaaaaaaa/stdout.log","stderr":"runs/a-aaaaaaaaaaaa/stderr.log","exit_code":0,"reason":"ok","duration_s":10,"max_rss_bytes":1000,"tree_rss_peak_bytes":5000,"gpu_usage":[{"uuid":"GPU-1","peak_memory_bytes":9,"process_peak_memory_bytes":300,"mean_utilization_percent":50,"samples":2,"energy_j":5400.5},{"uuid":"GPU-2","peak_memory_bytes":9,"process_peak_memory_bytes":200,"mean_utilization_percent":50,"samples":2,"energy_j":3600}]}`,
			`{"type":"finished","time":"2026-11-24T10:00:03Z","id":"bbbbbbbbbbbb","origin":"p.jsonl:2","attempt":1,"slot":1,"stdout":"runs/b-bbbbbbbbbbbb/stdout.log","stderr":"runs/b-bbbbbbbbbbbb/stderr.log","exit_code":1,"reason":"failed","retry":true,"duration_s":1.5,"class":"cuda-oom"}`,
			`{"type":"started","time":"2026-11-24T10:00:04Z","host":"vm","pid":12,"id":"bbbbbbbbbbbb","origin":"p.jsonl:2","attempt":2,"slot":1,"cpus":"4","stdout":"runs/b-bbbbbbbbbbbb/stdout.log","stderr":"runs/b-bbbbbbbbbbbb/stderr.log"}`,
			`{"type":"finished","time":"2026-11-24T10:00:06Z","id":"bbbbbbbbbbbb","origin":"p.jsonl:2","attempt":2,"slot":1,"stdout":"runs/b-bbbbbbbbbbbb/stdout.log","stderr":"runs/b-bbbbbbbbbbbb/stderr.log","exit_code":1,"reason":"failed","duration_s":2,"class":"cuda-oom"}`,
			`{"type":"started","time":"2026-11-24T10:00:07Z","host":"vm","pid":13,"id":"cccccccccccc","origin":"p.jsonl:3","attempt":1,"slot":1,"cpus":"4","stdout":"runs/c-cccccccccccc/stdout.log","stderr":"runs/c-cccccccccccc/stderr.log"}`,
			`{"type":"started","time":"2026-11-24T10:00:12Z","host":"vm","pid":14,"id":"dddddddddddd","origin":"p.jsonl:4","attempt":1,"slot":0,"cpus":"0-3","stdout":"runs/d-dddddddddddd/stdout.log","stderr":"runs/d-dddddddddddd/stderr.log"}`,
			`{"type":"finished","time":"2026-11-24T10:00:13Z","id":"dddddddddddd","origin":"p.jsonl:4","attempt":1,"slot":0,"stdout":"runs/d-dddddddddddd/stdout.log","stderr":"runs/d-dddddddddddd/stderr.log","signal":"SIGKILL","exit_code":137,"reason":"failed","duration_s":1,"class":"host-oom"}`,
		}, "\n") + "\n",
		"runs/a-aaaaaaaaaaaa/params.json":  `{"model": "resnet, 50", "lr": 0.1, "state": "tuned", "layers": [64, 128]}`,
		"runs/a-aaaaaaaaaaaa/metrics.json": "{\n  \"acc\": 0.91,\n  \"curve\": [\n    1,\n    2\n  ]\n}\n",
		"runs/a-aaaaaaaaaaaa/stdout.log":   "epoch 1 loss=0.9\nepoch 2 loss=0.4\ndone\n",
		"runs/b-bbbbbbbbbbbb/params.json":  `{"model": "say \"hi\"", "lr": 0.01}`,
		"runs/b-bbbbbbbbbbbb/stdout.log":   "epoch 1 loss=nan\n",
		"runs/c-cccccccccccc/params.json":  `{"model": "ünïcode ✓", "lr": 1e-3, "seed": 7}`,
		"runs/c-cccccccccccc/metrics.json": `{"acc": 0.5`,
		"runs/c-cccccccccccc/stdout.log":   "epoch 1 loss=1.25\n",
		"runs/d-dddddddddddd/params.json":  `{"model": "x", "lr": 0.2}`,
	}
	writeFiles(t, dir, files)
	return dir
}

// TestGolden: the table of sweepDir, as CSV and as JSON, is the one in
// testdata (go test -update rewrites it after a change made on purpose).
func TestGolden(t *testing.T) {
	dir := sweepDir(t)
	loss, err := metrics.ParsePattern(`loss=loss=(\S+)`)
	if err != nil {
		t.Fatal(err)
	}
	table, err := Read(dir, []metrics.Pattern{loss})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		file  string
		write func(*bytes.Buffer) error
	}{
		{"table.csv", func(b *bytes.Buffer) error { return table.WriteCSV(b) }},
		{"table.json", func(b *bytes.Buffer) error { return table.WriteJSON(b) }},
	} {
		var got bytes.Buffer
		if err := tc.write(&got); err != nil {
			t.Fatal(err)
		}
		golden := filepath.Join("testdata", tc.file)
		if *update {
			os.WriteFile(golden, got.Bytes(), 0o644)
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), want) {
			t.Errorf("%s differs:\n%s\nwant:\n%s", tc.file, got.Bytes(), want)
		}
	}
	var rows []map[string]any
	var doc bytes.Buffer
	table.WriteJSON(&doc)
	if err := json.Unmarshal(doc.Bytes(), &rows); err != nil || len(rows) != 4 {
		t.Fatalf("the JSON table does not read back as 4 objects: %v", err)
	}
	for _, r := range rows {
		if len(r) != len(table.Columns()) {
			t.Errorf("row %v has %d keys, want every column (%d)", r["id"], len(r), len(table.Columns()))
		}
	}
}

// TestNoLedger: a directory that is not an output directory is an error,
// not an empty table.
func TestNoLedger(t *testing.T) {
	if _, err := Read(t.TempDir(), nil); err == nil || !strings.Contains(err.Error(), "no ledger") {
		t.Errorf("err %v", err)
	}
}

// TestWhatCounts: the runs a killed nodepack left running on this host are
// interrupted, not running; a shard ledger that holds another sweep has no
// rows; a metric is taken from the last line that matches, also after a
// line longer than any metric's.
func TestWhatCounts(t *testing.T) {
	dir := t.TempDir()
	host, _ := os.Hostname()
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	header := func(key string, count int) string {
		return fmt.Sprintf(`{"type":"header","time":"2026-11-24T10:00:00Z","format":"nodepack.ledger/v1","host":%q,"pid":%d,"shard":{"index":0,"count":%d},"sweep":{"kind":"tasks","source":%q,"reps":1,"shards":%d}}`,
			host, dead.Process.Pid, count, key, count)
	}
	files := map[string]string{
		"ledger-0-of-2.jsonl": header("t.txt", 2) + "\n" +
			`{"type":"started","time":"2026-11-24T10:00:01Z","id":"aaaaaaaaaaaa","origin":"t.txt:1","attempt":1,"stdout":"runs/a/stdout.log","stderr":"runs/a/stderr.log"}` + "\n",
		// Written later, by a sweep of another task file: the newest
		// header names the directory's sweep, so this one is the other.
		"ledger-1-of-2.jsonl": strings.Replace(header("old.txt", 2), "10:00:00", "09:00:00", 1) + "\n" +
			`{"type":"started","time":"2026-11-24T09:00:01Z","id":"bbbbbbbbbbbb","origin":"old.txt:1","attempt":1}` + "\n",
		"runs/a/stdout.log": "loss=0.9\n" + strings.Repeat("x", 200<<10) + "\nloss=0.5\n",
	}
	writeFiles(t, dir, files)
	loss, _ := metrics.ParsePattern(`loss=loss=(\S+)`)
	table, err := Read(dir, []metrics.Pattern{loss})
	if err != nil {
		t.Fatal(err)
	}
	if len(table.Rows) != 1 || table.Rows[0].ID != "aaaaaaaaaaaa" || strings.Join(table.Files, " ") != "ledger-0-of-2.jsonl" {
		t.Fatalf("rows %+v from %v: want the one run of the newest sweep", table.Rows, table.Files)
	}
	if r := table.Rows[0]; r.State != ledger.StateInterrupted || string(r.Metrics["loss"]) != "0.5" {
		t.Errorf("state %s, loss %s; want interrupted (its nodepack is gone) and 0.5", r.State, r.Metrics["loss"])
	}
}

// TestCSVCellsAreInert: text cells and header cells a spreadsheet would
// evaluate get a leading ', numbers never do, and JSON stays exact.
func TestCSVCellsAreInert(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"ledger.jsonl": `{"type":"header","time":"2026-11-24T10:00:00Z","format":"nodepack.ledger/v1","shard":{"index":0,"count":1},"sweep":{"kind":"params","source":"p.jsonl","reps":1,"shards":1}}` + "\n" +
			`{"type":"started","time":"2026-11-24T10:00:01Z","id":"aaaaaaaaaaaa","origin":"=p.jsonl:1","attempt":1,"stdout":"runs/a/stdout.log","stderr":"runs/a/stderr.log"}` + "\n" +
			`{"type":"finished","time":"2026-11-24T10:00:02Z","id":"aaaaaaaaaaaa","origin":"=p.jsonl:1","attempt":1,"exit_code":0,"reason":"ok","duration_s":1}` + "\n",
		"runs/a/params.json": `{"link": "=HYPERLINK(\"http://x\",\"y\")", "sum": "@SUM(1+1)", "plus": "+1+cmd|' /C calc'!A0", "minus": "-2+3", "tab": "\tx", "cr": "\rx",
			"neg_text": "-0.5", "neg": -0.5, "plain": "resnet", "=evil": 1}`,
		"runs/a/metrics.json": `{"@loss": 0.5, "note": "=1+1"}`,
	}
	writeFiles(t, dir, files)
	table, err := Read(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	var csvOut, jsonOut bytes.Buffer
	if err := table.WriteCSV(&csvOut); err != nil {
		t.Fatal(err)
	}
	records, err := csv.NewReader(&csvOut).ReadAll()
	if err != nil || len(records) != 2 {
		t.Fatalf("CSV: %v, %d records", err, len(records))
	}
	cell := map[string]string{}
	for i, name := range records[0] {
		cell[name] = records[1][i]
	}
	for _, tc := range []struct {
		description, column, want string
	}{
		{"a HYPERLINK formula", "link", `'=HYPERLINK("http://x","y")`},
		{"an @ function", "sum", "'@SUM(1+1)"},
		{"a + formula", "plus", "'+1+cmd|' /C calc'!A0"},
		{"a - formula", "minus", "'-2+3"},
		{"a leading tab", "tab", "'\tx"},
		{"a leading carriage return", "cr", "'\rx"},
		{"text that reads as a number stays a number", "neg_text", "-0.5"},
		{"a number is never touched", "neg", "-0.5"},
		{"plain text", "plain", "resnet"},
		{"an origin", "origin", "'=p.jsonl:1"},
		{"a formula in a metric", "note", "'=1+1"},
		{"a parameter named like a formula: the header cell", "'=evil", "1"},
		{"a metric named like a function: the header cell", "'@loss", "0.5"},
	} {
		if got, ok := cell[tc.column]; !ok || got != tc.want {
			t.Errorf("%s: column %q is %q (present %v), want %q\nheader %q", tc.description, tc.column, got, ok, tc.want, records[0])
		}
	}
	if err := table.WriteJSON(&jsonOut); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(jsonOut.String(), `"link": "=HYPERLINK(\"http://x\",\"y\")"`) || !strings.Contains(jsonOut.String(), `"=evil": 1`) {
		t.Errorf("JSON changed the values: %s", jsonOut.String())
	}
}

// TestPickMetric: the metric a reader most likely ranks runs by, as the
// report and status --runs choose it when none is named.
func TestPickMetric(t *testing.T) {
	tests := []struct {
		description string
		names       []string
		numbers     string // the names with a number, space-separated
		want        string
	}{
		{"a validation loss before a loss", []string{"acc", "loss", "val_loss"}, "acc loss val_loss", "val_loss"},
		{"a loss before the first metric", []string{"acc", "train_loss"}, "acc train_loss", "train_loss"},
		{"else the first metric", []string{"acc", "f1"}, "acc f1", "acc"},
		{"only metrics with a number", []string{"val_loss", "loss", "acc"}, "acc", "acc"},
		{"none with a number: none", []string{"note"}, "", ""},
		{"no metric: none", nil, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			numbers := strings.Fields(tc.numbers)
			got, why := PickMetric(tc.names, func(n string) bool { return slices.Contains(numbers, n) })
			if got != tc.want || (got == "") != (why == "") {
				t.Errorf("PickMetric(%v) = %q (%s), want %q", tc.names, got, why, tc.want)
			}
		})
	}
}

// TestRowValues: parameters come back as encoding/json decodes them, and
// metrics as numbers only when they are numbers (a diverged run's "nan"
// and "inf" included), never text that happens to read as one.
func TestRowValues(t *testing.T) {
	r := Row{
		Params:  map[string]json.RawMessage{"lr": json.RawMessage(`0.01`), "model": json.RawMessage(`"big"`), "deep": json.RawMessage(`true`)},
		Metrics: map[string]json.RawMessage{"loss": json.RawMessage(`0.25`), "gnorm": json.RawMessage(`"nan"`), "peak": json.RawMessage(`"-inf"`), "note": json.RawMessage(`"12"`), "list": json.RawMessage(`[1,2]`)},
	}
	if v, ok := r.Param("lr"); !ok || v != 0.01 {
		t.Errorf("Param(lr) = %v, %v", v, ok)
	}
	if v, ok := r.Param("model"); !ok || v != "big" {
		t.Errorf("Param(model) = %v, %v", v, ok)
	}
	if v, ok := r.Param("deep"); !ok || v != true {
		t.Errorf("Param(deep) = %v, %v", v, ok)
	}
	if _, ok := r.Param("seed"); ok {
		t.Error("Param(seed) found a parameter the run does not have")
	}
	if f, ok := r.Metric("loss"); !ok || f != 0.25 {
		t.Errorf("Metric(loss) = %v, %v", f, ok)
	}
	if f, ok := r.Metric("gnorm"); !ok || !math.IsNaN(f) {
		t.Errorf("Metric(gnorm) = %v, %v; want NaN", f, ok)
	}
	if f, ok := r.Metric("peak"); !ok || !math.IsInf(f, -1) {
		t.Errorf("Metric(peak) = %v, %v; want -Inf", f, ok)
	}
	for _, name := range []string{"note", "list", "absent"} {
		if f, ok := r.Metric(name); ok {
			t.Errorf("Metric(%s) = %v, want no number", name, f)
		}
	}
}

// TestCSVAsEncodingCSVWritesIt: the table's own CSV writer quotes a field
// exactly as encoding/csv does, and a cell reads as csvText says.
func TestCSVAsEncodingCSVWritesIt(t *testing.T) {
	for _, f := range []string{"", "plain", "a,b", `say "hi"`, "two\nlines", "cr\rhere", " lead", "\tlead", `\.`, "\u00a0nbsp", "ünïcode", "=cmd()", "'quoted"} {
		var want bytes.Buffer
		w := csv.NewWriter(&want)
		w.Write([]string{f})
		w.Flush()
		if got := string(appendCSVField(nil, []byte(f))) + "\n"; got != want.String() {
			t.Errorf("field %q: %q, encoding/csv writes %q", f, got, want.String())
		}
		j, _ := json.Marshal(f)
		var cell bytes.Buffer
		w = csv.NewWriter(&cell)
		w.Write([]string{csvText(j)})
		w.Flush()
		if got := string(appendCSVCell(nil, j)) + "\n"; got != cell.String() {
			t.Errorf("cell %s: %q, want %q", j, got, cell.String())
		}
	}
}

// modernDir writes a sweep of two shards whose records hold each run's
// params and metrics: finished runs, a retried one, a running one whose
// metrics (a key no finished run has) are in its files, indexes that
// interleave across the shards.
func modernDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	header := func(i int) string {
		return fmt.Sprintf(`{"type":"header","time":"2026-11-24T10:00:00Z","format":"nodepack.ledger/v1","command":["nodepack","run"],"cwd":"/w","host":"vm","pid":1,"shard":{"index":%d,"count":2},"total":3,"sweep":{"kind":"params","source":"p.jsonl","command":["./job.sh"],"reps":1,"shards":2}}`, i)
	}
	started := func(id string, index, attempt int, params string) string {
		return fmt.Sprintf(`{"type":"started","time":"2026-11-24T10:00:0%dZ","host":"vm","pid":10,"id":"%s","index":%d,"origin":"p.jsonl:%d","attempt":%d,"slot":0,"cpus":"0","stdout":"runs/%s/stdout.log","stderr":"runs/%s/stderr.log","params":%s}`, attempt, id, index, index+1, attempt, id, id, params)
	}
	finished := func(id string, index, attempt int, reason, metrics string) string {
		return fmt.Sprintf(`{"type":"finished","time":"2026-11-24T10:00:0%dZ","id":"%s","index":%d,"origin":"p.jsonl:%d","attempt":%d,"slot":0,"stdout":"runs/%s/stdout.log","stderr":"runs/%s/stderr.log","exit_code":0,"reason":"%s","duration_s":%d.5,"metrics":%s,"curves":{"loss":[[1,2],[2,1]]}}`, attempt+5, id, index, index+1, attempt, id, id, reason, index, metrics)
	}
	files := map[string]string{
		"ledger-0-of-2.jsonl": strings.Join([]string{header(0),
			started("run000000004", 4, 1, `{"lr":0.1,"model":"b, c"}`), finished("run000000004", 4, 1, "ok", `{"loss":0.5,"acc":0.9}`),
			started("run000000000", 0, 1, `{"lr":0.3,"model":"a"}`), finished("run000000000", 0, 1, "failed", `{"loss":2}`),
			started("run000000002", 2, 1, `{"model":"=x","lr":0.2,"seed":1}`)}, "\n") + "\n",
		"ledger-1-of-2.jsonl": strings.Join([]string{header(1),
			started("run000000003", 3, 1, `{"lr":0.01,"model":"say \"hi\""}`), finished("run000000003", 3, 1, "failed", `{"loss":1.5}`),
			started("run000000003", 3, 2, `{"lr":0.01,"model":"say \"hi\""}`), finished("run000000003", 3, 2, "ok", `{"loss":0.25,"acc":0.95}`),
			started("run000000001", 1, 1, `{"lr":0.05}`), finished("run000000001", 1, 1, "pruned", `{"loss":0.75,"note":"nan"}`)}, "\n") + "\n",
		"runs/run000000002/metrics.jsonl": `{"step": 1, "loss": 0.6, "grad": 3}` + "\n",
		"runs/run000000002/stdout.log":    "loss=0.6\n",
		"runs/run000000004/stdout.log":    "loss=0.45\n",
	}
	writeFiles(t, dir, files)
	return dir
}

// TestWriteTableIsRead: the streamed table (WriteTable) is byte for byte
// the one Read holds, sorted and cut as Table.Sort and a top would, as CSV
// and as JSON, with and without stdout patterns, of old ledgers (params
// and metrics in the runs' files) and new ones (in their records), one
// shard or two, whatever rows it holds back or reads in chunks.
func TestWriteTableIsRead(t *testing.T) {
	for _, bounds := range [][2]int{{streamChunk, reorderRows}, {2, 1}, {1, 0}} {
		chunk, early := streamChunk, reorderRows
		streamChunk, reorderRows = bounds[0], bounds[1]
		t.Run(fmt.Sprintf("chunks of %d, %d rows held", bounds[0], bounds[1]), writeTableIsRead)
		streamChunk, reorderRows = chunk, early
	}
}

func writeTableIsRead(t *testing.T) {
	loss, _ := metrics.ParsePattern(`loss=loss=(\S+)`)
	for _, d := range []struct {
		name string
		dir  string
	}{{"old", sweepDir(t)}, {"new", modernDir(t)}} {
		for _, patterns := range [][]metrics.Pattern{nil, {loss}} {
			for _, sort := range []string{"", "acc", "lr:max", "duration_s", "model", "loss"} {
				for _, top := range []int{0, 2} {
					for _, asJSON := range []bool{false, true} {
						name := fmt.Sprintf("%s/patterns=%d/sort=%s/top=%d/json=%v", d.name, len(patterns), sort, top, asJSON)
						table, err := Read(d.dir, patterns)
						if err != nil {
							t.Fatal(err)
						}
						column, desc, _ := metrics.ParseRank(sort)
						if sort != "" {
							if err := table.Sort(column, desc); err != nil {
								continue // not a column of this table: WriteTable must say so too
							}
						}
						if top > 0 && top < len(table.Rows) {
							table.Rows = table.Rows[:top]
						}
						var want, got bytes.Buffer
						if asJSON {
							table.WriteJSON(&want)
						} else {
							table.WriteCSV(&want)
						}
						info, err := WriteTable(&got, d.dir, TableOptions{Patterns: patterns, JSON: asJSON, Sort: column, Desc: desc, Top: top})
						if err != nil {
							t.Fatalf("%s: %v", name, err)
						}
						if got.String() != want.String() || info.Rows != len(table.Rows) {
							t.Errorf("%s: WriteTable (%d rows) wrote\n%s\nRead's table (%d rows) is\n%s", name, info.Rows, got.String(), len(table.Rows), want.String())
						}
					}
				}
			}
		}
		if _, err := WriteTable(io.Discard, d.dir, TableOptions{Sort: "no-such"}); !errors.Is(err, ErrNoColumn) {
			t.Errorf("%s: sort by a column it has not: %v", d.name, err)
		}
	}
}

// writeFiles writes each file of files, by its path below dir, making the
// directories on its way.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
