package pack

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// GPUWhole is one whole GPU in the thousandths Request.GPUShare counts in.
const GPUWhole = 1000

// Request is what one run needs. The zero Request is a CPU-only run with
// one CPU that it may share with other such runs.
type Request struct {
	// GPUs is the number of GPUs the run has to itself: whole GPUs, or
	// one MIG device. A MIG device is never combined with others, so a
	// request for more than one is served from whole GPUs only.
	GPUs int

	// GPUShare is the part of one GPU the run needs, in thousandths (250
	// is a quarter), when it does not have GPUs of its own: the run shares
	// the GPU with others as long as their shares add up to at most
	// GPUWhole. A run is never spread over two GPUs.
	GPUShare int

	// GPUMem is the GPU memory the run needs, in bytes. Without GPUs of
	// its own, the run shares a GPU with others as long as their GPUMem
	// add up to at most the GPU's memory less a headroom (see
	// GPUMemHeadroom); with GPUs of its own, each must have that much.
	GPUMem uint64

	// CPUs is the number of CPUs the run has to itself, whole cores first;
	// 0 gives it one CPU that it shares with other runs asking for 0, the
	// least loaded one near its GPU.
	CPUs int

	// Mem is the host memory the run needs, in bytes: runs start only
	// while their Mem add up to at most the topology's Memory.
	Mem uint64

	// AutoGPUMem asks for the GPU memory that runs like this one were
	// measured to use (gpu_mem=auto). The Allocator does not measure: the
	// caller turns it into GPUMem, or into a whole GPU's share for the
	// first run, which is measured.
	AutoGPUMem bool

	// AutoShare asks for the share of one GPU that runs like this one were
	// measured to do best at (gpus=auto, --runs-per-gpu auto): the caller
	// turns it into a GPUShare of 1/K, K from 1 up to AutoRunsPerGPU as
	// it measures the runs' progress. The Allocator does not measure.
	AutoShare bool
}

// AutoRunsPerGPU is the most runs that share one GPU under AutoShare; the
// CPUs of an AutoShare request follow the GPU share of that many.
const AutoRunsPerGPU = 8

// SharesGPU reports whether the run shares a GPU with others: it asks for
// a share or for GPU memory but for no GPU of its own.
func (r Request) SharesGPU() bool {
	return r.GPUs == 0 && (r.GPUShare > 0 || r.GPUMem > 0 || r.AutoGPUMem || r.AutoShare)
}

// Validate reports whether r makes sense on any node: no negative counts,
// a share of at most one GPU, and either GPUs of its own or a share of one.
func (r Request) Validate() error {
	switch {
	case r.GPUs < 0:
		return fmt.Errorf("gpus=%d: must not be negative", r.GPUs)
	case r.GPUShare < 0 || r.GPUShare > GPUWhole:
		return fmt.Errorf("a share of %d thousandths of a GPU: want 1 to %d", r.GPUShare, GPUWhole)
	case r.CPUs < 0:
		return fmt.Errorf("cpus=%d: must not be negative", r.CPUs)
	case r.GPUs > 0 && (r.GPUShare > 0 || r.AutoGPUMem):
		return fmt.Errorf("gpus=%d and a share of one GPU exclude each other", r.GPUs)
	case r.AutoGPUMem && r.GPUMem > 0:
		return errors.New("gpu_mem is either auto or a size")
	case r.AutoShare && (r.GPUs > 0 || r.GPUShare > 0):
		return errors.New("gpus is either auto or a number")
	}
	return nil
}

// UsesGPU reports whether the run gets a GPU at all.
func (r Request) UsesGPU() bool { return r.GPUs > 0 || r.SharesGPU() }

