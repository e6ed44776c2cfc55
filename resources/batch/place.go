package batch

import (
	"fmt"
	"strings"
)

// Place is this task's part of a sweep split over the tasks of an array
// job and of a multi-task step: part Index of Count. The zero Place, like
// any Count ≤ 1, is the whole sweep.
type Place struct {
	Index int
	Count int
	From  string // what told it ("SLURM_ARRAY_TASK_ID=1 of 0-3"); empty when the sweep is not split
}

// Place maps the job's array index and task rank to its part of a sweep of
// total runs. Array tasks are numbered 0 … N-1 in array order whatever the
// array's first index and step (--array=1-9:2 gives parts 0 … 4), and the
// tasks of a multi-task step (srun -n K) split each array task's part
// further, as clusterduck does: part = array position × K + rank, of N × K.
// Slurm and Grid Engine tell the array's size; for PBS and LSF it is the
// number of parts of runsPerShard runs (--runs-per-shard), which needs
// total. Outside an array job and a multi-task step it is part 0 of 1.
func (j Job) Place(total, runsPerShard int) (Place, error) {
	p := Place{Index: 0, Count: 1}
	var parts []string
	if a := j.Array; a != nil {
		pos, count, desc, err := arrayPosition(j.Kind, *a, total, runsPerShard)
		if err != nil {
			return Place{}, err
		}
		p = Place{Index: pos, Count: count}
		parts = append(parts, desc)
	}
	if t := j.Tasks; t != nil && t.Count > 1 {
		if t.Rank < 0 || t.Rank >= t.Count {
			return Place{}, fmt.Errorf("SLURM_PROCID=%d is not below the step's %d tasks", t.Rank, t.Count)
		}
		p = Place{Index: p.Index*t.Count + t.Rank, Count: p.Count * t.Count}
		parts = append(parts, fmt.Sprintf("SLURM_PROCID=%d of %d tasks", t.Rank, t.Count))
	}
	p.From = strings.Join(parts, " and ")
	return p, nil
}

// Splits reports whether Place splits a sweep (before the sweep's size is
// known): the job is an array task or a task of a multi-task step.
func (j Job) Splits() bool { return j.Array != nil || j.Tasks != nil && j.Tasks.Count > 1 }

// arrayIndexVar names the variable that holds the array index.
var arrayIndexVar = map[string]string{
	Slurm: "SLURM_ARRAY_TASK_ID",
	SGE:   "SGE_TASK_ID",
	PBS:   "PBS_ARRAY_INDEX",
	LSF:   "LSB_JOBINDEX",
}

// arrayFirstIndex is where arrays start when the scheduler does not say:
// PBS arrays as SubmitLine prints them (qsub -J 0-K), LSF's from 1.
var arrayFirstIndex = map[string]int{PBS: 0, LSF: 1}

// arrayPosition returns the array task's position 0 … count-1, the
// array's task count and what told them.
func arrayPosition(kind string, a Array, total, runsPerShard int) (pos, count int, desc string, err error) {
	v := arrayIndexVar[kind]
	if a.Step <= 0 {
		return 0, 0, "", fmt.Errorf("%s=%d: array step %d is not positive", v, a.Index, a.Step)
	}
	if a.Count > 0 {
		if n := (a.Max-a.Min)/a.Step + 1; a.Max < a.Min || n != a.Count {
			return 0, 0, "", fmt.Errorf("%s=%d: the array %d-%d:%d has %d tasks, not the %d the scheduler counts (a list such as 1,5,7 has no order to shard by): give the shard as I/N",
				v, a.Index, a.Min, a.Max, a.Step, max(n, 0), a.Count)
		}
		if a.Index < a.Min || a.Index > a.Max || (a.Index-a.Min)%a.Step != 0 {
			return 0, 0, "", fmt.Errorf("%s=%d is not in the array %d-%d:%d", v, a.Index, a.Min, a.Max, a.Step)
		}
		return (a.Index - a.Min) / a.Step, a.Count, fmt.Sprintf("%s=%d of %d-%d", v, a.Index, a.Min, a.Max), nil
	}
	if runsPerShard <= 0 {
		return 0, 0, "", fmt.Errorf("%s=%d: the scheduler does not tell the array's size: give the runs per shard (and submit the array a plan of them prints) or the shard as I/N", v, a.Index)
	}
	if total < 0 {
		return 0, 0, "", fmt.Errorf("%s=%d: runs per shard need a source whose size is known: give the shard as I/N", v, a.Index)
	}
	first, ok := arrayFirstIndex[kind]
	if !ok {
		first = a.Min
	}
	count = max((total+runsPerShard-1)/runsPerShard, 1)
	pos = (a.Index - first) / a.Step
	if a.Index < first || (a.Index-first)%a.Step != 0 || pos >= count {
		return 0, 0, "", fmt.Errorf("%s=%d is not one of the %d array tasks for %d runs at %d per shard (%s)", v, a.Index, count, total, runsPerShard, SubmitLine(count))
	}
	return pos, count, fmt.Sprintf("%s=%d of %d tasks (%d runs per shard)", v, a.Index, count, runsPerShard), nil
}

// SubmitLine says how to submit an array of n tasks to each scheduler.
func SubmitLine(n int) string {
	return fmt.Sprintf("sbatch --array=0-%d, qsub -t 1-%d (Grid Engine), qsub -J 0-%d (PBS), bsub -J 'name[1-%d]' (LSF)", n-1, n, n-1, n)
}
