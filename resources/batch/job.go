package batch

import (
	"strconv"
	"strings"
	"time"
)

// Scheduler kinds, as Job.Kind names them.
const (
	Slurm = "slurm"
	SGE   = "sge" // Sun/Univa/Son of Grid Engine
	PBS   = "pbs" // PBS Pro, OpenPBS and Torque
	LSF   = "lsf"
	None  = "none"
)

// Job is the batch system's view of the job this process runs in. The
// zero Job is no job at all (as Kind "none" is).
type Job struct {
	Kind  string `json:"kind"` // Slurm, SGE, PBS, LSF or None
	JobID string `json:"job_id,omitempty"`
	// ArrayJobID is the id of the whole array (Slurm's SLURM_ARRAY_JOB_ID),
	// where each task has a job id of its own; empty otherwise.
	ArrayJobID string    `json:"array_job_id,omitempty"`
	Array      *Array    `json:"array,omitempty"` // nil outside an array job
	Tasks      *Tasks    `json:"tasks,omitempty"` // nil outside a multi-task step
	EndTime    time.Time `json:"end_time,omitzero"`
	Scratch    string    `json:"scratch,omitempty"` // node-local scratch directory the scheduler provides
	// Slots is how many CPUs (slots) the batch system granted the job,
	// where it says so in a variable of its own and may not have bound
	// the job to them: Grid Engine's NSLOTS. Zero when it does not say.
	Slots int `json:"slots,omitempty"`
	// SpoolDir is Grid Engine's spool directory of this job on this host
	// (SGE_JOB_SPOOL_DIR), made as the job starts; empty elsewhere.
	SpoolDir string `json:"spool_dir,omitempty"`
}

// Array is this job's place in an array job, as the scheduler numbers it.
// Count is zero when the scheduler does not tell it (PBS, LSF).
type Array struct {
	Index int `json:"index"`
	Min   int `json:"min"`
	Max   int `json:"max"`
	Step  int `json:"step"`
	Count int `json:"count,omitempty"`
}

// Tasks is this process's place among the tasks of a job step (srun). The
// batch script itself is not a step's task, even with --ntasks.
type Tasks struct {
	Rank      int `json:"rank"`
	Count     int `json:"count"`
	LocalRank int `json:"local_rank"`
}

// InJob reports whether j is a batch job.
func (j Job) InJob() bool { return j.Kind != "" && j.Kind != None }

// Detect reads the batch system's variables through getenv (for example
// os.LookupEnv), trying Slurm, Grid Engine, PBS and LSF in turn. Values
// that do not parse are left out rather than guessed.
func Detect(getenv func(string) (string, bool)) Job {
	e := env(getenv)
	for _, detect := range []func(env) (Job, bool){slurmJob, sgeJob, pbsJob, lsfJob} {
		if j, ok := detect(e); ok {
			return j
		}
	}
	return Job{Kind: None}
}

// env reads variables, trimmed.
type env func(string) (string, bool)

func (e env) str(name string) string { v, _ := e(name); return strings.TrimSpace(v) }

func (e env) num(name string) (int, bool) {
	v, err := strconv.Atoi(e.str(name))
	return v, err == nil
}

func (e env) numOr(name string, def int) int {
	if v, ok := e.num(name); ok {
		return v
	}
	return def
}

func (e env) first(names ...string) string {
	for _, n := range names {
		if v := e.str(n); v != "" {
			return v
		}
	}
	return ""
}