// String returns the request in the form ParseRequest reads:
// "gpus=2 cpus=16", "gpus=0.25 gpu_mem=12GiB cpus=4 mem=32GiB".
func (r Request) String() string {
	// Appended to one buffer: the ledger writes it for every start and end.
	b := make([]byte, 0, 48)
	switch {
	case r.AutoShare:
		b = append(b, "gpus=auto"...)
	case r.GPUs > 0:
		b = strconv.AppendInt(append(b, "gpus="...), int64(r.GPUs), 10)
	case r.GPUShare > 0:
		b = append(append(b, "gpus="...), formatShare(r.GPUShare)...)
	case r.GPUMem == 0 && !r.AutoGPUMem:
		b = append(b, "gpus=0"...)
	}
	sep := func() {
		if len(b) > 0 {
			b = append(b, ' ')
		}
	}
	switch {
	case r.AutoGPUMem:
		sep()
		b = append(b, "gpu_mem=auto"...)
	case r.GPUMem > 0:
		sep()
		b = append(append(b, "gpu_mem="...), FormatSize(r.GPUMem)...)
	}
	sep()
	b = strconv.AppendInt(append(b, "cpus="...), int64(r.CPUs), 10)
	if r.Mem > 0 {
		b = append(append(b, " mem="...), FormatSize(r.Mem)...)
	}
	return string(b)
}

// Class names the kind of placement the request gets, for people and
// tables: "2 GPUs", "1 GPU", "0.25 GPU", "12GiB of a GPU", "CPU only".
func (r Request) Class() string {
	switch {
	case r.GPUs > 1:
		return strconv.Itoa(r.GPUs) + " GPUs"
	case r.GPUs == 1:
		return "1 GPU"
	case r.AutoShare:
		return "measured share of a GPU"
	case r.GPUShare > 0 && r.GPUMem > 0:
		return formatShare(r.GPUShare) + " GPU, " + FormatSize(r.GPUMem)
	case r.GPUShare > 0:
		return formatShare(r.GPUShare) + " GPU"
	case r.GPUMem > 0:
		return FormatSize(r.GPUMem) + " of a GPU"
	case r.AutoGPUMem:
		return "measured memory of a GPU"
	}
	return "CPU only"
}

// formatShare writes thousandths of a GPU as a decimal: 250 is "0.25".
func formatShare(s int) string {
	return strconv.FormatFloat(float64(s)/GPUWhole, 'f', -1, 64)
}

