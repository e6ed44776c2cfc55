package batch

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func envOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestDetect(t *testing.T) {
	tests := []struct {
		description string
		env         map[string]string
		want        Job
	}{
		{"nothing", map[string]string{"HOME": "/root"}, Job{Kind: "none"}},
		{"slurm batch job", map[string]string{"SLURM_JOB_ID": "42", "SLURM_JOB_END_TIME": "1790000000", "SLURM_TMPDIR": "/local/42"},
			Job{Kind: "slurm", JobID: "42", EndTime: time.Unix(1790000000, 0).UTC(), Scratch: "/local/42"}},
		{"slurm array task", map[string]string{"SLURM_JOB_ID": "43", "SLURM_ARRAY_JOB_ID": "40", "SLURM_ARRAY_TASK_ID": "5", "SLURM_ARRAY_TASK_MIN": "1",
			"SLURM_ARRAY_TASK_MAX": "9", "SLURM_ARRAY_TASK_STEP": "2", "SLURM_ARRAY_TASK_COUNT": "5"},
			Job{Kind: "slurm", JobID: "43", ArrayJobID: "40", Array: &Array{Index: 5, Min: 1, Max: 9, Step: 2, Count: 5}}},
		{"slurm srun task", map[string]string{"SLURM_JOBID": "44", "SLURM_STEP_ID": "0", "SLURM_PROCID": "3", "SLURM_NTASKS": "4", "SLURM_LOCALID": "1"},
			Job{Kind: "slurm", JobID: "44", Tasks: &Tasks{Rank: 3, Count: 4, LocalRank: 1}}},
		{"slurm srun task counts the step's tasks", map[string]string{"SLURM_JOB_ID": "44", "SLURM_STEPID": "2", "SLURM_PROCID": "1", "SLURM_NTASKS": "8", "SLURM_STEP_NUM_TASKS": "2"},
			Job{Kind: "slurm", JobID: "44", Tasks: &Tasks{Rank: 1, Count: 2}}},
		{"slurm batch script with --ntasks is not a step", map[string]string{"SLURM_JOB_ID": "44", "SLURM_PROCID": "0", "SLURM_NTASKS": "4"},
			Job{Kind: "slurm", JobID: "44"}},
		{"slurm batch step id is not a task step", map[string]string{"SLURM_JOB_ID": "44", "SLURM_STEP_ID": "4294967291", "SLURM_PROCID": "0", "SLURM_NTASKS": "4"},
			Job{Kind: "slurm", JobID: "44"}},
		{"slurm array with only the count is 0..count-1", map[string]string{"SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_COUNT": "3"},
			Job{Kind: "slurm", Array: &Array{Index: 1, Min: 0, Max: 2, Step: 1, Count: 3}}},
		{"slurm array without the count counts the range", map[string]string{"SLURM_JOB_ID": "46", "SLURM_ARRAY_TASK_ID": "4", "SLURM_ARRAY_TASK_MIN": "2",
			"SLURM_ARRAY_TASK_MAX": "8", "SLURM_ARRAY_TASK_STEP": "2"},
			Job{Kind: "slurm", JobID: "46", Array: &Array{Index: 4, Min: 2, Max: 8, Step: 2, Count: 4}}},
		{"grid engine array", map[string]string{"SGE_ROOT": "/opt/sge", "JOB_ID": "7", "SGE_TASK_ID": "4", "SGE_TASK_FIRST": "1",
			"SGE_TASK_LAST": "10", "SGE_TASK_STEPSIZE": "3", "TMPDIR": "/tmp/7.4.q"},
			Job{Kind: "sge", JobID: "7", Array: &Array{Index: 4, Min: 1, Max: 10, Step: 3, Count: 4}, Scratch: "/tmp/7.4.q"}},
		{"grid engine, not an array", map[string]string{"SGE_ROOT": "/opt/sge", "JOB_ID": "8", "SGE_TASK_ID": "undefined"},
			Job{Kind: "sge", JobID: "8"}},
		{"grid engine as root sees it: no TMPDIR, slots, a spool directory", map[string]string{"SGE_ROOT": "/opt/sge", "JOB_ID": "9",
			"SGE_TASK_ID": "undefined", "NSLOTS": "2", "TMP": "/sge/tmp/9.1.all.q", "SGE_JOB_SPOOL_DIR": "/sge/spool/execd/vm/active_jobs/9.1"},
			Job{Kind: "sge", JobID: "9", Slots: 2, Scratch: "/sge/tmp/9.1.all.q", SpoolDir: "/sge/spool/execd/vm/active_jobs/9.1"}},
		{"pbs pro array", map[string]string{"PBS_JOBID": "9[3].server", "PBS_ARRAY_INDEX": "3"},
			Job{Kind: "pbs", JobID: "9[3].server", Array: &Array{Index: 3, Min: 3, Max: 3, Step: 1}}},
		{"torque array", map[string]string{"PBS_JOBID": "10-2", "PBS_ARRAYID": "2"},
			Job{Kind: "pbs", JobID: "10-2", Array: &Array{Index: 2, Min: 2, Max: 2, Step: 1}}},
		{"lsf array", map[string]string{"LSB_JOBID": "11", "LSB_JOBINDEX": "2", "LSB_JOBINDEX_END": "6"},
			Job{Kind: "lsf", JobID: "11", Array: &Array{Index: 2, Min: 1, Max: 6, Step: 1}}},
		{"lsf, not an array", map[string]string{"LSB_JOBID": "12", "LSB_JOBINDEX": "0"}, Job{Kind: "lsf", JobID: "12"}},
		{"unparsable values are left out", map[string]string{"SLURM_JOB_ID": "45", "SLURM_ARRAY_TASK_ID": "x", "SLURM_JOB_END_TIME": "soon"},
			Job{Kind: "slurm", JobID: "45"}},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			if got := Detect(envOf(tc.env)); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Detect = %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestPlace(t *testing.T) {
	slurm := func(env ...string) Job {
		m := map[string]string{"SLURM_JOB_ID": "1"}
		for i := 0; i < len(env); i += 2 {
			m[env[i]] = env[i+1]
		}
		return Detect(envOf(m))
	}
	tests := []struct {
		description  string
		job          Job
		total        int
		runsPerShard int
		want         Place
		wantErr      string
	}{
		{"no scheduler", Job{Kind: "none"}, 10, 0, Place{Index: 0, Count: 1}, ""},
		{"batch job", slurm(), 10, 0, Place{Index: 0, Count: 1}, ""},
		{"slurm array from 0", slurm("SLURM_ARRAY_TASK_ID", "2", "SLURM_ARRAY_TASK_MIN", "0", "SLURM_ARRAY_TASK_MAX", "3", "SLURM_ARRAY_TASK_COUNT", "4"), 10, 0,
			Place{Index: 2, Count: 4, From: "SLURM_ARRAY_TASK_ID=2 of 0-3"}, ""},
		{"slurm array with an offset and a step", slurm("SLURM_ARRAY_TASK_ID", "5", "SLURM_ARRAY_TASK_MIN", "1", "SLURM_ARRAY_TASK_MAX", "9", "SLURM_ARRAY_TASK_STEP", "2", "SLURM_ARRAY_TASK_COUNT", "5"), 10, 0,
			Place{Index: 2, Count: 5, From: "SLURM_ARRAY_TASK_ID=5 of 1-9"}, ""},
		{"slurm irregular array", slurm("SLURM_ARRAY_TASK_ID", "5", "SLURM_ARRAY_TASK_MIN", "1", "SLURM_ARRAY_TASK_MAX", "7", "SLURM_ARRAY_TASK_COUNT", "3"), 10, 0, Place{}, "give the shard as I/N"},
		{"srun tasks", slurm("SLURM_STEP_ID", "0", "SLURM_PROCID", "3", "SLURM_NTASKS", "4"), 10, 0, Place{Index: 3, Count: 4, From: "SLURM_PROCID=3 of 4 tasks"}, ""},
		{"batch script with --ntasks", slurm("SLURM_PROCID", "0", "SLURM_NTASKS", "4"), 10, 0, Place{Index: 0, Count: 1}, ""},
		{"array of multi-task steps", slurm("SLURM_ARRAY_TASK_ID", "1", "SLURM_ARRAY_TASK_MIN", "0", "SLURM_ARRAY_TASK_MAX", "2", "SLURM_ARRAY_TASK_COUNT", "3",
			"SLURM_STEP_ID", "0", "SLURM_PROCID", "1", "SLURM_NTASKS", "2"), 10, 0,
			Place{Index: 3, Count: 6, From: "SLURM_ARRAY_TASK_ID=1 of 0-2 and SLURM_PROCID=1 of 2 tasks"}, ""},
		{"grid engine array from 1", Job{Kind: "sge", Array: &Array{Index: 7, Min: 1, Max: 10, Step: 3, Count: 4}}, 10, 0, Place{Index: 2, Count: 4, From: "SGE_TASK_ID=7 of 1-10"}, ""},
		{"pbs needs a size", Job{Kind: "pbs", Array: &Array{Index: 1, Min: 1, Max: 1, Step: 1}}, 10, 0, Place{}, "give the runs per shard"},
		{"pbs from 0 with runs per shard", Job{Kind: "pbs", Array: &Array{Index: 1, Min: 1, Max: 1, Step: 1}}, 10, 4,
			Place{Index: 1, Count: 3, From: "PBS_ARRAY_INDEX=1 of 3 tasks (4 runs per shard)"}, ""},
		{"pbs index past the shards", Job{Kind: "pbs", Array: &Array{Index: 3, Min: 3, Max: 3, Step: 1}}, 10, 4, Place{}, "is not one of the 3 array tasks"},
		{"lsf from 1 with runs per shard", Job{Kind: "lsf", Array: &Array{Index: 1, Min: 1, Max: 3, Step: 1}}, 10, 4,
			Place{Index: 0, Count: 3, From: "LSB_JOBINDEX=1 of 3 tasks (4 runs per shard)"}, ""},
		{"unknown size", Job{Kind: "lsf", Array: &Array{Index: 1, Min: 1, Max: 3, Step: 1}}, -1, 4, Place{}, "need a source whose size is known"},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			got, err := tc.job.Place(tc.total, tc.runsPerShard)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("Place error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("Place = %+v, %v; want %+v", got, err, tc.want)
			}
			if splits := tc.job.Splits(); splits != (got.Count > 1) && tc.job.Array == nil {
				t.Errorf("Splits = %v for a place of %d", splits, got.Count)
			}
		})
	}
}

