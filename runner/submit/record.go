package submit

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/nodepack/nodepack/runner/untrusted"
)

// RecordFormat names the format of a submission record.
const RecordFormat = "nodepack.submission/v1"

// Records is the file in a sweep's output directory that lists its
// submissions, one JSON object per line, oldest first.
const Records = "submissions.jsonl"

// Record is one submission of a sweep: which job the scheduler gave it and
// what that job runs.
type Record struct {
	Format string    `json:"format"`
	Time   time.Time `json:"time"`
	JobID  string    `json:"job_id"`
	Script string    `json:"script"`          // the job script, relative to the output directory
	Runs   int       `json:"runs"`            // the sweep's runs when it was submitted
	Sweep  string    `json:"sweep,omitempty"` // the key of the sweep's definition (a pool's submissions)
	Job    Job       `json:"job"`
}

// Append adds r to dir's records, in one write, synced.
func Append(dir string, r Record) error {
	r.Format = RecordFormat
	line, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("record submission: %w", err)
	}
	path := filepath.Join(dir, Records)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("record submission: %w", err)
	}
	if _, err = f.Write(append(line, '\n')); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("record submission: %w", err)
	}
	return nil
}

// Read returns dir's submissions, oldest first: none when it has no
// records; an error naming the file and line for one it cannot read.
func Read(dir string) ([]Record, error) {
	path := filepath.Join(dir, Records)
	f, err := untrusted.Open(dir, Records) // a run may have replaced it: no link followed, no blocking open
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var recs []Record
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for no := 1; sc.Scan(); no++ {
		var r Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, no, err)
		}
		if r.Format != RecordFormat || r.JobID == "" {
			return nil, fmt.Errorf("%s:%d: not a %s record", path, no, RecordFormat)
		}
		switch r.Job.Scheduler {
		case Slurm, SGE, PBS:
		default:
			return nil, fmt.Errorf("%s:%d: scheduler %q: want slurm, sge or pbs", path, no, r.Job.Scheduler)
		}
		if err := r.Job.checkShards(); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, no, err)
		}
		recs = append(recs, r)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return recs, nil
}
