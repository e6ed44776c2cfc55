package main

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
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

	// nodepack tail shows an ended run's last lines, prefixed with its
	// origin; a name that matches no run is exit 2.
	if code, stdout, stderr := runCLI(t, "tail", "-n", "1", out, params+":2"); code != exitOK || stdout != "["+params+":2] loss=0.25\n" {
		t.Errorf("tail: exit %d, %q, %s", code, stdout, stderr)
	}
	if code, _, stderr := runCLI(t, "tail", out, "p.jsonl:9"); code != exitUsage || !strings.Contains(stderr, `no run "p.jsonl:9"`) {
		t.Errorf("tail of no such run: exit %d, %s", code, stderr)
	}

	for _, tc := range []struct{ args, want string }{
		{"--runs --format xml", `--format "xml": want csv or json`},
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
