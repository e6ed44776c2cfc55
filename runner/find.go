package runner

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/nodepack/nodepack/resources/batch"
	"github.com/nodepack/nodepack/runner/ledger"
	"github.com/nodepack/nodepack/runner/run"
)

// ambiguousOutputError is FindOutput's error for a job that ran several
// sweeps (an array whose tasks each ran a sweep of their own, or several
// sweeps in one job): Dirs are their output directories.
type ambiguousOutputError struct {
	Job  string
	Dirs []string
}

func (e *ambiguousOutputError) Error() string {
	return fmt.Sprintf("job %s ran %d sweeps: %s", e.Job, len(e.Dirs), strings.Join(e.Dirs, ", "))
}

// FindOutput returns the output directory that arg names, as a person
// who knows a batch job's id names it. A directory that exists is itself.
// Otherwise arg may name a job: nodepack-JOBID (in any directory), or
// JOBID alone (in the current directory); the result is the one output
// directory beside it, named nodepack-*, whose ledgers record that job as
// the one that started them (its id, its array's id, or the label its
// default output directory carries: see batch.Label). defaultOutput names
// such a directory nodepack-JOBID-NAME-KEY, so a job's id alone finds it.
// A job that ran several sweeps is an error listing them.
// When nothing matches, FindOutput returns arg unchanged: reading it then
// says what is missing.
func FindOutput(arg string) (string, error) {
	if st, err := os.Stat(arg); err == nil && st.IsDir() || arg == "" {
		return arg, nil
	}
	parent, base := filepath.Split(arg)
	job, named := strings.CutPrefix(base, "nodepack-")
	if !named && parent != "" {
		return arg, nil // a path: only nodepack-JOBID names a job there
	}
	if job == "" {
		return arg, nil
	}
	entries, err := os.ReadDir(orDot(parent))
	if err != nil {
		return arg, nil
	}
	var found []string
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "nodepack-") {
			continue
		}
		dir := filepath.Join(parent, e.Name())
		if startedBy(dir, job) {
			found = append(found, dir)
		}
	}
	switch len(found) {
	case 0:
		return arg, nil
	case 1:
		return found[0], nil
	}
	slices.Sort(found)
	return "", &ambiguousOutputError{Job: job, Dirs: found}
}

// orDot is "." for the current directory's empty parent.
func orDot(dir string) string {
	if dir == "" {
		return "."
	}
	return dir
}

// startedBy reports whether the first header of a ledger in dir records
// the batch job named job.
func startedBy(dir, job string) bool {
	files, err := ledger.Files(dir)
	if err != nil {
		return false
	}
	for _, f := range files {
		h, err := ledger.FirstHeader(f)
		if err != nil {
			continue
		}
		var node struct {
			Scheduler batch.Job `json:"scheduler"`
		}
		if json.Unmarshal(h.Node, &node) != nil || !node.Scheduler.InJob() {
			continue
		}
		j := node.Scheduler
		split := h.Shard != nil && h.Shard.Count > 1
		if job == j.JobID || job == j.ArrayJobID && j.ArrayJobID != "" || job == batch.Label(j, split) {
			return true
		}
	}
	return false
}

// noLinks checks, before anything is read or written, that what nodepack
// writes in the output directory dir (its ledgers and their locks, runs/)
// is no symbolic link: nodepack never writes through a link it did not
// make. dir itself may be one (an -o the user chose).
func noLinks(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil // none yet, or unreadable: opening the ledger says so
	}
	for _, e := range entries {
		name := e.Name()
		if e.Type()&fs.ModeSymlink != 0 && (name == "runs" || strings.HasPrefix(name, "ledger")) {
			return fmt.Errorf("%s: %w", filepath.Join(dir, name), run.ErrLink)
		}
	}
	return nil
}

// missing reports whether nothing is at path.
func missing(path string) bool {
	_, err := os.Lstat(path)
	return errors.Is(err, fs.ErrNotExist)
}
