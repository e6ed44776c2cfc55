package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestRequeue: a Slurm job already inside its --stop-before window defers
// every run, so nodepack exits 3 and asks Slurm to run the job again.
func TestRequeue(t *testing.T) {
	bin := fakeCommands(t, map[string]string{
		"scontrol": `[ "$1" = requeue ] || exit 1; echo "$@" >> "$(dirname "$0")/calls"`,
		"squeue":   "exit 1", // no end time from Slurm: SLURM_JOB_END_TIME says it
	})
	t.Setenv("SLURM_JOB_ID", "77")
	t.Setenv("SLURM_JOB_END_TIME", strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10))

	dir := t.TempDir()
	tasks := writeFile(t, dir, "tasks.txt", "true\ntrue\n")
	code, _, stderr := runCLI(t, "run", "--gpus", "none", "-o", filepath.Join(dir, "out"), "--requeue", "--stop-before", "2h", tasks)
	if code != exitDeferred || !strings.Contains(stderr, "requeued job 77") {
		t.Errorf("exit %d, want 3 and the requeue reported:\n%s", code, stderr)
	}
	if calls, _ := os.ReadFile(filepath.Join(bin, "calls")); string(calls) != "requeue 77\n" {
		t.Errorf("scontrol calls %q, want one requeue 77", calls)
	}
}

// fakeCommands puts scripts named after the batch system's commands first
// in PATH for one test, and returns their directory.
func fakeCommands(t *testing.T, scripts map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range scripts {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	return dir
}

func TestRequeueOutsideABatchJob(t *testing.T) {
	for _, k := range []string{"SLURM_JOB_ID", "SLURM_JOBID", "JOB_ID", "SGE_ROOT", "SGE_TASK_ID", "PBS_JOBID", "LSB_JOBID"} {
		if _, ok := os.LookupEnv(k); ok {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
	dir := t.TempDir()
	tasks := writeFile(t, dir, "tasks.txt", "true\n")
	code, _, stderr := runCLI(t, "run", "--gpus", "none", "-o", filepath.Join(dir, "out"), "--requeue", tasks)
	if code != exitUsage || !strings.Contains(stderr, "requeue: nodepack can requeue Slurm and Grid Engine jobs") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}

// TestStopBeforeWithoutAnEnd: --stop-before in a job whose end is not
// known runs the sweep, saying there is nothing to stop before: a job
// without a time limit (what submit writes without --time, on a queue with
// no limit), a Slurm that does not answer, no batch job at all.
func TestStopBeforeWithoutAnEnd(t *testing.T) {
	for _, tc := range []struct {
		description, squeue, scontrol, jobID, want string
	}{
		{"no time limit", "echo N/A", "echo JobId=77 EndTime=Unknown", "77", "the job has no time limit, so there is nothing to stop before"},
		{"Slurm does not answer", "echo 'squeue: error: Unable to contact slurm controller' >&2; exit 1", "exit 1", "77", "Unable to contact slurm controller; scontrol: exit status 1; the sweep runs as if the job had no limit until its end is known"},
		{"no batch job", "exit 1", "exit 1", "", "not in a batch job, so there is no end to stop before"},
	} {
		t.Run(tc.description, func(t *testing.T) {
			fakeCommands(t, map[string]string{"squeue": tc.squeue, "scontrol": tc.scontrol})
			for _, k := range []string{"SLURM_JOB_ID", "SLURM_JOBID", "SLURM_JOB_END_TIME", "JOB_ID", "SGE_ROOT", "SGE_TASK_ID", "PBS_JOBID", "LSB_JOBID"} {
				t.Setenv(k, "")
				os.Unsetenv(k)
			}
			if tc.jobID != "" {
				t.Setenv("SLURM_JOB_ID", tc.jobID)
			}
			dir := t.TempDir()
			tasks := writeFile(t, dir, "tasks.txt", "true\ntrue\n")
			code, _, stderr := runCLI(t, "run", "--gpus", "none", "-o", filepath.Join(dir, "out"), "--stop-before", "5m", tasks)
			if code != exitOK || !strings.Contains(stderr, "2 runs: 2 succeeded") || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, want 0, both runs run and %q:\n%s", code, tc.want, stderr)
			}
		})
	}
}
