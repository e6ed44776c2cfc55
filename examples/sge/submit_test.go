package sge_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/nodepack/nodepack/examples/internal/journey"
	"time"
)

// readmeBlock returns the commands of the README's sh block that holds
// marker.
func readmeBlock(t *testing.T, marker string) []string {
	t.Helper()
	lines, err := journey.Block(filepath.Join(repoRoot, "README.md"), marker)
	if err != nil {
		t.Fatal(err)
	}
	return lines
}

// typed runs a command line as a user types it on the cell's login
// shell, in dir, with this nodepack first in PATH.
func typed(t *testing.T, dir, line string) (string, error) {
	t.Helper()
	cmd := exec.Command("bash", "-c", line)
	cmd.Dir = dir
	env := append(cleanEnv(), sgeEnv...)
	for i, kv := range env {
		if p, ok := strings.CutPrefix(kv, "PATH="); ok {
			env[i] = "PATH=" + filepath.Dir(nodepack) + string(os.PathListSeparator) + p
		}
	}
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// lastJob returns the job id of the newest submission recorded in out,
// cancelled when the test ends.
func lastJob(t *testing.T, out string) string {
	t.Helper()
	id, err := journey.LastJob(out)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sge(t, "qdel", id).Run() })
	return id
}

// TestReadmeSubmit types the README's Grid Engine block: submit, status
// once the array ended, resubmit with nothing left.
func TestReadmeSubmit(t *testing.T) {
	needSGE(t)
	dir := t.TempDir()
	lines := readmeBlock(t, "nodepack submit --sge")
	if len(lines) != 3 || !strings.HasPrefix(lines[1], "nodepack status ") || !strings.HasPrefix(lines[2], "nodepack resubmit ") {
		t.Fatalf("the README's block is no longer submit, status, resubmit: %q", lines)
	}
	var tasks []string
	for i := range 6 {
		tasks = append(tasks, fmt.Sprintf("echo run %d", i))
	}
	writeTasks(t, dir, tasks...)
	out, err := typed(t, dir, lines[0])
	if err != nil || !strings.Contains(out, "#$ -t 1-3") || !strings.Contains(out, "3 array tasks of 3 shards") {
		t.Fatalf("%s: %v\n%s", lines[0], err, out)
	}
	seeds := filepath.Join(dir, "seeds")
	id := lastJob(t, seeds)
	if err := wait(t, id, 180); err != nil {
		t.Fatalf("array %s: %v", id, err)
	}
	out, err = typed(t, dir, lines[1])
	if err != nil || !strings.Contains(out, "6 runs: 6 succeeded") || !strings.Contains(out, "sge: job "+id+" (shards 0-2): 3 ended") {
		t.Errorf("%s: %v\n%s", lines[1], err, out)
	}
	out, err = typed(t, dir, lines[2])
	if err != nil || !strings.Contains(out, "nothing left") {
		t.Errorf("%s: %v\n%s", lines[2], err, out)
	}
}

// TestSubmitNodeDies: a task's nodepack killed mid-way (no end record),
// status naming it, resubmit --remaining finishing exactly the rest, once.
func TestSubmitNodeDies(t *testing.T) {
	needSGE(t)
	dir := t.TempDir()
	done, release := filepath.Join(dir, "done.txt"), filepath.Join(dir, "release")
	var tasks []string
	for i := range 9 {
		line := fmt.Sprintf("echo $NODEPACK_RUN_ID >> %s; : run %d", done, i)
		if i == 4 || i == 7 {
			line = fmt.Sprintf("until test -e %s; do sleep 0.2; done; %s", release, line)
		}
		tasks = append(tasks, line)
	}
	writeTasks(t, dir, tasks...)
	out := filepath.Join(dir, "sweep")
	if b, err := typed(t, dir, "nodepack submit --sge --nodes 3 --cpus-per-node 1 --time 10m -o sweep -- tasks.txt"); err != nil {
		t.Fatalf("submit: %v\n%s", err, b)
	}
	id := lastJob(t, out)
	var pid int
	deadline := time.Now().Add(2 * time.Minute)
	for pid == 0 && time.Now().Before(deadline) {
		b, _ := typed(t, dir, "nodepack status --json sweep")
		var doc struct {
			Running []struct{ Origin string }  `json:"running"`
			Shards  []struct{ Index, PID int } `json:"shards"`
		}
		json.Unmarshal([]byte(b[strings.Index(b, "{"):]), &doc)
		for _, r := range doc.Running {
			if r.Origin == "tasks.txt:5" {
				for _, s := range doc.Shards {
					if s.Index == 1 {
						pid = s.PID
					}
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	if pid == 0 {
		t.Fatal("shard 1 never ran tasks.txt:5")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	wait(t, id, 120)
	st, _ := typed(t, dir, "nodepack status sweep")
	if !strings.Contains(st, "9 runs: 7 succeeded") || !strings.Contains(st, "sge: job "+id+" (shards 0-2): 2 ended, 1 died") ||
		!strings.Contains(st, "shard 1: job "+id+" task 2 died") {
		t.Errorf("status after the kill:\n%s", st)
	}
	os.WriteFile(release, nil, 0o644)
	if b, err := typed(t, dir, "nodepack resubmit --remaining sweep"); err != nil || !strings.Contains(b, "1 array task of 3 shards") {
		t.Fatalf("resubmit: %v\n%s", err, b)
	}
	id2 := lastJob(t, out)
	if err := wait(t, id2, 120); err != nil {
		t.Fatalf("resubmission %s: %v", id2, err)
	}
	b, _ := os.ReadFile(done)
	ids := strings.Fields(string(b))
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			t.Errorf("run %s completed twice", id)
		}
		seen[id] = true
	}
	if len(ids) != 9 {
		t.Errorf("%d runs completed, want 9", len(ids))
	}
	if st, _ := typed(t, dir, "nodepack status sweep"); !strings.Contains(st, "9 runs: 9 succeeded") || !strings.Contains(st, "job "+id2+" (shard 1): 1 ended") {
		t.Errorf("status after the resubmission:\n%s", st)
	}
}
