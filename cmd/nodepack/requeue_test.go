package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nodepack/nodepack/resources"
)

// TestRequeue: a Slurm job already inside its --stop-before window defers
// every run, so nodepack exits 3 and asks Slurm to run the job again.
func TestRequeue(t *testing.T) {
	var calls [][]string
	fakeBatch(t, func(name string, args ...string) ([]byte, error) {
		if name == "scontrol" && args[0] == "requeue" {
			calls = append(calls, args)
			return nil, nil
		}
		return nil, errors.New("no Slurm here")
	})
	t.Setenv("SLURM_JOB_ID", "77")
	t.Setenv("SLURM_JOB_END_TIME", strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10))

	dir := t.TempDir()
	tasks := writeFile(t, dir, "tasks.txt", "true\ntrue\n")
	code, _, stderr := runCLI(t, "run", "--gpus", "none", "-o", filepath.Join(dir, "out"), "--requeue", "--stop-before", "2h", tasks)
	if code != exitDeferred || !strings.Contains(stderr, "requeued job 77") {
		t.Errorf("exit %d, want 3 and the requeue reported:\n%s", code, stderr)
	}
	if len(calls) != 1 || !slices.Equal(calls[0], []string{"requeue", "77"}) {
		t.Errorf("scontrol calls %q, want one [requeue 77]", calls)
	}
}

// TestRequeueJob covers each scheduler's way of requeueing directly.
func TestRequeueJob(t *testing.T) {
	var calls [][]string
	fakeBatch(t, func(name string, args ...string) ([]byte, error) { calls = append(calls, args); return nil, nil })
	var stderr strings.Builder
	if code := requeueJob(slurmJob("5"), &stderr, 143); code != 143 || len(calls) != 1 || !slices.Equal(calls[0], []string{"requeue", "5"}) {
		t.Errorf("slurm: exit %d, calls %q", code, calls)
	}
	if code := requeueJob(sgeJob("6"), &stderr, 143); code != sgeRequeueExit || len(calls) != 1 {
		t.Errorf("sge: exit %d, want 99 and no scontrol call (calls %q)", code, calls)
	}
	batchCommand = func(name string, args ...string) ([]byte, error) {
		return nil, fmt.Errorf("%w: Requested operation is presently disabled", os.ErrPermission)
	}
	stderr.Reset()
	if code := requeueJob(slurmJob("7"), &stderr, 143); code != 143 || !strings.Contains(stderr.String(), "presently disabled") {
		t.Errorf("refused requeue: exit %d, stderr %q", code, stderr.String())
	}
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
	if code != exitUsage || !strings.Contains(stderr, "--requeue: nodepack can requeue Slurm and Grid Engine jobs") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}

func slurmJob(id string) resources.Scheduler {
	return resources.Scheduler{Kind: resources.SchedulerSlurm, JobID: id}
}
func sgeJob(id string) resources.Scheduler {
	return resources.Scheduler{Kind: resources.SchedulerSGE, JobID: id}
}

// fakeBatch stands in for the batch system's commands for one test.
func fakeBatch(t *testing.T, f func(name string, args ...string) ([]byte, error)) {
	saved := batchCommand
	batchCommand = f
	t.Cleanup(func() { batchCommand = saved })
}
