package schedule

import (
	"math"
	"time"

	"github.com/nodepack/nodepack/pack"
)

// FirstRead is when the metrics of a run under a pruning policy are first
// read: its pace from then on times the reads to its rungs (NextRead).
const FirstRead = 100 * time.Millisecond

// Pace is a run's furthest step when its metrics were read; Step is -Inf
// while it has reported none.
type Pace struct {
	At   time.Time
	Step float64
}

// NextRead is how long after the read now the metrics of run id are read
// next: when the run reaches its next rung at the pace it went from the
// read before (was) to now, at least least and at most interval (also
// once it is past its last rung). While its pace is not known (no step
// yet, or none since the read before) the reads come twice as far apart
// each time, from FirstRead up to interval: early is that doubling's last
// wait (FirstRead at the first read), and nextEarly its next.
func (p *Pruner) NextRead(id string, was, now Pace, early, least, interval time.Duration) (wait, nextEarly time.Duration) {
	next, ok := p.NextRung(id)
	if !ok {
		return interval, early
	}
	dt, ds := now.At.Sub(was.At), now.Step-was.Step
	if dt <= 0 || ds <= 0 || math.IsInf(now.Step, 0) || math.IsInf(was.Step, 0) {
		early = min(2*early, interval)
		return early, early
	}
	wait = time.Duration(float64(dt) * max(next-now.Step, 0) / ds)
	return min(max(wait, least), interval), early
}

// CheckpointFirst reports whether a stop asks the run for a checkpoint
// before SIGTERM: the caller has a signal to ask with, the stop is no kill
// (which is at once), and the run keeps checkpoints (keeps, asked only
// then: it reported one, said it keeps them, or its checkpoint folder
// changed).
func CheckpointFirst(signal, kill bool, keeps func() bool) bool {
	return signal && !kill && keeps()
}

// GPUMemLimit is the GPU memory a run placed at as may use before it is
// stopped, or 0 for none: a run that shares its GPU by gpu_mem may use
// what it asked for and the GPU's headroom (pack.GPUMemHeadroom), which
// the requests of the runs beside it leave free; past that it would take
// theirs. A run with its GPUs to itself, or sharing by fraction, has no
// neighbour's memory to take, or none promised.
func GPUMemLimit(as pack.Assignment) uint64 {
	if !as.SharedGPUs || as.Request.GPUMem == 0 || len(as.GPUs) != 1 {
		return 0
	}
	return as.Request.GPUMem + pack.GPUMemHeadroom(as.GPUs[0].MemoryBytes)
}
