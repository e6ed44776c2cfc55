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
