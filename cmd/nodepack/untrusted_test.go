package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// hostileRuns are task lines whose runs leave hostile files where
// nodepack reads, as a buggy script would: a FIFO or a link to /dev/zero
// as the metrics file, a FIFO as metrics.json, a link to another file's
// values, logs replaced by links, a metrics.json over its bound, a
// million metric names. secret is a file of values none of it may read.
func hostileRuns(secret string) []string {
	return []string{
		`mkfifo "$NODEPACK_METRICS"; sleep 0.5`,
		`ln -s /dev/zero "$NODEPACK_METRICS"; sleep 0.5`,
		`mkfifo "$NODEPACK_RUN_DIR/metrics.json"; echo '{"loss": 1}' >> "$NODEPACK_METRICS"`,
		`ln -s ` + secret + ` "$NODEPACK_METRICS"`,
		`ln -s ` + secret + ` "$NODEPACK_RUN_DIR/metrics.json"`,
		`rm "$NODEPACK_RUN_DIR/stderr.log"; ln -s ` + secret + ` "$NODEPACK_RUN_DIR/stderr.log"; exit 1`,
		`rm "$NODEPACK_RUN_DIR/stdout.log"; ln -s ` + secret + ` "$NODEPACK_RUN_DIR/stdout.log"`,
		`head -c 2100000 /dev/zero | tr '\0' ' ' > "$NODEPACK_RUN_DIR/metrics.json"`,
		`seq 100000 | sed 's/.*/{"m&": 1}/' > "$NODEPACK_METRICS"`,
	}
}

// TestRunFilesAreUntrusted: a sweep of such runs ends, every run recorded
// (the one that failed by its exit), none of the secret's values or text
// anywhere in what nodepack prints or records, every ledger record
// bounded, and status --runs, report and tail finish on the directory.
func TestRunFilesAreUntrusted(t *testing.T) {
	dir := t.TempDir()
	secret := writeFile(t, t.TempDir(), "secret.jsonl", "{\"loss\": 0.424242, \"SECRETNAME\": 7}\nSECRET-TEXT\n")
	lines := hostileRuns(secret)
	tasks := writeFile(t, dir, "tasks.txt", strings.Join(lines, "\n")+"\n")
	out := filepath.Join(dir, "out")
	args := []string{"run", "--gpus", "none", "-j", "3", "--metric", "loss=loss=(\\S+)", "--prune", "loss:min,first=1,every=50ms", "-o", out, tasks}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	code, _, stderr := runCLIContext(t, ctx, args...)
	if ctx.Err() != nil {
		t.Fatalf("the sweep hung on the runs' files:\n%s", stderr)
	}
	if code != exitFailed || !strings.Contains(stderr, "9 runs: 8 succeeded, 1 failed") {
		t.Errorf("exit %d, want 1 with the one run that exits 1 failed:\n%s", code, stderr)
	}
	ledger, err := os.ReadFile(filepath.Join(out, "ledger.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(strings.NewReader(string(ledger)))
	sc.Buffer(nil, 1<<30)
	for sc.Scan() {
		if n := len(sc.Bytes()); n > 64<<10 {
			t.Errorf("a ledger record of %d bytes: %.200s…", n, sc.Text())
		}
	}
	for _, view := range [][]string{{"status", "--runs", out}, {"status", "--failed", out}, {"report", "-o", filepath.Join(dir, "r.html"), out}, {"tail", "--failed", out}} {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		_, stdout, stderr := runCLIContext(t, ctx, view...)
		if ctx.Err() != nil {
			t.Errorf("%s did not finish", view[0])
		}
		cancel()
		stderr += stdout
		for _, leak := range []string{"0.424242", "SECRETNAME", "SECRET-TEXT"} {
			if strings.Contains(stderr, leak) {
				t.Errorf("%q shows the secret the runs linked to (%s):\n%.2000s", view, leak, stderr)
			}
		}
	}
	report, _ := os.ReadFile(filepath.Join(dir, "r.html"))
	for _, leak := range []string{"0.424242", "SECRETNAME", "SECRET-TEXT"} {
		if strings.Contains(string(ledger), leak) || strings.Contains(string(report), leak) {
			t.Errorf("the ledger or the report holds the secret the runs linked to (%s)", leak)
		}
	}
	for _, why := range []string{"a symbolic link, not followed", "not a regular file", "larger than nodepack reads", "left out"} {
		if !strings.Contains(string(ledger), why) {
			t.Errorf("no run's record says %q", why)
		}
	}
}

// TestStopActsWhateverTheFilesDo: SIGTERM to nodepack while its runs hold
// a FIFO, a link to /dev/zero and an ever growing file as their metrics
// (with --prune reading them) ends the sweep within --grace and a second.
func TestStopActsWhateverTheFilesDo(t *testing.T) {
	dir := t.TempDir()
	tasks := writeFile(t, dir, "tasks.txt", strings.Join([]string{
		`mkfifo "$NODEPACK_METRICS"; touch ` + dir + `/a; sleep 60`,
		`ln -s /dev/zero "$NODEPACK_METRICS"; touch ` + dir + `/b; sleep 60`,
		`touch ` + dir + `/c; yes '{"loss": 0.5}' > "$NODEPACK_METRICS"`,
	}, "\n")+"\n")
	cmd := nodepackCommand(t, nil, "run", "-q", "--gpus", "none", "-j", "3", "--grace", "2s", "--prune", "loss:min,first=1,every=20ms", "-o", filepath.Join(dir, "out"), tasks)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"a", "b", "c"} {
		if !waitUntil(time.Minute, func() bool { _, err := os.Stat(filepath.Join(dir, f)); return err == nil }) {
			cmd.Process.Kill()
			t.Fatalf("run %s did not start", f)
		}
	}
	time.Sleep(500 * time.Millisecond) // the growing file grows; the pruner reads
	start := time.Now()
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
		// Measured for the note: the bound is --grace + 1 s; the test
		// only fails on a hang, as a loaded machine may be slow.
		t.Logf("stopped %v after SIGTERM", time.Since(start))
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("nodepack did not stop on SIGTERM within 30 s")
	}
	if code := cmd.ProcessState.ExitCode(); code != 143 {
		t.Errorf("exit %d, want 143", code)
	}
}

