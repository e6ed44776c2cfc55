package submit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// ErrNothingSubmitted marks Launch's errors from before the job was
// submitted: the scheduler did not answer, the script could not be
// written.
var ErrNothingSubmitted = errors.New("nothing was submitted")

// Launch submits job, whose script is script, as the next submission of
// its output directory: it asks the scheduler first (a client installed
// where no controller answers fails here, with nothing written), writes
// the script to jobs/submit-K.sh, submits it and records it in Records;
// runs is the sweep's runs and sweep its definition's key, for the record. A job submitted whose record
// could not be written returns its record and an error that says so.
func Launch(ctx context.Context, job Job, script string, runs int, sweep string) (Record, error) {
	if err := Ping(ctx, job.Scheduler); err != nil {
		return Record{}, fmt.Errorf("%s does not answer here: %w: %w", job.Scheduler.Name(), err, ErrNothingSubmitted)
	}
	recs, err := Read(job.Output)
	if err != nil {
		return Record{}, err
	}
	name := filepath.Join("jobs", fmt.Sprintf("submit-%d.sh", len(recs)+1))
	path := filepath.Join(job.Output, name)
	err = os.MkdirAll(filepath.Dir(path), 0o755)
	if err == nil {
		err = os.WriteFile(path, []byte(script), 0o755)
	}
	if err != nil {
		return Record{}, fmt.Errorf("%w: %w", err, ErrNothingSubmitted)
	}
	id, err := Submit(ctx, job.Scheduler, path)
	if err != nil {
		return Record{}, err
	}
	rec := Record{Time: time.Now().UTC(), JobID: id, Script: name, Runs: runs, Sweep: sweep, Job: job}
	if err := Append(job.Output, rec); err != nil {
		return rec, fmt.Errorf("job %s was submitted, but %w", id, err)
	}
	return rec, nil
}

// Wait waits until no task of dir's submissions is in the queue, asking
// the scheduler every interval, then returns dir's Status; it returns
// ctx's error when ctx ends first.
func Wait(ctx context.Context, dir string, interval time.Duration) (*Doc, error) {
	for {
		recs, err := Read(dir)
		if err != nil {
			return nil, err
		}
		// Whether a task is queued is the scheduler's to say: the
		// ledgers are read once, when none is.
		v := Look(ctx, recs, nil, nil)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if v.Error != "" {
			return nil, fmt.Errorf("asking %s: %s", v.Scheduler.Name(), v.Error)
		}
		if len(v.Active()) == 0 {
			return Status(ctx, dir)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(interval):
		}
	}
}

// NodeLocal says why the nodes of a cluster may not see dir (it is each
// node's own: /tmp, a tmpfs), or "".
func NodeLocal(dir string) string {
	for _, p := range []string{"/tmp", "/var/tmp", "/dev/shm", "/run"} {
		if dir == p || strings.HasPrefix(dir, p+"/") {
			return "it is under " + p + ", which is each node's own"
		}
	}
	if inMemory(dir) {
		return "it is on a tmpfs, which is each node's own"
	}
	return ""
}
