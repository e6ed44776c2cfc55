package resources

import (
	"strconv"
	"strings"
	"time"
)

// Scheduler kinds.
const (
	SchedulerSlurm = "slurm"
	SchedulerSGE   = "sge" // Sun/Univa/Son of Grid Engine
	SchedulerPBS   = "pbs" // PBS Pro, OpenPBS and Torque
	SchedulerLSF   = "lsf"
	SchedulerNone  = "none"
)

// DetectScheduler reads the batch system's variables through getenv (for
// example os.LookupEnv). Values that do not parse are left out rather than
// guessed.
func DetectScheduler(getenv func(string) (string, bool)) Scheduler {
	str := func(name string) string { v, _ := getenv(name); return strings.TrimSpace(v) }
	num := func(name string) (int, bool) {
		v, err := strconv.Atoi(str(name))
		return v, err == nil
	}
	numOr := func(name string, def int) int {
		if v, ok := num(name); ok {
			return v
		}
		return def
	}
	first := func(names ...string) string {
		for _, n := range names {
			if v := str(n); v != "" {
				return v
			}
		}
		return ""
	}

	switch {
	case str("SLURM_JOB_ID") != "" || str("SLURM_JOBID") != "" || str("SLURM_ARRAY_TASK_ID") != "":
		s := Scheduler{Kind: SchedulerSlurm, JobID: first("SLURM_JOB_ID", "SLURM_JOBID"), Scratch: first("SLURM_TMPDIR", "TMPDIR")}
		if i, ok := num("SLURM_ARRAY_TASK_ID"); ok {
			a := Array{Index: i, Min: i, Max: i, Step: numOr("SLURM_ARRAY_TASK_STEP", 1)}
			a.Count = numOr("SLURM_ARRAY_TASK_COUNT", 0)
			minimum, hasMin := num("SLURM_ARRAY_TASK_MIN")
			maximum, hasMax := num("SLURM_ARRAY_TASK_MAX")
			switch {
			case hasMin && hasMax:
				a.Min, a.Max = minimum, maximum
				if a.Count == 0 && a.Step > 0 && a.Max >= a.Min {
					a.Count = (a.Max-a.Min)/a.Step + 1
				}
			case a.Count > 0:
				// Only the count: the array is taken to be 0 … COUNT-1.
				a.Min, a.Max, a.Step = 0, a.Count-1, 1
			}
			s.Array = &a
			s.ArrayJobID = str("SLURM_ARRAY_JOB_ID")
		}
		// The batch script has SLURM_PROCID=0 and, with --ntasks, SLURM_NTASKS
		// too, but it is not a step's task: only srun sets a regular step id
		// (the batch and extern steps have special ids from 0xfffffff0 up).
		step, inStep := num("SLURM_STEP_ID")
		if !inStep {
			step, inStep = num("SLURM_STEPID")
		}
		if rank, ok := num("SLURM_PROCID"); ok && inStep && step >= 0 && step < 0xfffffff0 {
			count, ok := num("SLURM_STEP_NUM_TASKS")
			if !ok {
				count, ok = num("SLURM_NTASKS")
			}
			if ok {
				s.Tasks = &Tasks{Rank: rank, Count: count, LocalRank: numOr("SLURM_LOCALID", 0)}
			}
		}
		if end, ok := num("SLURM_JOB_END_TIME"); ok && end > 0 {
			s.EndTime = time.Unix(int64(end), 0).UTC()
		}
		return s
	case str("SGE_ROOT") != "" && str("JOB_ID") != "" || str("SGE_TASK_ID") != "":
		s := Scheduler{Kind: SchedulerSGE, JobID: str("JOB_ID"), Scratch: str("TMPDIR")}
		// SGE_TASK_ID is "undefined" outside an array job.
		if i, ok := num("SGE_TASK_ID"); ok {
			a := Array{Index: i, Min: i, Max: i, Step: 1}
			a.Min = numOr("SGE_TASK_FIRST", a.Min)
			a.Max = numOr("SGE_TASK_LAST", a.Max)
			a.Step = numOr("SGE_TASK_STEPSIZE", a.Step)
			if a.Step > 0 && a.Max >= a.Min {
				a.Count = (a.Max-a.Min)/a.Step + 1
			}
			s.Array = &a
		}
		return s
	case str("PBS_JOBID") != "":
		s := Scheduler{Kind: SchedulerPBS, JobID: str("PBS_JOBID"), Scratch: str("TMPDIR")}
		// PBS Pro and OpenPBS say PBS_ARRAY_INDEX, Torque PBS_ARRAYID; neither
		// tells the range, so Min/Max are this index only.
		for _, name := range []string{"PBS_ARRAY_INDEX", "PBS_ARRAYID"} {
			if i, ok := num(name); ok {
				s.Array = &Array{Index: i, Min: i, Max: i, Step: 1}
				break
			}
		}
		return s
	case str("LSB_JOBID") != "":
		s := Scheduler{Kind: SchedulerLSF, JobID: str("LSB_JOBID"), Scratch: str("TMPDIR")}
		// LSB_JOBINDEX is 0 outside a job array.
		if i, ok := num("LSB_JOBINDEX"); ok && i > 0 {
			a := Array{Index: i, Min: 1, Max: i, Step: 1}
			a.Max = numOr("LSB_JOBINDEX_END", a.Max)
			a.Step = numOr("LSB_JOBINDEX_STEP", a.Step)
			s.Array = &a
		}
		return s
	}
	return Scheduler{Kind: SchedulerNone}
}
