package schedule

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/nodepack/nodepack/pack"
)

// lowerBound is the least makespan any packing could reach: the longest
// run, or the GPU-time (and CPU-time) of all runs over what the node has.
func lowerBound(topo pack.Topology, runs []simRun) time.Duration {
	var gpuTime, cpuTime, longest float64
	for _, r := range runs {
		d := r.dur.Seconds()
		longest = max(longest, d)
		gpus := float64(r.req.GPUShare) / pack.GPUWhole
		if r.req.GPUs > 0 {
			gpus = float64(r.req.GPUs)
		}
		gpuTime += d * gpus
		cpuTime += d * float64(r.req.CPUs)
	}
	bound := max(longest, gpuTime/float64(len(topo.GPUs)), cpuTime/float64(len(topo.CPUs)))
	return time.Duration(bound * float64(time.Second))
}

// mixedSweep is a synthetic sweep as users run them, in shuffled order:
// a tenth of the runs train a big model on 2 GPUs for 20-40 minutes, three
// tenths take one GPU for 10-30, and the rest are small models on half or
// a quarter of a GPU for 5-20 minutes, each with CPUs in proportion.
// Durations are to the second: runs end one by one, as real ones do.
func mixedSweep(seed uint64, n int) []simRun {
	r := rand.New(rand.NewPCG(seed, 1))
	minutes := func(lo, hi int) time.Duration { return time.Duration(lo*60+r.IntN((hi-lo)*60+1)) * time.Second }
	runs := make([]simRun, n)
	for i := range runs {
		switch p := r.IntN(10); {
		case p < 1:
			runs[i] = simRun{req: pack.Request{GPUs: 2, CPUs: 16}, dur: minutes(20, 40)}
		case p < 4:
			runs[i] = simRun{req: pack.Request{GPUs: 1, CPUs: 8}, dur: minutes(10, 30)}
		case p < 6:
			runs[i] = simRun{req: pack.Request{GPUShare: 500, CPUs: 4}, dur: minutes(5, 20)}
		default:
			runs[i] = simRun{req: pack.Request{GPUShare: 250, CPUs: 2}, dur: minutes(5, 20)}
		}
	}
	return runs
}

// static is the same sweep on static slots sized for its largest run, as
// a launcher with one request for the whole sweep must run it.
func static(runs []simRun) []simRun {
	amount := func(r pack.Request) int { return r.GPUs*pack.GPUWhole + r.GPUShare }
	largest := pack.Request{}
	for _, r := range runs {
		if amount(r.req) > amount(largest) || amount(r.req) == amount(largest) && r.req.CPUs > largest.CPUs {
			largest = r.req
		}
	}
	out := make([]simRun, len(runs))
	for i, r := range runs {
		out[i] = simRun{req: largest, dur: r.dur}
	}
	return out
}

// fourGPUsSMT is the four-GPU server with SMT: 2 × 16 cores, 64 CPUs.
var fourGPUsSMT = func() pack.Topology {
	t := node(2, 32, 4, 40<<30, 256<<30)
	for i := range t.CPUs {
		t.CPUs[i].Core = t.CPUs[i].Core % 16 // CPU c and c+16 of a socket are siblings
	}
	return t
}()

// TestMixedSweepMakespan: through the real scheduler, in virtual time (the
// policy, not the machine, is measured), mixed sweeps on four GPUs finish
// within 1.05 times the lower bound with nodepack run's default backfill
// wait, and well ahead of static slots.
func TestMixedSweepMakespan(t *testing.T) {
	for seed := range uint64(5) {
		runs := mixedSweep(seed, 300)
		bound := lowerBound(fourGPUsSMT, runs)
		cfg := Config{Topology: fourGPUsSMT, Request: pack.Request{GPUs: 1, CPUs: 8}}
		packed := simulate(t, cfg, runs).makespan
		slots := simulate(t, cfg, static(runs)).makespan
		ratio := packed.Seconds() / bound.Seconds()
		t.Logf("seed %d: makespan %v, lower bound %v: %.3f×; static slots %v: %.2f×", seed, packed, bound, ratio, slots, slots.Seconds()/bound.Seconds())
		if ratio > 1.05 || slots < packed*3/2 {
			t.Errorf("seed %d: makespan %v is %.3f× the lower bound %v (want ≤ 1.05×); static slots %v", seed, packed, ratio, bound, slots)
		}
	}
}

// BenchmarkMixedSweepMakespan reports, for a 300-run mixed sweep on four
// GPUs in virtual time through the real scheduler, the makespan over the
// lower bound (makespan/bound), the same for static slots (static/bound),
// and how long the scheduling decisions take.
func BenchmarkMixedSweepMakespan(b *testing.B) {
	runs := mixedSweep(1, 300)
	bound := lowerBound(fourGPUsSMT, runs)
	cfg := Config{Topology: fourGPUsSMT, Request: pack.Request{GPUs: 1, CPUs: 8}}
	var packed, slots time.Duration
	for b.Loop() {
		packed = simulate(b, cfg, runs).makespan
	}
	slots = simulate(b, cfg, static(runs)).makespan
	b.ReportMetric(packed.Seconds()/bound.Seconds(), "makespan/bound")
	b.ReportMetric(slots.Seconds()/bound.Seconds(), "static/bound")
}
