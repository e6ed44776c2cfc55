package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/nodepack/nodepack/resources"
)

// sgeRequeueExit is the exit status that makes Grid Engine reschedule a
// job (with -r y or not): the documented "rerun" convention of sge_execd.
const sgeRequeueExit = 99

func canRequeue(s resources.Scheduler) bool {
	return s.Kind == resources.SchedulerSlurm || s.Kind == resources.SchedulerSGE
}

func describeKind(s resources.Scheduler) string {
	if s.Kind == resources.SchedulerNone {
		return "a run outside a batch job"
	}
	return s.Kind + " jobs"
}

// requeueJob asks the batch system to run this job again after nodepack
// stopped with runs left, and returns the exit status nodepack should end
// with. The batch script exec's nodepack, so nodepack is the one to ask:
// Slurm's scontrol requeue puts the same job id back in the queue (it
// finds its output directory and ledger there); Grid Engine reschedules a
// job whose script exits 99. If Slurm refuses, code is kept and the reason
// printed, so the stop is still visible as an interruption.
func requeueJob(s resources.Scheduler, stderr io.Writer, code int) int {
	switch s.Kind {
	case resources.SchedulerSlurm:
		out, err := batchCommand("scontrol", "requeue", s.JobID)
		if err != nil {
			fmt.Fprintf(stderr, "nodepack: scontrol requeue %s failed: %v %s\n", s.JobID, err, strings.TrimSpace(string(out)))
			return code
		}
		fmt.Fprintf(stderr, "nodepack: requeued job %s: it resumes where this one stopped\n", s.JobID)
		return code
	case resources.SchedulerSGE:
		fmt.Fprintf(stderr, "nodepack: exiting %d so that Grid Engine reschedules job %s\n", sgeRequeueExit, s.JobID)
		return sgeRequeueExit
	}
	return code
}