func TestOutputDir(t *testing.T) {
	tests := []struct {
		description string
		env         map[string]string
		split       bool
		want        string
	}{
		{"no scheduler", map[string]string{}, false, "nodepack-tasks-1f2e"},
		{"slurm job: its id, the same after a requeue", map[string]string{"SLURM_JOB_ID": "123"}, false, "nodepack-123-tasks-1f2e"},
		{"split slurm array: the array's id, shared by all tasks", map[string]string{"SLURM_JOB_ID": "125", "SLURM_ARRAY_JOB_ID": "123", "SLURM_ARRAY_TASK_ID": "2"}, true, "nodepack-123-tasks-1f2e"},
		{"unsplit slurm array: one directory per task", map[string]string{"SLURM_JOB_ID": "125", "SLURM_ARRAY_JOB_ID": "123", "SLURM_ARRAY_TASK_ID": "2"}, false, "nodepack-123_2-tasks-1f2e"},
		{"sge array, unsplit", map[string]string{"SGE_ROOT": "/sge", "JOB_ID": "77", "SGE_TASK_ID": "3"}, false, "nodepack-77_3-tasks-1f2e"},
		{"pbs id with odd characters", map[string]string{"PBS_JOBID": "12[3].server/x"}, false, "nodepack-12_3_.server_x-tasks-1f2e"},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			if got := OutputDir(Detect(envOf(tc.env)), tc.split, "tasks-1f2e"); got != tc.want {
				t.Errorf("OutputDir = %q, want %q", got, tc.want)
			}
		})
	}
}

