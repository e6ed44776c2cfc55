package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nodepack/nodepack/runner/results"
)

// TestResultsTable: after a params sweep whose values hold commas, quotes
// and unicode and whose runs lack some keys, status --runs gives one row
// per run with each parameter in its own column and the runs' metrics
// (metrics.json, and --metric from stdout); pandas reads the CSV as it is,
// and the JSON too.
func TestResultsTable(t *testing.T) {
	dir := t.TempDir()
	params := writeFile(t, dir, "p.jsonl", strings.Join([]string{
		`{"model": "resnet, 50", "lr": 0.1}`,
		`{"model": "say \"hi\"", "lr": 0.01, "seed": 3}`,
		`{"model": "ünïcode ✓", "lr": 0.001}`,
	}, "\n")+"\n")
	job := writeFile(t, dir, "job.sh", `echo "loss=0.5"; echo "loss=0.25"; echo '{"acc": 0.75}' > "$NODEPACK_RUN_DIR/metrics.json"`+"\n")
	out := filepath.Join(dir, "out")
	if code, _, stderr := runCLI(t, "run", "-q", "-o", out, "--params", params, "--", "bash", job); code != exitOK {
		t.Fatalf("run: exit %d\n%s", code, stderr)
	}
	code, csvText, stderr := runCLI(t, "status", "--runs", "--metric", `loss=loss=(\S+)`, out)
	if code != exitOK {
		t.Fatalf("status --runs: exit %d\n%s", code, stderr)
	}
	header, _, _ := strings.Cut(csvText, "\n")
	for _, col := range []string{"id", "origin", "model", "lr", "seed", "state", "attempts", "duration_s", "peak_rss_bytes", "acc", "loss", "stdout"} {
		if !slices.Contains(strings.Split(header, ","), col) {
			t.Errorf("no column %q in %s", col, header)
		}
	}
	code, jsonText, _ := runCLI(t, "status", "--runs", "--format", "json", "--metric", `loss=loss=(\S+)`, out)
	var rows []map[string]any
	if err := json.Unmarshal([]byte(jsonText), &rows); code != exitOK || err != nil || len(rows) != 3 {
		t.Fatalf("status --runs --format json: exit %d, %v, %d rows\n%s", code, err, len(rows), jsonText)
	}
	var models []string
	for _, r := range rows {
		models = append(models, r["model"].(string))
		if r["state"] != "succeeded" || r["acc"] != 0.75 || r["loss"] != 0.25 {
			t.Errorf("row %v", r)
		}
	}
	slices.Sort(models)
	if want := []string{"resnet, 50", "say \"hi\"", "ünïcode ✓"}; !slices.Equal(models, want) {
		t.Errorf("models %q, want %q", models, want)
	}
	// --json is JSON with --runs too; beside another --format, refused.
	if code, same, _ := runCLI(t, "status", "--runs", "--json", "--metric", `loss=loss=(\S+)`, out); code != exitOK || same != jsonText {
		t.Errorf("status --runs --json: exit %d, not the --format json table:\n%s", code, same)
	}
	if code, _, stderr := runCLI(t, "status", "--runs", "--json", "--format", "csv", out); code != exitUsage || !strings.Contains(stderr, "--json and --format csv: want one of them") {
		t.Errorf("status --runs --json --format csv: exit %d, %q", code, stderr)
	}

	// nodepack tail shows an ended run's last lines, prefixed with its
	// origin; a name that matches no run is exit 2.
	if code, stdout, stderr := runCLI(t, "tail", "-n", "1", out, params+":2"); code != exitOK || stdout != "["+params+":2] loss=0.25\n" {
		t.Errorf("tail: exit %d, %q, %s", code, stdout, stderr)
	}
	if code, _, stderr := runCLI(t, "tail", out, "p.jsonl:9"); code != exitUsage || !strings.Contains(stderr, `no run "p.jsonl:9"`) {
		t.Errorf("tail of no such run: exit %d, %s", code, stderr)
	}

	for _, tc := range []struct{ args, want string }{
		{"--runs --format xml", `--format "xml": want table, csv or json`},
		{"--runs --sort loss:best", `want COLUMN, COLUMN:min or COLUMN:max`},
		{"--runs --sort nosuch", `no column "nosuch"`},
		{"--runs --top -1", `--top -1: must not be negative`},
		{"--runs --metric loss", "want NAME=REGEX"},
	} {
		args := append([]string{"status"}, append(strings.Fields(tc.args), out)...)
		if code, _, stderr := runCLI(t, args...); code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%s: exit %d, %q", tc.args, code, stderr)
		}
	}

	python := "/usr/bin/python3"
	if exec.Command(python, "-c", "import pandas").Run() != nil {
		t.Skip("Debian's python3-pandas is not installed (.ci/run installs it)")
	}
	csvPath := writeFile(t, dir, "runs.csv", csvText)
	jsonPath := writeFile(t, dir, "runs.json", jsonText)
	check := `
import json, sys, pandas as pd
for df in (pd.read_csv(sys.argv[1]), pd.read_json(sys.argv[2])):
    assert len(df) == 3, len(df)
    assert sorted(df["model"]) == ["resnet, 50", 'say "hi"', "ünïcode ✓"], list(df["model"])
    assert df["lr"].dtype.kind == "f" and sorted(df["lr"]) == [0.001, 0.01, 0.1], df["lr"]
    assert df["seed"].isna().sum() == 2 and df["seed"].max() == 3, df["seed"]
    assert (df["loss"] == 0.25).all() and (df["acc"] == 0.75).all()
    assert (df["state"] == "succeeded").all()
print("ok")
`
	cmd := exec.Command(python, "-c", check, csvPath, jsonPath)
	if b, err := cmd.CombinedOutput(); err != nil || strings.TrimSpace(string(b)) != "ok" {
		t.Errorf("pandas: %v\n%s", err, b)
	}
}

