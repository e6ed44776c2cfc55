package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/nodepack/nodepack/resources"
	"github.com/nodepack/nodepack/runner"
)

// batchCommand runs one of the batch system's commands (squeue, scontrol)
// and returns its standard output; a variable so tests can stand in for
// the batch system.
var batchCommand = func(name string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).Output()
	var exit *exec.ExitError
	if errors.As(err, &exit) && len(exit.Stderr) > 0 {
		err = fmt.Errorf("%w: %s", err, strings.TrimSpace(string(exit.Stderr)))
	}
	return out, err
}

// jobEnd returns when the batch job ends and where that came from: Slurm's
// SLURM_JOB_END_TIME (set by Slurm 23.02 and later), else Slurm itself
// (squeue, then scontrol show job), which also sees a time limit moved by
// scontrol update after the job started.
func jobEnd(s resources.Scheduler) (time.Time, string, error) {
	if s.Kind != resources.SchedulerSlurm || s.JobID == "" {
		if !s.EndTime.IsZero() {
			return s.EndTime, "the job's end time", nil
		}
		return time.Time{}, "", errors.New("the job's end time is not known: nodepack reads it from Slurm (SLURM_JOB_END_TIME, squeue)")
	}
	if t, err := slurmEnd(s.JobID); err == nil {
		return t, "squeue", nil
	} else if !s.EndTime.IsZero() {
		return s.EndTime, "SLURM_JOB_END_TIME", nil
	} else {
		return time.Time{}, "", fmt.Errorf("the job's end time is not known: no SLURM_JOB_END_TIME, and %w", err)
	}
}

// slurmEnd asks Slurm when job id ends.
func slurmEnd(id string) (time.Time, error) {
	out, err := batchCommand("squeue", "-h", "-j", id, "-o", "%e")
	if err == nil {
		if t, perr := parseSlurmTime(strings.TrimSpace(string(out))); perr == nil {
			return t, nil
		} else {
			err = perr
		}
	}
	sqErr := err
	out, err = batchCommand("scontrol", "show", "job", "-o", id)
	if err != nil {
		return time.Time{}, fmt.Errorf("squeue: %v; scontrol show job: %w", sqErr, err)
	}
	for f := range strings.FieldsSeq(string(out)) {
		if v, ok := strings.CutPrefix(f, "EndTime="); ok {
			return parseSlurmTime(v)
		}
	}
	return time.Time{}, fmt.Errorf("scontrol show job %s: no EndTime", id)
}

// parseSlurmTime reads a time as squeue and scontrol print it: local time,
// 2006-01-02T15:04:05; "N/A", "Unknown" and "NONE" mean no limit.
func parseSlurmTime(v string) (time.Time, error) {
	t, err := time.ParseInLocation("2006-01-02T15:04:05", v, time.Local)
	if err != nil {
		return time.Time{}, fmt.Errorf("end time %q: the job has no time limit, or Slurm said something unexpected", v)
	}
	return t, nil
}

// terminateMargin is how long before the job's end, beyond --grace, the
// runs still running get SIGTERM under --stop-before: time to write the
// ledger's last records and exit before Slurm's own SIGTERM.
const terminateMargin = 5 * time.Second

// deadlines turns --stop-before into the runner's drain and terminate
// times for a job that ends at end: no new runs from stopBefore before the
// end, and SIGTERM to the running ones grace plus a margin before it
// (never before the drain).
func deadlines(end time.Time, stopBefore, grace time.Duration) (drainAt, terminateAt time.Time) {
	if grace <= 0 {
		grace = runner.DefaultGrace
	}
	drainAt = end.Add(-stopBefore)
	terminateAt = end.Add(-grace - terminateMargin)
	if terminateAt.Before(drainAt) {
		terminateAt = drainAt
	}
	return drainAt, terminateAt
}

// jobEndPoll bounds how often followJobEnd asks Slurm: at least every
// jobEndPoll[1], at most every jobEndPoll[0].
var jobEndPoll = [2]time.Duration{5 * time.Second, time.Minute}

// followJobEnd asks Slurm for the job's end now and then (more often as
// the drain comes near) and, when it moved, moves the sweep's deadlines
// with set and says so with note. It returns when done is closed.
func followJobEnd(s resources.Scheduler, end time.Time, stopBefore, grace time.Duration,
	set func(drainAt, terminateAt time.Time), note func(string), done <-chan struct{}) {
	if s.Kind != resources.SchedulerSlurm || s.JobID == "" {
		return
	}
	for {
		drainAt, _ := deadlines(end, stopBefore, grace)
		wait := min(max(time.Until(drainAt)/4, jobEndPoll[0]), jobEndPoll[1])
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-done:
			t.Stop()
			return
		}
		moved, err := slurmEnd(s.JobID)
		if err != nil || moved.Equal(end) {
			continue
		}
		end = moved
		set(deadlines(end, stopBefore, grace))
		note(fmt.Sprintf("the job's end moved to %s: runs start until %s", end.Format(time.DateTime),
			end.Add(-stopBefore).Format(time.DateTime)))
	}
}
