// Package usage holds what a run used while it ran, as a [Sampler]
// measures it: the peak memory of its process tree and the memory and
// utilisation of its GPUs, and when its GPU memory has settled. It is the
// vocabulary the runner (which reads no hardware) and the measuring side
// (package resources, which does) share; it imports only the standard
// library.
package usage

import (
	"bytes"
	"strconv"
	"time"
)

// Target is what a Sampler measures: the live process tree under Root
// (Root itself too, unless SkipRoot, set when Root is a launcher whose own
// memory is not the run's) and the GPUs named by UUID.
type Target struct {
	Root     int
	SkipRoot bool
	GPUs     []string

	// Settle, if not nil, asks the Sampler to watch the tree's own memory
	// on its GPUs until it settles, and say so.
	Settle *Settle

	// Limit, if not nil, asks the Sampler to check the tree's resident
	// memory against a limit, and say when it is over.
	Limit *Limit

	// GPULimit, if not nil, does the same for the tree's own memory on its
	// GPUs (what the GPU reports of its processes), with that memory as
	// Exceeded's argument. A Sampler that cannot read it never calls it.
	GPULimit *Limit
}

// Limit asks a Sampler to sample a run's process tree every Interval and
// to call Exceeded once, from its own goroutine, with the tree's resident
// memory the first time it is above Bytes. A runner uses it to hold a run
// to the memory it asked for where no cgroup can. If the run ends first,
// Exceeded is not called.
type Limit struct {
	Bytes    uint64
	Interval time.Duration
	Exceeded func(rss uint64)
}

// Settle asks a Sampler to sample a run's own GPU memory every Interval
// until it has settled, by the rule of a [Settler] with Samples, and then
// to call Done once with the peak it saw, from its own goroutine. If the
// run ends first, Done is not called.
//
// A runner uses it as a readiness gate: the next run joins a GPU that
// runs share by memory only once the runs already there have allocated
// what they use, so that a burst of starts cannot oversubscribe it.
//
// Where the Sampler cannot see the run's own GPU memory (no GPU library, a
// GPU the library does not know, a driver that does not say what each
// process uses, processes it cannot tell apart from another PID
// namespace's), it calls Blind instead, once, with why: no reading will
// come, and a gate that waited for one would hold the GPU until its
// timeout.
type Settle struct {
	Interval time.Duration
	Samples  int
	Done     func(peak uint64)
	Blind    func(why string)
}

// Sampled is what a Sampler saw of one attempt. The zero Sampled is no
// samples at all.
type Sampled struct {
	Samples int
	// TreeRSSPeak is the largest sum of resident set sizes over the
	// process tree at one sample, in bytes.
	TreeRSSPeak uint64
	GPUs        []GPU
}

// GPU is the sampled use of one GPU during an attempt. PeakMemoryBytes
// and MeanUtilization are the device's, so when runs share a GPU they
// include the others'; ProcessPeakMemoryBytes is the run's own: the
// largest sum, at one sample, of the memory its processes used on the GPU.
// EnergyJoules is the run's share of the GPU's energy while it ran: the
// GPU's energy counter's advance between samples, split evenly among the
// runs on the GPU then (0 where the GPU has no counter).
type GPU struct {
	UUID                   string  `json:"uuid"`
	PeakMemoryBytes        uint64  `json:"peak_memory_bytes"`
	ProcessPeakMemoryBytes uint64  `json:"process_peak_memory_bytes,omitempty"`
	MeanUtilization        float64 `json:"mean_utilization_percent"` // 0 to 100
	Samples                int     `json:"samples"`
	EnergyJoules           float64 `json:"energy_j,omitempty"`
}

// Sampler measures running attempts. Sample starts measuring one and
// returns a function that stops and reports; the runner calls it once the
// attempt's process has exited, before it is reaped. Both may be called
// from many goroutines at once.
type Sampler interface {
	Sample(t Target) (stop func() Sampled)
}

// Settler decides when a run's memory has settled from successive samples
// of it: once it has used some, and then has not grown by more than 1%
// over Samples samples in a row. Memory that is still zero never settles,
// since the run may not have allocated yet. The zero Settler settles at
// the first sample with memory in use.
type Settler struct {
	Samples int

	last, peak uint64
	still      int // samples in a row without growth
}

// Add takes the next sample and reports whether the memory has settled.
func (s *Settler) Add(bytes uint64) bool {
	s.peak = max(s.peak, bytes)
	switch {
	case bytes == 0:
		s.still, s.last = 0, 0
	case s.last > 0 && bytes <= s.last+s.last/100:
		s.still++
	default:
		s.still, s.last = 0, bytes
	}
	return bytes > 0 && s.still >= s.Samples
}

// Peak returns the largest sample so far.
func (s *Settler) Peak() uint64 { return s.peak }

// GPUFault is a GPU's own report that it failed: an Xid error that is not
// an application's fault, or a double-bit ECC error. A runner takes such a
// GPU out of use for the rest of its sweep.
type GPUFault struct {
	UUID   string    // the GPU (a physical GPU's; its MIG devices share it)
	Reason string    // "Xid 79", "double-bit ECC error"
	Time   time.Time // when it was reported
}

// ParseOOMKill reads the kernel's count of OOM kills in a memory cgroup:
// the "oom_kill N" line of cgroup v2's memory.events or cgroup v1's
// memory.oom_control. ok is false when there is no such line.
func ParseOOMKill(b []byte) (n uint64, ok bool) {
	for line := range bytes.Lines(b) {
		if v, found := bytes.CutPrefix(line, []byte("oom_kill ")); found {
			n, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}