// ParseRequest reads requests written as key=value words, separated by
// spaces or commas, over base: the keys it names replace base's, the rest
// stay; a key given twice is an error. Keys:
//
//   - gpus: a whole number of GPUs of the run's own (2), a share of one
//     GPU as a fraction (0.25 or 1/4), or auto: a share chosen by
//     measuring the runs' progress (AutoShare);
//   - gpu_mem: GPU memory, a size (12GiB, 512MiB, 16G; bytes without a
//     unit), or auto;
//   - cpus: CPUs of the run's own; 0 for one shared CPU;
//   - mem: host memory, a size.
//
// gpu_mem without gpus makes the run share a GPU by memory alone (base's
// GPUs or share are dropped; with gpus=N it asks for N GPUs of its own
// with that much memory each, with gpus=0.25 for a quarter of a GPU that
// has that much memory free); gpus=0 makes a
// CPU-only run, unless the same text gives gpu_mem. When
// the text sets gpus but not cpus, the CPUs follow the GPUs: base's CPUs
// per GPU times the new number (or share) of GPUs, at least 1, so that
// with 16 CPUs per GPU by default, gpus=2 gets 32 and gpus=0.25 gets 4.
// When it sets gpu_mem alone, the CPUs follow the memory: base's CPUs per
// GPU times the part of gpuMemory (the memory runs may share on one of
// the node's GPUs, [Topology.GPUMemory]; 0 when unknown, and then base's
// CPUs stay) that gpu_mem is, so that 10GiB of a GPU whose runs may share
// 76GiB gets 2 of its 16 CPUs; gpu_mem=auto gets a quarter of a GPU's
// CPUs until it is measured, as the runs of --gpu-mem-per-run auto do.
func ParseRequest(text string, base Request, gpuMemory uint64) (Request, error) {
	r := base
	gpusGiven, gpuMemGiven, cpusGiven := false, false, false
	words := strings.FieldsFunc(text, func(c rune) bool { return c == ' ' || c == '\t' || c == ',' })
	given := map[string]string{}
	for _, w := range words {
		k, v, ok := strings.Cut(w, "=")
		if !ok || v == "" {
			return base, fmt.Errorf("%q: want key=value (gpus, gpu_mem, cpus, mem)", w)
		}
		if first, twice := given[k]; twice {
			// Last-one-wins would hide a typo or a merge gone wrong.
			return base, fmt.Errorf("%s given twice (%s=%s, then %s): give it once", k, k, first, w)
		}
		given[k] = v
		switch k {
		case "gpus":
			if v == "auto" {
				r.GPUs, r.GPUShare, r.AutoShare, gpusGiven = 0, 0, true, true
				continue
			}
			gpus, share, err := parseGPUs(v)
			if err != nil {
				return base, fmt.Errorf("gpus=%s: %w", v, err)
			}
			r.GPUs, r.GPUShare, r.AutoShare, gpusGiven = gpus, share, false, true
		case "gpu_mem":
			if v == "auto" {
				r.GPUMem, r.AutoGPUMem, gpuMemGiven = 0, true, true
				continue
			}
			size, err := ParseSize(v)
			if err != nil {
				return base, fmt.Errorf("gpu_mem=%s: %w", v, err)
			}
			r.GPUMem, r.AutoGPUMem, gpuMemGiven = size, false, true
		case "cpus":
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return base, fmt.Errorf("cpus=%s: want a whole number, 0 for a shared CPU", v)
			}
			r.CPUs, cpusGiven = n, true
		case "mem":
			size, err := ParseSize(v)
			if err != nil {
				return base, fmt.Errorf("mem=%s: %w", v, err)
			}
			r.Mem = size
		default:
			return base, fmt.Errorf("unknown key %q: want gpus, gpu_mem, cpus or mem", k)
		}
	}
	switch {
	case gpuMemGiven && !gpusGiven:
		r.GPUs, r.GPUShare = 0, 0 // gpu_mem alone shares a GPU by memory
	case gpusGiven && r.GPUs > 0 && !gpuMemGiven:
		r.AutoGPUMem = false
	case gpusGiven && r.GPUs == 0 && r.GPUShare == 0 && !r.AutoShare && !gpuMemGiven:
		r.GPUMem, r.AutoGPUMem = 0, false
	}
	switch {
	case gpusGiven && !cpusGiven:
		r.CPUs = scaleCPUs(base, r)
	case gpuMemGiven && !cpusGiven:
		r.CPUs = memoryCPUs(base, r, gpuMemory)
	}
	if err := r.Validate(); err != nil {
		return base, err
	}
	return r, nil
}

// scaleCPUs gives r base's CPUs per GPU for its own amount of GPU.
func scaleCPUs(base, r Request) int {
	from, to := base.gpuAmount(), r.gpuAmount()
	if from == 0 || to == 0 || base.CPUs == 0 {
		return base.CPUs
	}
	return max(base.CPUs*to/from, 1)
}

// memoryCPUs gives r, which shares a GPU by memory alone, base's CPUs per
// GPU for the part of gpuMemory it asks for (a quarter of them for
// AutoGPUMem), at least 1; base's CPUs when either is unknown. A base that
// shares by memory itself scales by the two requests' memory.
func memoryCPUs(base, r Request, gpuMemory uint64) int {
	amount := base.gpuAmount()
	switch {
	case base.CPUs == 0:
		return 0
	case amount == 0 && base.GPUMem > 0 && r.GPUMem > 0:
		return clampCPUs(uint64(base.CPUs)*r.GPUMem/base.GPUMem, base.CPUs*max(int(gpuMemory/base.GPUMem), 1))
	case amount == 0:
		return base.CPUs
	}
	perGPU := base.CPUs * GPUWhole / amount
	switch {
	case r.AutoGPUMem:
		return max(perGPU/4, 1)
	case gpuMemory == 0:
		return base.CPUs
	}
	return clampCPUs(uint64(perGPU)*r.GPUMem/gpuMemory, perGPU)
}

// clampCPUs keeps n between 1 and most.
func clampCPUs(n uint64, most int) int {
	return int(max(min(n, uint64(most)), 1))
}

// gpuAmount is how much GPU the request asks for, in thousandths.
func (r Request) gpuAmount() int {
	switch {
	case r.GPUs > 0:
		return r.GPUs * GPUWhole
	case r.AutoShare:
		return GPUWhole / AutoRunsPerGPU
	}
	return r.GPUShare
}

