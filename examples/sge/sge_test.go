// Package sge_test runs the Grid Engine example scripts as sge_execd would
// (bash with the job's variables), with nodepack listing instead of
// running (--dry-run), since there is no Grid Engine here: what it checks
// is that each array task takes its own shard from SGE_TASK_*.
package sge_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestArrayScriptShards(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil && os.Getenv("NODEPACK_CI") != "1" {
		t.Skip("builds nodepack with the go command, which is not here (a test binary run elsewhere)")
	}
	dir := t.TempDir()
	nodepack := filepath.Join(dir, "nodepack")
	build := exec.Command("go", "build", "-o", nodepack, "../../cmd/nodepack")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	var lines []string
	for i := range 9 {
		lines = append(lines, fmt.Sprintf("echo run %d", i))
	}
	tasks := filepath.Join(dir, "tasks.txt")
	os.WriteFile(tasks, []byte(strings.Join(lines, "\n")+"\n"), 0o644)

	seen := map[int]int{}
	for task := 1; task <= 3; task++ { // qsub -t 1-3
		cmd := exec.Command("bash", "array.qsub")
		cmd.Env = append(cleanEnv(), "JOB_ID=4711", "SGE_ROOT=/opt/sge", fmt.Sprintf("SGE_TASK_ID=%d", task),
			"SGE_TASK_FIRST=1", "SGE_TASK_LAST=3", "SGE_TASK_STEPSIZE=1", "TMPDIR="+dir,
			"NODEPACK="+nodepack, "NODEPACK_FLAGS=--dry-run --json", "TASKS="+tasks)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("task %d: %v", task, err)
		}
		var doc struct {
			Shard struct{ Index, Count int }
			Runs  []struct{ Index int }
		}
		if err := json.Unmarshal(out, &doc); err != nil {
			t.Fatalf("task %d: %v\n%s", task, err, out)
		}
		if doc.Shard.Index != task-1 || doc.Shard.Count != 3 {
			t.Errorf("task %d: shard %d/%d, want %d/3", task, doc.Shard.Index, doc.Shard.Count, task-1)
		}
		for _, r := range doc.Runs {
			seen[r.Index]++
		}
	}
	var indices []int
	for i, n := range seen {
		if n != 1 {
			t.Errorf("run %d in %d shards", i, n)
		}
		indices = append(indices, i)
	}
	slices.Sort(indices)
	if !slices.Equal(indices, []int{0, 1, 2, 3, 4, 5, 6, 7, 8}) {
		t.Errorf("runs covered %v, want 0-8 once each", indices)
	}
}

// cleanEnv is this process's environment without any batch system's
// variables, so the test sees only the Grid Engine job it fakes.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "SLURM_") || strings.HasPrefix(k, "SGE_") || strings.HasPrefix(k, "PBS_") ||
			strings.HasPrefix(k, "LSB_") || k == "JOB_ID" {
			continue
		}
		env = append(env, kv)
	}
	return env
}