// fakeCommands puts scripts named after batch commands first in PATH for
// one test: a stand-in for the batch system.
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

// TestEndTime: without SLURM_JOB_END_TIME (Slurm 22.05), the end comes
// from squeue, else from scontrol show job.
func TestEndTime(t *testing.T) {
	end := time.Date(2026, 11, 24, 13, 5, 0, 0, time.Local)
	job := Job{Kind: Slurm, JobID: "42"}
	tests := []struct {
		description string
		squeue      string
		scontrol    string
		job         Job
		want        time.Time
		wantFrom    string
		wantErr     string
	}{
		{"squeue", "echo 2026-11-24T13:05:00", "exit 1", job, end, "squeue", ""},
		{"scontrol when squeue says nothing useful", "echo N/A", "echo JobId=42 JobName=x EndTime=2026-11-24T13:05:00 Deadline=N/A", job, end, "squeue", ""},
		{"no time limit", "echo N/A", "echo JobId=42 EndTime=Unknown", job, time.Time{}, "", "the job has no time limit"},
		{"no Slurm to ask: the job's variable", "exit 1", "exit 1", Job{Kind: Slurm, JobID: "42", EndTime: end}, end, "SLURM_JOB_END_TIME", ""},
		{"nothing at all", "echo 'squeue: error: Invalid job id' >&2; exit 1", "exit 1", job, time.Time{}, "", "Invalid job id"},
		{"not Slurm, no end", "exit 1", "exit 1", Job{Kind: SGE, JobID: "1"}, time.Time{}, "", "not known"},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			fakeCommands(t, map[string]string{"squeue": tc.squeue, "scontrol": tc.scontrol})
			checkEndTime(t, tc.job, tc.want, tc.wantFrom, tc.wantErr)
		})
	}
}

