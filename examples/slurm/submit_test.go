package slurm_test

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

// typed runs a command line as a user types it, in dir, with this
// nodepack first in PATH.
func typed(t *testing.T, dir, line string) (string, error) {
	t.Helper()
	cmd := exec.Command("bash", "-c", line)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(nodepack)+string(os.PathListSeparator)+os.Getenv("PATH"))
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
	t.Cleanup(func() { exec.Command("scancel", id).Run() })
	return id
}

// TestReadmeSubmit types the README's Slurm block from a login node's
// point of view: submit, then status once the array ended, then resubmit,
// which has nothing left.
func TestReadmeSubmit(t *testing.T) {
	needSlurm(t)
	dir := t.TempDir()
	lines := readmeBlock(t, "nodepack submit --slurm")
	if len(lines) != 3 || !strings.HasPrefix(lines[1], "nodepack status ") || !strings.HasPrefix(lines[2], "nodepack resubmit ") {
		t.Fatalf("the README's block is no longer submit, status, resubmit: %q", lines)
	}
	var tasks []string
	for i := range 8 {
		tasks = append(tasks, fmt.Sprintf("echo run %d on $CUDA_VISIBLE_DEVICES", i))
	}
	writeTasks(t, dir, tasks...)
	out, err := typed(t, dir, lines[0])
	if err != nil || !strings.Contains(out, "#SBATCH --array=0-2") || !strings.Contains(out, "3 array tasks of 3 shards") {
		t.Fatalf("%s: %v\n%s", lines[0], err, out)
	}
	seeds := filepath.Join(dir, "seeds")
	id := lastJob(t, seeds)
	if err := wait(t, id, 240); err != nil {
		t.Fatalf("array %s: %v", id, err)
	}
	out, err = typed(t, dir, lines[1])
	if err != nil || !strings.Contains(out, "8 runs: 8 succeeded") || !strings.Contains(out, "slurm: job "+id+" (shards 0-2): 3 ended") {
		t.Errorf("%s: %v\n%s", lines[1], err, out)
	}
	out, err = typed(t, dir, lines[2])
	if err != nil || !strings.Contains(out, "nothing left") {
		t.Errorf("%s: %v\n%s", lines[2], err, out)
	}
}

// TestSubmitNodeDies is the scenario: a 3-task array over one
// sweep, one task's nodepack killed mid-way (as when its node dies: no
// end record), status showing it and every run, and resubmit --remaining
// finishing exactly the missing runs, once.
func TestSubmitNodeDies(t *testing.T) {
	needSlurm(t)
	dir := t.TempDir()
	done, release := filepath.Join(dir, "done.txt"), filepath.Join(dir, "release")
	var tasks []string
	for i := range 9 {
		line := fmt.Sprintf("echo $NODEPACK_RUN_ID >> %s; : run %d", done, i)
		if i == 4 || i == 7 { // shard 1's second and third runs wait
			line = fmt.Sprintf("until test -e %s; do sleep 0.2; done; %s", release, line)
		}
		tasks = append(tasks, line)
	}
	writeTasks(t, dir, tasks...)
	out := filepath.Join(dir, "sweep")
	if b, err := typed(t, dir, "nodepack submit --slurm --nodes 3 --cpus-per-node 1 --time 10m -o sweep -- tasks.txt"); err != nil {
		t.Fatalf("submit: %v\n%s", err, b)
	}
	id := lastJob(t, out)
	// Shard 1 is running its waiting run: kill its nodepack as a dying
	// node would, with no chance to write its end record.
	var pid int
	waitFor(t, 120, "shard 1 running tasks.txt:5", func() bool {
		b, _ := exec.Command(nodepack, "status", "--json", out).Output()
		var doc struct {
			Running []struct{ Origin string } `json:"running"`
			Shards  []struct {
				Index, PID int
				State      string
			} `json:"shards"`
		}
		json.Unmarshal(b, &doc)
		for _, r := range doc.Running {
			if r.Origin == "tasks.txt:5" {
				for _, s := range doc.Shards {
					if s.Index == 1 {
						pid = s.PID
					}
				}
			}
		}
		return pid > 0
	})
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	wait(t, id, 120) // one task failed: an error, as expected
	b, _ := exec.Command(nodepack, "status", out).CombinedOutput()
	st := string(b)
	if !strings.Contains(st, "9 runs: 7 succeeded") || !strings.Contains(st, "slurm: job "+id+" (shards 0-2): 2 ended, 1 died") ||
		!strings.Contains(st, "shard 1: job "+id+" task 1 died") || !strings.Contains(st, "nodepack resubmit "+out) {
		t.Errorf("status after the kill:\n%s", st)
	}
	os.WriteFile(release, nil, 0o644)
	if b, err := typed(t, dir, "nodepack resubmit --remaining sweep"); err != nil || !strings.Contains(b, "1 array task of 3 shards") {
		t.Fatalf("resubmit: %v\n%s", err, b)
	}
	id2 := lastJob(t, out)
	if id2 == id {
		t.Fatal("resubmit recorded no new job")
	}
	if err := wait(t, id2, 120); err != nil {
		t.Fatalf("resubmission %s: %v", id2, err)
	}
	if got := doneLines(t, done); len(got) != 9 {
		t.Errorf("%d runs completed, want 9, each once", len(got))
	}
	b, _ = exec.Command(nodepack, "status", out).CombinedOutput()
	if st := string(b); !strings.Contains(st, "9 runs: 9 succeeded") || !strings.Contains(st, "job "+id+" (shards 0-2): 2 ended, 1 resubmitted; job "+id2+" (shard 1): 1 ended") {
		t.Errorf("status after the resubmission:\n%s", st)
	}
	// The report and the results table take both submissions together.
	if b, err := exec.Command(nodepack, "report", out).CombinedOutput(); err != nil || !strings.Contains(string(b), "9 runs") {
		t.Errorf("nodepack report: %v\n%s", err, b)
	}
	if b, err := exec.Command(nodepack, "status", "--runs", out).Output(); err != nil || strings.Count(string(b), "\n") != 10 {
		t.Errorf("results table: %v\n%s\nwant a header and 9 rows", err, b)
	}
}
