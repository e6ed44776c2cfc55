package resources

import (
	"reflect"
	"testing"
	"time"
)

func TestDetectScheduler(t *testing.T) {
	tests := []struct {
		description string
		env         map[string]string
		want        Scheduler
	}{
		{"nothing", map[string]string{"HOME": "/root"}, Scheduler{Kind: "none"}},
		{"slurm batch job", map[string]string{"SLURM_JOB_ID": "42", "SLURM_JOB_END_TIME": "1790000000", "SLURM_TMPDIR": "/local/42"},
			Scheduler{Kind: "slurm", JobID: "42", EndTime: time.Unix(1790000000, 0).UTC(), Scratch: "/local/42"}},
		{"slurm array task", map[string]string{"SLURM_JOB_ID": "43", "SLURM_ARRAY_TASK_ID": "5", "SLURM_ARRAY_TASK_MIN": "1",
			"SLURM_ARRAY_TASK_MAX": "9", "SLURM_ARRAY_TASK_STEP": "2", "SLURM_ARRAY_TASK_COUNT": "5"},
			Scheduler{Kind: "slurm", JobID: "43", Array: &Array{Index: 5, Min: 1, Max: 9, Step: 2, Count: 5}}},
		{"slurm srun task", map[string]string{"SLURM_JOBID": "44", "SLURM_STEP_ID": "0", "SLURM_PROCID": "3", "SLURM_NTASKS": "4", "SLURM_LOCALID": "1"},
			Scheduler{Kind: "slurm", JobID: "44", Tasks: &Tasks{Rank: 3, Count: 4, LocalRank: 1}}},
		{"slurm srun task counts the step's tasks", map[string]string{"SLURM_JOB_ID": "44", "SLURM_STEPID": "2", "SLURM_PROCID": "1", "SLURM_NTASKS": "8", "SLURM_STEP_NUM_TASKS": "2"},
			Scheduler{Kind: "slurm", JobID: "44", Tasks: &Tasks{Rank: 1, Count: 2}}},
		{"slurm batch script with --ntasks is not a step", map[string]string{"SLURM_JOB_ID": "44", "SLURM_PROCID": "0", "SLURM_NTASKS": "4"},
			Scheduler{Kind: "slurm", JobID: "44"}},
		{"slurm batch step id is not a task step", map[string]string{"SLURM_JOB_ID": "44", "SLURM_STEP_ID": "4294967291", "SLURM_PROCID": "0", "SLURM_NTASKS": "4"},
			Scheduler{Kind: "slurm", JobID: "44"}},
		{"slurm array with only the count is 0..count-1", map[string]string{"SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_COUNT": "3"},
			Scheduler{Kind: "slurm", Array: &Array{Index: 1, Min: 0, Max: 2, Step: 1, Count: 3}}},
		{"slurm array without the count counts the range", map[string]string{"SLURM_JOB_ID": "46", "SLURM_ARRAY_TASK_ID": "4", "SLURM_ARRAY_TASK_MIN": "2",
			"SLURM_ARRAY_TASK_MAX": "8", "SLURM_ARRAY_TASK_STEP": "2"},
			Scheduler{Kind: "slurm", JobID: "46", Array: &Array{Index: 4, Min: 2, Max: 8, Step: 2, Count: 4}}},
		{"grid engine array", map[string]string{"SGE_ROOT": "/opt/sge", "JOB_ID": "7", "SGE_TASK_ID": "4", "SGE_TASK_FIRST": "1",
			"SGE_TASK_LAST": "10", "SGE_TASK_STEPSIZE": "3", "TMPDIR": "/tmp/7.4.q"},
			Scheduler{Kind: "sge", JobID: "7", Array: &Array{Index: 4, Min: 1, Max: 10, Step: 3, Count: 4}, Scratch: "/tmp/7.4.q"}},
		{"grid engine, not an array", map[string]string{"SGE_ROOT": "/opt/sge", "JOB_ID": "8", "SGE_TASK_ID": "undefined"},
			Scheduler{Kind: "sge", JobID: "8"}},
		{"pbs pro array", map[string]string{"PBS_JOBID": "9[3].server", "PBS_ARRAY_INDEX": "3"},
			Scheduler{Kind: "pbs", JobID: "9[3].server", Array: &Array{Index: 3, Min: 3, Max: 3, Step: 1}}},
		{"torque array", map[string]string{"PBS_JOBID": "10-2", "PBS_ARRAYID": "2"},
			Scheduler{Kind: "pbs", JobID: "10-2", Array: &Array{Index: 2, Min: 2, Max: 2, Step: 1}}},
		{"lsf array", map[string]string{"LSB_JOBID": "11", "LSB_JOBINDEX": "2", "LSB_JOBINDEX_END": "6"},
			Scheduler{Kind: "lsf", JobID: "11", Array: &Array{Index: 2, Min: 1, Max: 6, Step: 1}}},
		{"lsf, not an array", map[string]string{"LSB_JOBID": "12", "LSB_JOBINDEX": "0"}, Scheduler{Kind: "lsf", JobID: "12"}},
		{"unparsable values are left out", map[string]string{"SLURM_JOB_ID": "45", "SLURM_ARRAY_TASK_ID": "x", "SLURM_JOB_END_TIME": "soon"},
			Scheduler{Kind: "slurm", JobID: "45"}},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			if got := DetectScheduler(envOf(tc.env)); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("DetectScheduler = %+v\nwant %+v", got, tc.want)
			}
		})
	}
}