// TestSGEEndTime: a Grid Engine job ends its run-time limit after its
// spool directory's config was written, the limit as qstat -j lists it
// (qstat -j output as Son of Grid Engine 8.1.9 prints it).
func TestSGEEndTime(t *testing.T) {
	spool := t.TempDir()
	start := time.Date(2026, 11, 24, 16, 31, 56, 0, time.Local)
	if err := os.WriteFile(filepath.Join(spool, "config"), []byte("notify=60\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(filepath.Join(spool, "config"), start, start); err != nil {
		t.Fatal(err)
	}
	qstat := func(resources string) string {
		return "cat <<'EOF'\n==============================================================\njob_number:                 1\n" +
			"hard resource_list:         " + resources + "\nnotify:                     TRUE\njob_name:                   j2.sh\nEOF"
	}
	job := Job{Kind: SGE, JobID: "1", SpoolDir: spool}
	for _, tc := range []struct {
		description, qstat string
		job                Job
		want               time.Time
		wantFrom, wantErr  string
	}{
		{"h_rt before s_rt", qstat("h_rt=600,s_rt=540"), job, start.Add(600 * time.Second), "qstat -j 1: h_rt", ""},
		{"s_rt alone", qstat("s_rt=540,h_vmem=4G"), job, start.Add(540 * time.Second), "qstat -j 1: s_rt", ""},
		{"h:m:s", qstat("h_rt=1:30:00"), job, start.Add(90 * time.Minute), "qstat -j 1: h_rt", ""},
		{"no run-time limit", qstat("h_vmem=4G"), job, time.Time{}, "", "the job has no time limit (-l h_rt=HH:MM:SS sets one)"},
		{"a limit that does not parse", qstat("h_rt=soon"), job, time.Time{}, "", `h_rt: time "soon"`},
		{"qstat fails", "echo 'denied: job \"1\" does not exist' >&2; exit 1", job, time.Time{}, "", "does not exist"},
		{"no spool directory", qstat("h_rt=600"), Job{Kind: SGE, JobID: "1"}, time.Time{}, "", "SGE_JOB_SPOOL_DIR is not set"},
	} {
		t.Run(tc.description, func(t *testing.T) {
			fakeCommands(t, map[string]string{"qstat": tc.qstat})
			checkEndTime(t, tc.job, tc.want, tc.wantFrom, tc.wantErr)
		})
	}
}

// TestFollow: a time limit moved while the job runs (scontrol update
// TimeLimit) is reported, and so is one set on a job that had none (or
// whose end Slurm did not tell at first: a zero end).
func TestFollow(t *testing.T) {
	saved := followPoll
	followPoll = [2]time.Duration{time.Millisecond, 10 * time.Millisecond}
	t.Cleanup(func() { followPoll = saved })
	end := time.Now().Add(time.Hour).Truncate(time.Second)
	moved := end.Add(30 * time.Minute)
	fakeCommands(t, map[string]string{"squeue": "echo " + moved.Format("2006-01-02T15:04:05")})
	for _, from := range []time.Time{end, {}} {
		got := make(chan time.Time, 1)
		done, finished := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(finished)
			Follow(Job{Kind: Slurm, JobID: "42"}, from, 10*time.Minute, func(e time.Time) {
				select {
				case got <- e:
				default:
				}
			}, done)
		}()
		select {
		case e := <-got:
			if !e.Equal(moved) {
				t.Errorf("from %v: moved to %v, want %v", from, e, moved)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("from %v: the moved end was not followed", from)
		}
		close(done)
		<-finished
	}
}

// TestRequeue covers each scheduler's way of requeueing.
func TestRequeue(t *testing.T) {
	dir := fakeCommands(t, map[string]string{"scontrol": `echo "$@" >> "$(dirname "$0")/calls"`})
	if exit, err := Requeue(Job{Kind: Slurm, JobID: "5"}); exit != 0 || err != nil {
		t.Errorf("slurm: exit %d, %v", exit, err)
	}
	calls, _ := os.ReadFile(filepath.Join(dir, "calls"))
	if string(calls) != "requeue 5\n" {
		t.Errorf("scontrol calls %q, want requeue 5", calls)
	}
	if exit, err := Requeue(Job{Kind: SGE, JobID: "6"}); exit != sgeRequeueExit || err != nil {
		t.Errorf("sge: exit %d, %v; want 99", exit, err)
	}
	fakeCommands(t, map[string]string{"scontrol": `echo "Requested operation is presently disabled" >&2; exit 1`})
	if _, err := Requeue(Job{Kind: Slurm, JobID: "7"}); err == nil || !strings.Contains(err.Error(), "presently disabled") {
		t.Errorf("refused requeue: %v", err)
	}
	if _, err := Requeue(Job{Kind: PBS, JobID: "8"}); err == nil || CanRequeue(Job{Kind: PBS}) {
		t.Errorf("pbs: %v, want it refused", err)
	}
}

// checkEndTime checks what EndTime says of job: the end and where it was
// read, or an error containing wantErr.
func checkEndTime(t *testing.T, job Job, want time.Time, wantFrom, wantErr string) {
	t.Helper()
	got, from, err := EndTime(job)
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("err %v, want %q", err, wantErr)
		}
		return
	}
	if err != nil || !got.Equal(want) || from != wantFrom {
		t.Errorf("EndTime = %v, %q, %v; want %v from %s", got, from, err, want, wantFrom)
	}
}