// parseGPUs reads a GPU count or a share of one GPU.
func parseGPUs(v string) (gpus, share int, err error) {
	if n, err := strconv.Atoi(v); err == nil {
		if n < 0 {
			return 0, 0, errors.New("must not be negative")
		}
		return n, 0, nil
	}
	var f float64
	if num, den, ok := strings.Cut(v, "/"); ok {
		a, err1 := strconv.ParseFloat(num, 64)
		b, err2 := strconv.ParseFloat(den, 64)
		if err1 != nil || err2 != nil || b == 0 {
			return 0, 0, errors.New("want a number of GPUs or a fraction of one, such as 0.25 or 1/4")
		}
		f = a / b
	} else if f, err = strconv.ParseFloat(v, 64); err != nil {
		return 0, 0, errors.New("want a number of GPUs or a fraction of one, such as 0.25 or 1/4")
	}
	switch {
	case math.IsNaN(f) || f <= 0:
		return 0, 0, errors.New("want more than 0")
	case f > 1:
		return 0, 0, errors.New("a share is of one GPU: more than 1 must be a whole number of GPUs")
	case f == 1:
		return 1, 0, nil
	}
	// Thousandths, rounded down so that 1/3 three times fits one GPU; at
	// least one.
	return 0, max(int(f*GPUWhole+1e-9), 1), nil
}

// Size units, binary and decimal, as ParseSize reads them.
var sizeUnits = []struct {
	suffix string
	bytes  uint64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40},
	{"B", 1},
}

// ParseSize reads a size in bytes: a number with an optional unit, KiB,
// MiB, GiB, TiB (powers of 1024), KB, MB, GB, TB (powers of 1000), or K,
// M, G, T as Slurm writes them (powers of 1024). "12GiB", "1.5G", "512M".
func ParseSize(s string) (uint64, error) {
	t := strings.TrimSpace(s)
	mult := uint64(1)
	for _, u := range sizeUnits {
		if rest, ok := strings.CutSuffix(t, u.suffix); ok {
			t, mult = rest, u.bytes
			break
		}
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(t), 64)
	if err != nil || math.IsNaN(f) || f < 0 || f*float64(mult) >= math.MaxInt64 {
		return 0, fmt.Errorf("%q: want a size such as 12GiB, 512MiB or 16G", s)
	}
	return uint64(f * float64(mult)), nil
}

// FormatSize writes bytes with the largest binary unit that keeps it
// exact to a tenth, as ParseSize reads it: "12GiB", "1.5GiB", "300MiB".
func FormatSize(b uint64) string {
	for _, u := range []struct {
		suffix string
		bytes  uint64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if b >= u.bytes && (b*10)%u.bytes == 0 {
			return strconv.FormatFloat(float64(b)/float64(u.bytes), 'f', -1, 64) + u.suffix
		}
	}
	return strconv.FormatUint(b, 10)
}

// GPUMemHeadroom is the part of a GPU's memory that runs sharing it by
// GPUMem leave free: 5% of it, at least 256 MiB, for what their requests
// do not count (CUDA contexts, the allocator's own slack).
func GPUMemHeadroom(total uint64) uint64 { return max(total/20, 256<<20) }

// MoreGPUMemory is what a run that ran out of GPU memory on a GPU of
// gpuMemory bytes asks for next: half as much GPU memory again, or a GPU
// of its own once that would not fit beside the headroom (or when it
// shared a GPU without asking for memory). A run with GPUs of its own, or
// without a GPU, asks for the same again.
func MoreGPUMemory(r Request, gpuMemory uint64) Request {
	switch {
	case r.GPUs > 0, r.GPUShare == 0 && r.GPUMem == 0:
		return r
	case r.GPUMem > 0:
		grown := r.GPUMem + r.GPUMem/2
		if gpuMemory > 0 && grown <= gpuMemory-min(GPUMemHeadroom(gpuMemory), gpuMemory) {
			r.GPUMem = grown
			return r
		}
	}
	r.GPUs, r.GPUShare, r.GPUMem, r.AutoGPUMem = 1, 0, 0, false
	return r
}