// runCLIContext is runCLI under ctx.
func runCLIContext(t *testing.T, ctx context.Context, args ...string) (int, string, string) {
	t.Helper()
	cmd := nodepackCommand(t, nil, args...)
	var stdout, stderr syncBuilder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			cmd.Process.Kill()
		case <-done:
		}
	}()
	cmd.Wait()
	close(done)
	return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
}

// TestLedgerIsUntrusted: a run that replaces the sweep's ledger with a
// FIFO, a symbolic link or a directory stops no reader: the rerun the
// sweep advises, status (text, --json, --runs), report, tail and retry
// each exit 2 with one line naming the ledger, none waits on the FIFO,
// and none reads through the link. The same for the record of a sweep's
// submissions.
func TestLedgerIsUntrusted(t *testing.T) {
	for _, tc := range []struct {
		name, replace, why string
	}{
		// By the run, in one rename (nodepack writes a ledger removed
		// again, so a gap between rm and mkfifo races it); a directory,
		// which no rename puts over a file, after the sweep.
		{"a FIFO", `mkfifo "$L.new"; mv -f "$L.new" "$L"`, "not a regular file"},
		{"a symbolic link", `ln -s "$L.old" "$L.new"; mv -f "$L.new" "$L"`, "a symbolic link"},
		{"a directory", "", "not a regular file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "out")
			tasks := writeFile(t, dir, "tasks.txt", "echo a\n"+
				`L="$NODEPACK_RUN_DIR/../../ledger.jsonl"; cp "$L" "$L.old"; `+tc.replace+"\n")
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			code, _, stderr := runCLIContext(t, ctx, "run", "-q", "--gpus", "none", "-j", "1", "-o", out, tasks)
			if ctx.Err() != nil || code == exitOK && tc.replace != "" {
				t.Fatalf("the sweep whose ledger a run replaced: exit %d\n%s", code, stderr)
			}
			if tc.replace == "" {
				l := filepath.Join(out, "ledger.jsonl")
				if err := os.Remove(l); err != nil || os.Mkdir(l, 0o755) != nil {
					t.Fatal(err)
				}
			}
			for _, args := range [][]string{
				{"run", "-q", "--gpus", "none", "-o", out, tasks},
				{"status", out}, {"status", "--json", out}, {"status", "--runs", out}, {"status", "--failed", out},
				{"report", "-o", filepath.Join(dir, "r.html"), out}, {"tail", out}, {"retry", out},
			} {
				ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
				code, _, stderr := runCLIContext(t, ctx, args...)
				hung := ctx.Err() != nil
				cancel()
				if hung {
					t.Errorf("%q hung on the ledger", args)
					continue
				}
				if code != exitUsage || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, filepath.Join(out, "ledger.jsonl")) || !strings.Contains(stderr, tc.why) {
					t.Errorf("%q: exit %d, %q; want exit 2 and one line naming the ledger: %s", args, code, stderr, tc.why)
				}
			}
		})
	}
	t.Run("submissions.jsonl a FIFO", func(t *testing.T) {
		dir := t.TempDir()
		out := filepath.Join(dir, "out")
		tasks := writeFile(t, dir, "tasks.txt", `mkfifo "$NODEPACK_RUN_DIR/../../submissions.jsonl"`+"\n")
		if code, _, stderr := runCLI(t, "run", "-q", "--gpus", "none", "-o", out, tasks); code != exitOK {
			t.Fatalf("exit %d\n%s", code, stderr)
		}
		for _, args := range [][]string{{"status", out}, {"resubmit", out}} {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			code, _, stderr := runCLIContext(t, ctx, args...)
			hung := ctx.Err() != nil
			cancel()
			if hung || code != exitUsage || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "submissions.jsonl: not a regular file") {
				t.Errorf("%q: hung %v, exit %d, %q; want exit 2 and one line naming the file", args, hung, code, stderr)
			}
		}
	})
}

