// Package usage holds what a run used while it ran, as a [Sampler]
// measures it: the peak memory of its process tree and the memory and
// utilisation of its GPUs. It is the vocabulary the runner (which reads no
// hardware) and the measuring side (package resources, which does) share;
// it imports only the standard library.
package usage

// Target is what a Sampler measures: the live process tree under Root
// (Root itself too, unless SkipRoot, set when Root is the runner's guard
// process rather than the run) and the GPUs named by UUID.
type Target struct {
	Root     int
	SkipRoot bool
	GPUs     []string
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

// GPU is the sampled use of one GPU during an attempt. Memory and
// utilisation are the device's, so when runs share a GPU they include the
// others'.
type GPU struct {
	UUID            string  `json:"uuid"`
	PeakMemoryBytes uint64  `json:"peak_memory_bytes"`
	MeanUtilization float64 `json:"mean_utilization_percent"` // 0 to 100
	Samples         int     `json:"samples"`
}

// Sampler measures running attempts. Sample starts measuring one and
// returns a function that stops and reports; the runner calls it once the
// attempt's process has exited, before it is reaped. Both may be called
// from many goroutines at once.
type Sampler interface {
	Sample(t Target) (stop func() Sampled)
}