// runsFixture is an output directory whose ledger holds four runs with
// their params and metrics in the records, as nodepack run writes them:
// durations with float noise and of seconds, minutes and hours, a failed
// run, a running one without metrics, and a parameter value that tries to
// move the terminal's cursor.
func runsFixture(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	rec := func(s string) string { return s + "\n" }
	ledger := rec(`{"type":"header","time":"2026-11-24T10:00:00Z","format":"nodepack.ledger/v1","host":"vm","pid":1,"shard":{"index":0,"count":1},"total":4,"sweep":{"kind":"params","source":"p.jsonl","command":["train"],"reps":1,"shards":1}}`)
	runs := []struct{ id, params, end, metrics string }{
		{"aaaaaaaaaaaa", `{"lr":0.1,"model":"small"}`, `"exit_code":0,"reason":"ok","duration_s":2.2720000000000002,"max_rss_bytes":1610612736,"curves":{"loss":[[0,2],[100,1],[200,0.6],[300,0.45],[400,0.41]]}`, `{"loss":0.41,"acc":0.83}`},
		{"bbbbbbbbbbbb", `{"lr":0.01,"model":"big\u001b[2Jx"}`, `"exit_code":0,"reason":"ok","duration_s":125.5,"curves":{"loss":[[0,2],[100,0.2],[200,0.2],[300,0.2]]}`, `{"loss":0.2,"acc":0.9}`},
		{"cccccccccccc", `{"lr":0.001,"model":"small"}`, `"exit_code":1,"reason":"failed","duration_s":3725,"class":"cuda-oom"`, `{"loss":"nan"}`},
		{"dddddddddddd", `{"lr":1,"model":"big"}`, ``, ``},
	}
	for i, r := range runs {
		ledger += rec(fmt.Sprintf(`{"type":"started","time":"2026-11-24T10:00:0%dZ","host":"vm","pid":%d,"id":"%s","index":%d,"origin":"/data/p.jsonl:%d","attempt":1,"slot":0,"cpus":"0","params":%s}`,
			i+1, 10+i, r.id, i, i+1, r.params))
		if r.end != "" {
			ledger += rec(fmt.Sprintf(`{"type":"finished","time":"2026-11-24T10:10:0%dZ","id":"%s","index":%d,"origin":"/data/p.jsonl:%d","attempt":1,"slot":0,%s,"metrics":%s}`,
				i+1, r.id, i, i+1, r.end, r.metrics))
		}
	}
	writeFile(t, dir, "ledger.jsonl", ledger)
	return dir
}

