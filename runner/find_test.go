package runner

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/nodepack/nodepack/resources/batch"
	"github.com/nodepack/nodepack/runner/ledger"
	"github.com/nodepack/nodepack/runner/sweep"
)

// writeSweepOf leaves in dir what a sweep of job j leaves in its default
// output directory: that directory, with one ledger per shard whose
// header records the job. It returns the directory.
func writeSweepOf(t *testing.T, dir string, j batch.Job, name string, shards int) string {
	t.Helper()
	def := sweep.Definition{Kind: sweep.KindTasks, Source: name + ".txt", Shards: shards}
	out := filepath.Join(dir, defaultOutput(j, def, shards > 1))
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range shards {
		task := j
		if j.Array != nil && shards > 1 {
			a := *j.Array
			a.Index = a.Min + i
			task.Array = &a
		}
		node, _ := json.Marshal(map[string]any{"schema": "nodepack.node/v1", "scheduler": task})
		h, _ := json.Marshal(ledger.Header{Type: ledger.TypeHeader, Format: ledger.Format, Node: node, Shard: &sweep.Shard{Index: i, Count: shards}, Sweep: &def})
		if err := os.WriteFile(filepath.Join(out, ledger.FileName(i, shards)), append(h, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func TestFindOutput(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	slurmArray := batch.Job{Kind: batch.Slurm, JobID: "300", ArrayJobID: "300", Array: &batch.Array{Min: 0, Max: 2, Step: 1, Count: 3}}
	sharded := writeSweepOf(t, dir, slurmArray, "tasks", 3)
	single := writeSweepOf(t, dir, batch.Job{Kind: batch.Slurm, JobID: "41"}, "tasks", 1)
	twice := []string{
		writeSweepOf(t, dir, batch.Job{Kind: batch.SGE, JobID: "7"}, "first", 1),
		writeSweepOf(t, dir, batch.Job{Kind: batch.SGE, JobID: "7"}, "second", 1),
	}
	// Outside a job, a task file named 41-more.txt gives nodepack-41-more-KEY:
	// named like job 41's, started by no job.
	lookalike := writeSweepOf(t, dir, batch.Job{Kind: batch.None}, "41-more", 1)
	// A non-split Slurm array: every task runs a sweep of its own.
	perTask := batch.Job{Kind: batch.Slurm, JobID: "501", ArrayJobID: "500", Array: &batch.Array{Index: 1, Min: 0, Max: 1, Step: 1, Count: 2}}
	task1 := writeSweepOf(t, dir, perTask, "tasks", 1)
	perTask.JobID, perTask.Array = "500", &batch.Array{Index: 0, Min: 0, Max: 1, Step: 1, Count: 2}
	task0 := writeSweepOf(t, dir, perTask, "tasks", 1)
	explicit := filepath.Join(dir, "mine")
	os.Mkdir(explicit, 0o755)

	rel := func(p string) string { r, _ := filepath.Rel(dir, p); return r }
	tests := []struct {
		description string
		arg         string
		want        string   // "" with wantDirs
		wantDirs    []string // an AmbiguousOutputError's
	}{
		{"a directory is itself", "mine", "mine", nil},
		{"a directory is itself, as a path too", explicit, explicit, nil},
		{"the full default name is a directory", rel(single), rel(single), nil},
		{"nodepack-JOBID finds that job's sweep, not one named like it", "nodepack-41", rel(single), nil},
		{"the sweep named like it, by its own name", rel(lookalike), rel(lookalike), nil},
		{"a bare job id in the current directory", "41", rel(single), nil},
		{"nodepack-JOBID with a path finds it beside", filepath.Join(dir, "nodepack-41"), single, nil},
		{"a sharded array by its array id", "nodepack-300", rel(sharded), nil},
		{"a sharded array by a task's own job id", "300", rel(sharded), nil},
		{"one task of a non-split array by its label", "nodepack-500_1", rel(task1), nil},
		{"a non-split array by its id: each task's sweep", "nodepack-500", "", []string{rel(task0), rel(task1)}},
		{"a job that ran two sweeps lists both", "7", "", []string{rel(twice[0]), rel(twice[1])}},
		{"no such job: unchanged, for the reader to say what is missing", "nodepack-999", "nodepack-999", nil},
		{"a bare id with a path is a path", filepath.Join(dir, "41"), filepath.Join(dir, "41"), nil},
		{"nothing at all", "", "", nil},
	}
	for _, tc := range tests {
		got, err := FindOutput(tc.arg)
		var amb *ambiguousOutputError
		switch {
		case tc.wantDirs != nil:
			if !errors.As(err, &amb) || !slices.Equal(amb.Dirs, tc.wantDirs) {
				t.Errorf("%s: FindOutput(%q) = %q, %v; want the sweeps %q", tc.description, tc.arg, got, err, tc.wantDirs)
			}
		case err != nil || got != tc.want:
			t.Errorf("%s: FindOutput(%q) = %q, %v; want %q", tc.description, tc.arg, got, err, tc.want)
		}
	}
}