// TestASuccessStaysASuccess: a ledger in which a finished record with
// reason paused follows a run's success (tampered or damaged) runs
// nothing again: the rerun exits 2 with one line naming the file and
// line, before anything starts, and status says the same.
func TestASuccessStaysASuccess(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	tasks := writeFile(t, dir, "tasks.txt", "echo a >> "+filepath.Join(dir, "ran")+"\n")
	if code, _, stderr := runCLI(t, "run", "-q", "--gpus", "none", "-o", out, tasks); code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	path := filepath.Join(out, "ledger.jsonl")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(strings.TrimSuffix(string(b), "\n"), "\n")
	var finished string
	for _, l := range lines {
		if strings.Contains(l, `"type":"finished"`) {
			finished = strings.Replace(l, `"reason":"ok"`, `"reason":"paused"`, 1)
		}
	}
	if finished == "" || !strings.HasPrefix(lines[len(lines)-1], `{"type":"end"`) {
		t.Fatalf("no finished record, or no end last:\n%s", b)
	}
	tampered := append(append(lines[:len(lines)-1:len(lines)-1], finished), lines[len(lines)-1]+"\n")
	os.WriteFile(path, []byte(strings.Join(tampered, "")), 0o644)
	want := fmt.Sprintf("%s:%d: finished (paused) record of run", path, len(lines))
	for _, args := range [][]string{{"run", "-q", "--gpus", "none", "-o", out, tasks}, {"status", out}} {
		code, _, stderr := runCLI(t, args...)
		if code != exitUsage || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, want) || !strings.Contains(stderr, "after its success") {
			t.Errorf("%q: exit %d, %q; want exit 2 and one line with %q", args[0], code, stderr, want)
		}
	}
	if ran, _ := os.ReadFile(filepath.Join(dir, "ran")); string(ran) != "a\n" {
		t.Errorf("the run ran %d times, want once", strings.Count(string(ran), "a"))
	}
}

// TestResultsTableWithHostileLogs: one run whose stdout.log is a link,
// one whose stdout.log is a directory: status --runs --metric RE (CSV
// and JSON) lists every run, the sound one with its metric and the two
// with their metrics_error, and exits 0, as report --metric does.
func TestResultsTableWithHostileLogs(t *testing.T) {
	dir := t.TempDir()
	secret := writeFile(t, dir, "secret.txt", "loss=0.424242\n")
	out := filepath.Join(dir, "out")
	tasks := writeFile(t, dir, "tasks.txt", strings.Join([]string{
		`echo loss=0.5`,
		`echo loss=0.3; rm "$NODEPACK_RUN_DIR/stdout.log"; ln -s ` + secret + ` "$NODEPACK_RUN_DIR/stdout.log"`,
		`echo loss=0.2; rm "$NODEPACK_RUN_DIR/stdout.log"; mkdir "$NODEPACK_RUN_DIR/stdout.log"`,
	}, "\n")+"\n")
	if code, _, stderr := runCLI(t, "run", "-q", "--gpus", "none", "-o", out, tasks); code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	code, stdout, stderr := runCLI(t, "status", "--runs", "--format", "json", "--metric", `loss=loss=(\S+)`, out)
	var rows []map[string]any
	if err := json.Unmarshal([]byte(stdout), &rows); code != exitOK || err != nil || len(rows) != 3 {
		t.Fatalf("status --runs --metric: exit %d, %v, %d rows\n%s%s", code, err, len(rows), stdout, stderr)
	}
	for i, want := range []string{"", "a symbolic link, not followed", "not a regular file"} {
		got, _ := rows[i]["metrics_error"].(string)
		if want == "" && (got != "" || rows[i]["loss"] != 0.5) || want != "" && (!strings.Contains(got, want) || rows[i]["loss"] != nil) {
			t.Errorf("run %d: loss %v, metrics_error %q; want %q", i+1, rows[i]["loss"], got, want)
		}
	}
	if strings.Contains(stdout, "0.424242") {
		t.Error("the table read through the link")
	}
	if code, stdout, stderr := runCLI(t, "status", "--runs", "--metric", `loss=loss=(\S+)`, out); code != exitOK || strings.Count(stdout, "\n") != 4 {
		t.Errorf("status --runs --metric (CSV): exit %d\n%s%s", code, stdout, stderr)
	}
	if code, _, stderr := runCLI(t, "report", "-o", filepath.Join(dir, "r.html"), "--metric", `loss=loss=(\S+)`, out); code != exitOK {
		t.Errorf("report --metric: exit %d\n%s", code, stderr)
	}
}
