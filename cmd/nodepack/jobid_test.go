package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// inJob runs nodepack in dir as a Slurm job with id would, with vars
// (KEY=VALUE) added; it returns the exit code and the output.
func inJob(t *testing.T, dir string, vars []string, args ...string) (int, string) {
	t.Helper()
	cmd := nodepackCommand(t, nil, args...)
	cmd.Dir = dir
	var env []string
	for _, kv := range cmd.Env {
		if k, _, _ := strings.Cut(kv, "="); !isBatchVar(k) {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, vars...)
	out, err := cmd.CombinedOutput()
	code := 0
	if exit, ok := err.(*exec.ExitError); ok {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, string(out)
}

// isBatchVar reports whether a variable would make nodepack think it runs
// in a batch job.
func isBatchVar(k string) bool {
	for _, p := range []string{"SLURM_", "SGE_", "PBS_", "LSB_"} {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	return k == "JOB_ID" || k == "NSLOTS" || k == "PE_HOSTFILE"
}

// TestJobIDFindsTheSweep: inside a batch job the output directory is
// nodepack-JOBID-NAME-KEY, and every command that reads an output
// directory takes what the user knows instead: nodepack-JOBID, or the job
// id alone; a job that ran two sweeps is exit 2 naming both; a sharded
// array is found by the array's id; run -o nodepack-JOBID resumes the
// job's sweep where it ran.
func TestJobIDFindsTheSweep(t *testing.T) {
	t.Parallel() // its commands run in processes of their own: beside the other such tests
	dir := t.TempDir()
	writeFile(t, dir, "tasks.txt", "echo one\necho two; test -e fixed\n")
	job := []string{"SLURM_JOB_ID=4242", "SLURM_JOB_NUM_NODES=1"}
	if code, out := inJob(t, dir, job, "run", "-q", "--gpus", "none", "tasks.txt"); code != exitFailed {
		t.Fatalf("run in job 4242: exit %d, want 1 (a run fails)\n%s", code, out)
	}
	matches, _ := filepath.Glob(filepath.Join(dir, "nodepack-4242-tasks-*"))
	if len(matches) != 1 {
		t.Fatalf("output directories %q, want one nodepack-4242-tasks-KEY", matches)
	}
	full := filepath.Base(matches[0])
	for _, tc := range []struct {
		description string
		args        []string
		want        string
		code        int
	}{
		{"status by nodepack-JOBID: exit 1, a run failed", []string{"status", "nodepack-4242"}, full + ": 2 runs: 1 succeeded, 1 failed", exitFailed},
		{"status by the bare job id", []string{"status", "4242"}, full + ": 2 runs", exitFailed},
		{"the results table", []string{"status", "--runs", "nodepack-4242"}, ",tasks.txt:2,failed,exit,", exitOK},
		{"the report", []string{"report", "nodepack-4242"}, "report.html: 2 runs", exitOK},
		{"tail of one run", []string{"tail", "nodepack-4242", "tasks.txt:1"}, "[tasks.txt:1] one", exitOK},
	} {
		if code, out := inJob(t, dir, nil, tc.args...); code != tc.code || !strings.Contains(out, tc.want) {
			t.Errorf("%s: nodepack %s: exit %d, want %d and %q\n%s", tc.description, strings.Join(tc.args, " "), code, tc.code, tc.want, out)
		}
	}
	// retry reruns the failed run in the job's directory, not a new one.
	writeFile(t, dir, "fixed", "")
	if code, out := inJob(t, dir, nil, "retry", "4242"); code != exitOK || !strings.Contains(out, "-o "+filepath.Join(dir, full)) {
		t.Errorf("retry 4242: exit %d; want it to run in %s\n%s", code, full, out)
	}
	if code, out := inJob(t, dir, nil, "status", "4242"); code != exitOK {
		t.Errorf("status after the retry: exit %d, want 0: no run failed\n%s", code, out)
	}
	// The same sweep resubmitted as another job with -o nodepack-OLDID
	// resumes where job 4242 ran it.
	code, out := inJob(t, dir, []string{"SLURM_JOB_ID=4243"}, "run", "--gpus", "none", "-o", "nodepack-4242", "tasks.txt")
	if !strings.Contains(out, "nodepack-4242 is this sweep's "+full+": resuming there") || !strings.Contains(out, "skipped 2 runs done before: 2 succeeded") {
		t.Errorf("run -o nodepack-4242 in another job: exit %d, want it to resume %s\n%s", code, full, out)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "nodepack-424*")); len(m) != 1 {
		t.Errorf("output directories %q after the resubmission, want only %s", m, full)
	}
	// A second sweep in the same job: the job id names two, exit 2 naming both.
	writeFile(t, dir, "other.txt", "echo other\n")
	if code, out := inJob(t, dir, job, "run", "-q", "--gpus", "none", "other.txt"); code != exitOK {
		t.Fatalf("second sweep: exit %d\n%s", code, out)
	}
	code, out = inJob(t, dir, nil, "status", "nodepack-4242")
	if code != exitUsage || !strings.Contains(out, "job 4242 ran 2 sweeps: nodepack-4242-other-") || !strings.Contains(out, full) || strings.Count(out, "\n") != 1 {
		t.Errorf("status of a job with two sweeps: exit %d, want 2 and one line naming both\n%s", code, out)
	}
	// A sweep sharded over a Slurm array: its directory carries the
	// array's id, and the array's id finds all its shards.
	for i, id := range []string{"700", "701", "702"} {
		task := []string{"SLURM_JOB_ID=" + id, "SLURM_ARRAY_JOB_ID=700", "SLURM_ARRAY_TASK_ID=" + string(rune('0'+i)),
			"SLURM_ARRAY_TASK_MIN=0", "SLURM_ARRAY_TASK_MAX=2", "SLURM_ARRAY_TASK_COUNT=3", "SLURM_ARRAY_TASK_STEP=1"}
		if code, out := inJob(t, dir, task, "run", "-q", "--gpus", "none", "other.txt"); code != exitOK {
			t.Fatalf("array task %d: exit %d\n%s", i, code, out)
		}
	}
	if code, out := inJob(t, dir, nil, "status", "nodepack-700"); code != exitOK || strings.Count(out, "(shard ") != 3 {
		t.Errorf("status nodepack-700: exit %d, want the 3 shards\n%s", code, out)
	}
}