func slurmJob(e env) (Job, bool) {
	if e.str("SLURM_JOB_ID") == "" && e.str("SLURM_JOBID") == "" && e.str("SLURM_ARRAY_TASK_ID") == "" {
		return Job{}, false
	}
	j := Job{Kind: Slurm, JobID: e.first("SLURM_JOB_ID", "SLURM_JOBID"), Scratch: e.first("SLURM_TMPDIR", "TMPDIR")}
	if i, ok := e.num("SLURM_ARRAY_TASK_ID"); ok {
		a := Array{Index: i, Min: i, Max: i, Step: e.numOr("SLURM_ARRAY_TASK_STEP", 1)}
		a.Count = e.numOr("SLURM_ARRAY_TASK_COUNT", 0)
		minimum, hasMin := e.num("SLURM_ARRAY_TASK_MIN")
		maximum, hasMax := e.num("SLURM_ARRAY_TASK_MAX")
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
		j.Array = &a
		j.ArrayJobID = e.str("SLURM_ARRAY_JOB_ID")
	}
	// The batch script has SLURM_PROCID=0 and, with --ntasks, SLURM_NTASKS
	// too, but it is not a step's task: only srun sets a regular step id
	// (the batch and extern steps have special ids from 0xfffffff0 up).
	step, inStep := e.num("SLURM_STEP_ID")
	if !inStep {
		step, inStep = e.num("SLURM_STEPID")
	}
	if rank, ok := e.num("SLURM_PROCID"); ok && inStep && step >= 0 && step < 0xfffffff0 {
		count, ok := e.num("SLURM_STEP_NUM_TASKS")
		if !ok {
			count, ok = e.num("SLURM_NTASKS")
		}
		if ok {
			j.Tasks = &Tasks{Rank: rank, Count: count, LocalRank: e.numOr("SLURM_LOCALID", 0)}
		}
	}
	if end, ok := e.num("SLURM_JOB_END_TIME"); ok && end > 0 {
		j.EndTime = time.Unix(int64(end), 0).UTC()
	}
	return j, true
}

func sgeJob(e env) (Job, bool) {
	if !(e.str("SGE_ROOT") != "" && e.str("JOB_ID") != "" || e.str("SGE_TASK_ID") != "") {
		return Job{}, false
	}
	j := Job{Kind: SGE, JobID: e.str("JOB_ID"), Scratch: e.first("TMPDIR", "TMP"), SpoolDir: e.str("SGE_JOB_SPOOL_DIR")}
	if n, ok := e.num("NSLOTS"); ok && n > 0 {
		j.Slots = n
	}
	// SGE_TASK_ID is "undefined" outside an array job.
	if i, ok := e.num("SGE_TASK_ID"); ok {
		a := Array{Index: i, Min: e.numOr("SGE_TASK_FIRST", i), Max: e.numOr("SGE_TASK_LAST", i), Step: e.numOr("SGE_TASK_STEPSIZE", 1)}
		if a.Step > 0 && a.Max >= a.Min {
			a.Count = (a.Max-a.Min)/a.Step + 1
		}
		j.Array = &a
	}
	return j, true
}

func pbsJob(e env) (Job, bool) {
	if e.str("PBS_JOBID") == "" {
		return Job{}, false
	}
	j := Job{Kind: PBS, JobID: e.str("PBS_JOBID"), Scratch: e.str("TMPDIR")}
	// PBS Pro and OpenPBS say PBS_ARRAY_INDEX, Torque PBS_ARRAYID; neither
	// tells the range, so Min/Max are this index only.
	for _, name := range []string{"PBS_ARRAY_INDEX", "PBS_ARRAYID"} {
		if i, ok := e.num(name); ok {
			j.Array = &Array{Index: i, Min: i, Max: i, Step: 1}
			break
		}
	}
	return j, true
}

func lsfJob(e env) (Job, bool) {
	if e.str("LSB_JOBID") == "" {
		return Job{}, false
	}
	j := Job{Kind: LSF, JobID: e.str("LSB_JOBID"), Scratch: e.str("TMPDIR")}
	// LSB_JOBINDEX is 0 outside a job array.
	if i, ok := e.num("LSB_JOBINDEX"); ok && i > 0 {
		j.Array = &Array{Index: i, Min: 1, Max: e.numOr("LSB_JOBINDEX_END", i), Step: e.numOr("LSB_JOBINDEX_STEP", 1)}
	}
	return j, true
}
