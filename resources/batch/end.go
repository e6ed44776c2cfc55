package batch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// command runs one of the batch system's commands, found in PATH, and
// returns its standard output; its standard error is in the error.
func command(name string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).Output()
	var exit *exec.ExitError
	if errors.As(err, &exit) && len(exit.Stderr) > 0 {
		err = fmt.Errorf("%s: %w: %s", name, err, strings.TrimSpace(string(exit.Stderr)))
	} else if err != nil {
		err = fmt.Errorf("%s: %w", name, err)
	}
	return out, err
}

// ErrNoLimit is wrapped by EndTime's error for a job that has no time
// limit: it has no end to stop before.
var ErrNoLimit = errors.New("the job has no time limit")

// EndTime returns when the job ends and where that came from: Slurm
// itself (squeue, then scontrol show job), which also sees a time limit
// moved by scontrol update after the job started, else the job's own
// variable (SLURM_JOB_END_TIME, set by Slurm 23.02 and later); for Grid
// Engine, the job's run-time limit (see sgeEnd).
func EndTime(j Job) (time.Time, string, error) {
	if j.Kind == SGE && j.JobID != "" {
		return sgeEnd(j)
	}
	if j.Kind != Slurm || j.JobID == "" {
		if !j.EndTime.IsZero() {
			return j.EndTime, "the job's environment", nil
		}
		return time.Time{}, "", errors.New("the job's end time is not known: nodepack reads it from Slurm (SLURM_JOB_END_TIME, squeue) and Grid Engine (qstat -j: h_rt)")
	}
	t, err := slurmEnd(j.JobID)
	switch {
	case err == nil:
		return t, "squeue", nil
	case !j.EndTime.IsZero():
		return j.EndTime, "SLURM_JOB_END_TIME", nil
	}
	return time.Time{}, "", fmt.Errorf("the job's end time is not known: no SLURM_JOB_END_TIME, and %w", err)
}

// slurmEnd asks Slurm when job id ends.
func slurmEnd(id string) (time.Time, error) {
	out, sqErr := command("squeue", "-h", "-j", id, "-o", "%e")
	if sqErr == nil {
		t, err := parseSlurmTime(strings.TrimSpace(string(out)))
		if err == nil {
			return t, nil
		}
		sqErr = err
	}
	out, err := command("scontrol", "show", "job", "-o", id)
	if err != nil {
		return time.Time{}, fmt.Errorf("%v; %w", sqErr, err)
	}
	for f := range strings.FieldsSeq(string(out)) {
		if v, ok := strings.CutPrefix(f, "EndTime="); ok {
			return parseSlurmTime(v)
		}
	}
	return time.Time{}, fmt.Errorf("scontrol show job %s: no EndTime", id)
}

// sgeEnd is when a Grid Engine job ends: its start plus its hard run-time
// limit (h_rt; else the soft one, s_rt, whose SIGUSR1 stops nodepack
// starting runs anyway), as qstat -j lists the job's resources. The start
// is when sge_execd wrote the job's config into its spool directory, a
// moment before the job's first instruction, so the end is never later
// than the real one. A limit of the queue rather than the job is not seen.
func sgeEnd(j Job) (time.Time, string, error) {
	if j.SpoolDir == "" {
		return time.Time{}, "", errors.New("the job's end time is not known: SGE_JOB_SPOOL_DIR is not set, so nodepack cannot tell when the job started")
	}
	st, err := os.Stat(filepath.Join(j.SpoolDir, "config"))
	if err != nil {
		return time.Time{}, "", fmt.Errorf("the job's end time is not known: its start: %w", err)
	}
	out, err := command("qstat", "-j", j.JobID)
	if err != nil {
		return time.Time{}, "", fmt.Errorf("the job's end time is not known: %w", err)
	}
	limits := map[string]time.Duration{}
	for line := range strings.Lines(string(out)) {
		v, ok := strings.CutPrefix(strings.TrimSpace(line), "hard resource_list:")
		if !ok {
			continue
		}
		for r := range strings.SplitSeq(strings.TrimSpace(v), ",") {
			name, value, _ := strings.Cut(r, "=")
			if name == "h_rt" || name == "s_rt" {
				d, err := parseSGETime(value)
				if err != nil {
					return time.Time{}, "", fmt.Errorf("the job's end time is not known: qstat -j %s: %s: %w", j.JobID, name, err)
				}
				limits[name] = d
			}
		}
	}
	for _, name := range []string{"h_rt", "s_rt"} {
		if d, ok := limits[name]; ok {
			return st.ModTime().Add(d), "qstat -j " + j.JobID + ": " + name, nil
		}
	}
	return time.Time{}, "", fmt.Errorf("the job's end time is not known: job %s: %w (-l h_rt=HH:MM:SS sets one)", j.JobID, ErrNoLimit)
}

// parseSGETime reads a Grid Engine time: seconds, or [[h:]m:]s.
func parseSGETime(v string) (time.Duration, error) {
	var d time.Duration
	parts := strings.Split(strings.TrimSpace(v), ":")
	if len(parts) > 3 {
		return 0, fmt.Errorf("time %q: want seconds or h:m:s", v)
	}
	for _, p := range parts {
		n, err := strconv.ParseUint(p, 10, 32)
		if err != nil {
			return 0, fmt.Errorf("time %q: want seconds or h:m:s", v)
		}
		d = d*60 + time.Duration(n)*time.Second
	}
	return d, nil
}

// parseSlurmTime reads a time as squeue and scontrol print it: local time,
// 2006-01-02T15:04:05; "N/A", "Unknown", "NONE" and "INFINITE" mean no
// limit (ErrNoLimit).
func parseSlurmTime(v string) (time.Time, error) {
	t, err := time.ParseInLocation("2006-01-02T15:04:05", v, time.Local)
	if err != nil {
		switch v {
		case "N/A", "Unknown", "NONE", "INFINITE", "UNLIMITED":
			return time.Time{}, fmt.Errorf("end time %q: %w", v, ErrNoLimit)
		}
		return time.Time{}, fmt.Errorf("end time %q: Slurm said something unexpected", v)
	}
	return t, nil
}

// followPoll bounds how often Follow asks Slurm: at most every
// followPoll[0], at least every followPoll[1].
var followPoll = [2]time.Duration{5 * time.Second, time.Minute}

// Follow asks Slurm for the job's end now and then, more often as the
// moment that matters (the end minus before) comes near, and calls moved
// with the new end when it changed since end (scontrol update TimeLimit);
// a zero end is one not known yet (no limit, or Slurm did not answer),
// asked for at the longest interval.
// It returns when done is closed; for a job that is not Slurm's it returns
// at once.
func Follow(j Job, end time.Time, before time.Duration, moved func(end time.Time), done <-chan struct{}) {
	if j.Kind != Slurm || j.JobID == "" {
		return
	}
	for {
		wait := followPoll[1]
		if !end.IsZero() {
			wait = min(max(time.Until(end.Add(-before))/4, followPoll[0]), followPoll[1])
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-done:
			t.Stop()
			return
		}
		now, err := slurmEnd(j.JobID)
		if err != nil || now.Equal(end) {
			continue
		}
		end = now
		moved(end)
	}
}