// TestRunsTableForPeople: on a terminal, status --runs is an aligned table
// in input order with parameters and metrics first, human durations and
// sizes, escaped cells, cut to the terminal's width with a note; --sort and
// --top pick the best; CSV and JSON carry durations to the millisecond.
func TestRunsTableForPeople(t *testing.T) {
	dir := runsFixture(t)
	table, err := results.Read(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got strings.Builder
	for _, width := range []int{0, 60} {
		fmt.Fprintf(&got, "== width %d\n", width)
		if cut := table.WriteText(&got, width, ""); len(cut) > 0 {
			fmt.Fprintf(&got, "(%d more columns, cut to the terminal's %d characters: %s; --format csv has them all)\n", len(cut), width, strings.Join(cut, ", "))
		}
	}
	for _, args := range [][]string{{"--sort", "loss"}, {"--sort", "acc", "--top", "1"}, {"--sort", "lr:max", "--top", "2"}} {
		code, stdout, stderr := runCLI(t, append(append([]string{"status", "--runs", "--format", "table"}, args...), dir)...)
		if code != exitOK {
			t.Fatalf("%v: exit %d, %s", args, code, stderr)
		}
		fmt.Fprintf(&got, "== %s\n%s", strings.Join(args, " "), stdout)
	}
	golden := filepath.Join("testdata", "runs-table.txt")
	if *updateGolden {
		os.MkdirAll("testdata", 0o755)
		os.WriteFile(golden, []byte(got.String()), 0o644)
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got.String() != string(want) {
		t.Errorf("the table differs from %s (go test -run TestRunsTableForPeople -update-golden rewrites it):\n%s", golden, got.String())
	}
	if strings.Contains(got.String(), "\x1b") {
		t.Error("an escape sequence from a parameter reached the terminal")
	}
	// Piped: CSV by default, durations to the millisecond, in every format.
	code, csvText, _ := runCLI(t, "status", "--runs", dir)
	if code != exitOK || !strings.HasPrefix(csvText, "id,origin,lr,model,") || !strings.Contains(csvText, ",2.272,") || strings.Contains(csvText, "2.2720000000000002") {
		t.Errorf("piped: exit %d\n%s", code, csvText)
	}
	code, jsonText, _ := runCLI(t, "status", "--runs", "--format", "json", dir)
	if code != exitOK || !strings.Contains(jsonText, `"duration_s": 2.272,`) {
		t.Errorf("json: exit %d\n%s", code, jsonText)
	}
	// What --sort and --top cannot use exits 2, one line saying why.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--sort", "loss:down"}, `--sort "loss:down": want COLUMN, COLUMN:min or COLUMN:max`},
		{[]string{"--sort", "nosuch"}, "nosuch"},
		{[]string{"--top", "-1"}, "--top -1: must not be negative"},
		{[]string{"--format", "html"}, `--format "html": want table, csv or json`},
	} {
		code, stdout, stderr := runCLI(t, append(append([]string{"status", "--runs"}, tc.args...), dir)...)
		if code != exitUsage || stdout != "" || !strings.Contains(stderr, tc.want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("%v: exit %d, %q, %q; want exit 2 saying %q", tc.args, code, stdout, stderr, tc.want)
		}
	}
}

var updateGolden = flag.Bool("update-golden", false, "rewrite the golden files of cmd/nodepack's tests")

// TestDivergedRunIsRecorded: a run whose loss goes NaN, and that writes a
// step that is no number, is recorded as it ended (succeeded, its loss
// "nan"), not lost from the ledger; status, the results table and a rerun
// all say it succeeded.
func TestDivergedRunIsRecorded(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	tasks := writeFile(t, dir, "tasks.txt", `printf '{"step": 1, "loss": 1.5}\n{"step": Infinity, "loss": 1}\n{"step": 2, "loss": NaN}\n' >> "$NODEPACK_METRICS"`+"\n")
	if code, _, stderr := runCLI(t, "run", "-q", "-o", out, tasks); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	code, stdout, stderr := runCLI(t, "status", "--json", out)
	if code != exitOK || !strings.Contains(stdout, `"succeeded": 1,`) {
		t.Errorf("status: exit %d, %s%s", code, stdout, stderr)
	}
	code, csvText, _ := runCLI(t, "status", "--runs", out)
	if code != exitOK || !strings.Contains(csvText, ",succeeded,") || !strings.Contains(csvText, ",nan") {
		t.Errorf("results: exit %d\n%s", code, csvText)
	}
	code, stdout, stderr = runCLI(t, "run", "-o", out, tasks)
	if code != exitOK || !strings.Contains(stdout+stderr, "nothing left to run: skipped 1 run done before: 1 succeeded") {
		t.Errorf("a rerun: exit %d, %s%s", code, stdout, stderr)
	}
}
