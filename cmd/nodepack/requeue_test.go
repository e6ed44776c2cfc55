package main

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nodepack/nodepack/resources"
)

// TestRequeue: stopped with runs left (here: the job is already inside
// its --stop-before window, so every run is deferred), nodepack asks the
// batch system to run the job again.
func TestRequeue(t *testing.T) {
	var calls [][]string
	saved := scontrol
	scontrol = func(args ...string) ([]byte, error) { calls = append(calls, args); return nil, nil }
	t.Cleanup(func() { scontrol = saved })

	tests := []struct {
		description string
		env         map[string]string
		wantCode    int
		wantCall    []string // nil: scontrol must not be called
		wantErr     string
	}{
		{"slurm: scontrol requeue of this job", map[string]string{"SLURM_JOB_ID": "77"}, exitDeferred,
			[]string{"requeue", "77"}, "requeued job 77"},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			calls = nil
			for _, k := range []string{"SLURM_JOB_ID", "SLURM_JOB_END_TIME", "JOB_ID", "SGE_ROOT", "SGE_TASK_ID"} {
				os.Unsetenv(k)
			}
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			t.Setenv("SLURM_JOB_END_TIME", strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10))
			dir := t.TempDir()
			tasks := writeFile(t, dir, "tasks.txt", "true\ntrue\n")
			args := []string{"run", "--gpus", "none", "-o", filepath.Join(dir, "out"), "--requeue", tasks}
			args = append(args, "--stop-before", "2h")
			code, _, stderr := runCLI(t, args...)
			if code != tc.wantCode || !strings.Contains(stderr, tc.wantErr) {
				t.Errorf("exit %d, want %d with %q:\n%s", code, tc.wantCode, tc.wantErr, stderr)
			}
			if len(calls) != 1 || !slices.Equal(calls[0], tc.wantCall) {
				t.Errorf("scontrol calls %q, want one %q", calls, tc.wantCall)
			}
		})
	}
}

// TestRequeueJob covers each scheduler's way of requeueing directly.
func TestRequeueJob(t *testing.T) {
	saved := scontrol
	t.Cleanup(func() { scontrol = saved })
	var calls [][]string
	scontrol = func(args ...string) ([]byte, error) { calls = append(calls, args); return nil, nil }
	var stderr strings.Builder
	if code := requeueJob(slurmJob("5"), &stderr, 143); code != 143 || len(calls) != 1 || !slices.Equal(calls[0], []string{"requeue", "5"}) {
		t.Errorf("slurm: exit %d, calls %q", code, calls)
	}
	if code := requeueJob(sgeJob("6"), &stderr, 143); code != sgeRequeueExit || len(calls) != 1 {
		t.Errorf("sge: exit %d, want 99 and no scontrol call (calls %q)", code, calls)
	}
	scontrol = func(args ...string) ([]byte, error) {
		return []byte("Requested operation is presently disabled"), os.ErrPermission
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
