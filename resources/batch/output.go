package batch

import (
	"strconv"
	"strings"
)

// OutputDir is the default output directory of a sweep called name:
// nodepack-<name> outside a batch job, nodepack-<job id>-<name> inside one,
// which a requeued job (same id) finds again. The tasks of a Slurm array
// have job ids of their own, so a sweep split over an array (split) uses
// the array's id (SLURM_ARRAY_JOB_ID): all its tasks share the directory,
// each with its own ledger. An array that does not split the sweep runs
// the same runs in every task, so each task gets its own directory,
// <array id>_<task id> as Slurm's %A_%a names them.
func OutputDir(j Job, split bool, name string) string {
	if id := Label(j, split); id != "" {
		return "nodepack-" + id + "-" + name
	}
	return "nodepack-" + name
}

// Label is how OutputDir names job j in a directory name: its job id, the
// array's id for a sweep split over an array, <array id>_<task id> for an
// array task that runs a sweep of its own; "" outside a job. A user finds
// a job's sweep by it (see runner.FindOutput).
func Label(j Job, split bool) string {
	id := j.JobID
	if id == "" {
		return ""
	}
	switch {
	case j.Kind == Slurm && j.ArrayJobID != "" && j.Array != nil:
		id = j.ArrayJobID
		if !split {
			id += "_" + strconv.Itoa(j.Array.Index)
		}
	case j.Array != nil && !split && (j.Kind == SGE || j.Kind == LSF):
		// SGE's JOB_ID and LSF's LSB_JOBID are the array's; PBS's job id
		// already names the array element.
		id += "_" + strconv.Itoa(j.Array.Index)
	}
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, id)
}
