package schedule

import (
	"math"
	"time"

	"github.com/nodepack/nodepack/pack"
)

// FirstRead is when the metrics of a run under a pruning policy are first
// read: its pace from then on times the reads to its rungs (NextRead).
const FirstRead = 100 * time.Millisecond

// Pace is how a run goes, as the reads of its metrics saw it: the read
// at which its furthest step last moved (At; Step -Inf before any), and
// how long one of its steps took, measured between the two last reads
// that saw it move (PerStep; 0 until then).
type Pace struct {
	At      time.Time
	Step    float64
	PerStep time.Duration
}

// Saw is the pace after a read at now whose furthest step was step.
func (p Pace) Saw(now time.Time, step float64) Pace {
	if math.IsInf(step, -1) || step <= p.Step {
		return p
	}
	if !math.IsInf(p.Step, -1) && now.After(p.At) {
		p.PerStep = time.Duration(float64(now.Sub(p.At)) / (step - p.Step))
	}
	p.At, p.Step = now, step
	return p
}

// NextRead is how long after the read at now the metrics of run id are
// read next: just after it reaches its next rung at its measured step
// time (an eighth of a step after; a quarter of a step when it is due
// already, so that a stop lands within one of its steps), at least least
// and at most interval (also once it is past its last rung). While its
// step time is not known the reads come twice as far apart each time,
// from FirstRead up to interval, and from FirstRead again when its first
// step is seen: early is that doubling's last wait (FirstRead at the
// first read), and nextEarly its next.
func (p *Pruner) NextRead(id string, pace Pace, now time.Time, early, least, interval time.Duration) (wait, nextEarly time.Duration) {
	next, ok := p.NextRung(id)
	if !ok {
		return interval, early
	}
	if pace.PerStep <= 0 {
		if pace.At.Equal(now) && !math.IsInf(pace.Step, -1) {
			return max(FirstRead, least), FirstRead // its first step: its pace, soon
		}
		early = min(2*early, interval)
		return early, early
	}
	due := pace.At.Add(time.Duration(float64(pace.PerStep) * max(next-pace.Step, 0))).Add(pace.PerStep / 8)
	wait = max(due.Sub(now), pace.PerStep/4)
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
