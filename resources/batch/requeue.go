package batch

import "fmt"

// sgeRequeueExit is the exit status that makes Grid Engine reschedule a
// job (with -r y or not): the documented "rerun" convention of sge_execd.
const sgeRequeueExit = 99

// CanRequeue reports whether nodepack can have the batch system run j
// again: Slurm and Grid Engine jobs.
func CanRequeue(j Job) bool { return j.Kind == Slurm || j.Kind == SGE }

// Requeue asks the batch system to run job j again, so that it resumes
// where this one stopped. A Slurm job is requeued now (scontrol requeue:
// the same job id goes back in the queue, and finds its output directory
// again); a Grid Engine job is rescheduled when its script exits
// SGERequeueExit, which exit then says (0 otherwise). The batch script
// exec's nodepack, so nodepack is the one to ask.
func Requeue(j Job) (exit int, err error) {
	switch j.Kind {
	case Slurm:
		if _, err := command("scontrol", "requeue", j.JobID); err != nil {
			return 0, fmt.Errorf("requeue job %s: %w", j.JobID, err)
		}
		return 0, nil
	case SGE:
		return sgeRequeueExit, nil
	}
	return 0, fmt.Errorf("requeue: nodepack can requeue Slurm and Grid Engine jobs, not %s", Describe(j))
}

// Describe names the kind of job, for messages: "slurm jobs", or "a run
// outside a batch job".
func Describe(j Job) string {
	if !j.InJob() {
		return "a run outside a batch job"
	}
	return j.Kind + " jobs"
}
