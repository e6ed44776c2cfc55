package pack

import (
	"container/heap"
	"math/rand/v2"
	"testing"
	"time"
)

// simRun is a run of a simulated sweep: what it asks for and how long it
// runs.
type simRun struct {
	req Request
	dur time.Duration
}

// ending is a simulated run holding its Assignment until end.
type ending struct {
	end time.Time
	as  Assignment
}

type endings []ending

func (h endings) Len() int           { return len(h) }
func (h endings) Less(i, j int) bool { return h[i].end.Before(h[j].end) }
func (h endings) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *endings) Push(x any)        { *h = append(*h, x.(ending)) }
func (h *endings) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// simulate runs a sweep through a Queue on an Allocator of topo in virtual
// time, as the executor does (start what the queue lets through, wait for
// the next run to end, repeat), and returns its makespan.
func simulate(t testing.TB, topo Topology, runs []simRun, maxWait time.Duration) time.Duration {
	a := NewAllocator(topo)
	q := NewQueue[simRun](a, maxWait)
	for _, r := range runs {
		q.Push(r, r.req)
	}
	start := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)
	now := start
	var running endings
	for q.Len() > 0 || running.Len() > 0 {
		for q.Len() > 0 {
			r, as, err := q.Next(now)
			if err != nil {
				break
			}
			heap.Push(&running, ending{end: now.Add(r.dur), as: as})
		}
		if running.Len() == 0 {
			t.Fatalf("%d runs wait and none runs", q.Len())
		}
		now = running[0].end
		for running.Len() > 0 && !running[0].end.After(now) {
			a.Release(heap.Pop(&running).(ending).as)
		}
	}
	return now.Sub(start)
}

// lowerBound is the least makespan any packing could reach: the longest
// run, or the GPU-time (and CPU-time) of all runs over what the node has.
func lowerBound(topo Topology, runs []simRun) time.Duration {
	var gpuTime, cpuTime, longest float64
	for _, r := range runs {
		d := r.dur.Seconds()
		longest = max(longest, d)
		gpuTime += d * float64(r.req.gpuAmount()) / GPUWhole
		cpuTime += d * float64(max(r.req.CPUs, 0))
	}
	bound := max(longest, gpuTime/float64(len(topo.GPUs)), cpuTime/float64(len(topo.CPUs)))
	return time.Duration(bound * float64(time.Second))
}

// mixedSweep is a synthetic sweep as users run them, in shuffled order:
// a tenth of the runs train a big model on 2 GPUs for 20-40 minutes, three
// tenths take one GPU for 10-30, and the rest are small models on half or
// a quarter of a GPU for 5-20 minutes, each with CPUs in proportion.
func mixedSweep(seed uint64, n int) []simRun {
	r := rand.New(rand.NewPCG(seed, 1))
	// Durations to the second: runs end one by one, as real ones do, not
	// in batches at whole minutes.
	minutes := func(lo, hi int) time.Duration { return time.Duration(lo*60+r.IntN((hi-lo)*60+1)) * time.Second }
	runs := make([]simRun, n)
	for i := range runs {
		switch p := r.IntN(10); {
		case p < 1:
			runs[i] = simRun{Request{GPUs: 2, CPUs: 16}, minutes(20, 40)}
		case p < 4:
			runs[i] = simRun{Request{GPUs: 1, CPUs: 8}, minutes(10, 30)}
		case p < 6:
			runs[i] = simRun{Request{GPUShare: 500, CPUs: 4}, minutes(5, 20)}
		default:
			runs[i] = simRun{Request{GPUShare: 250, CPUs: 2}, minutes(5, 20)}
		}
	}
	return runs
}

// static is the same sweep on static slots sized for its largest run, as
// a launcher with one request for the whole sweep must run it.
func static(runs []simRun) []simRun {
	largest := Request{}
	for _, r := range runs {
		if r.req.gpuAmount() > largest.gpuAmount() || r.req.gpuAmount() == largest.gpuAmount() && r.req.CPUs > largest.CPUs {
			largest = r.req
		}
	}
	out := make([]simRun, len(runs))
	for i, r := range runs {
		out[i] = simRun{largest, r.dur}
	}
	return out
}

// TestMixedSweepMakespan: on the four-GPU fixture, mixed sweeps finish
// within 1.15 times the lower bound, in virtual time (the packing, not the
// machine, is measured), with a backfill wait of one minute (nodepack
// run's default), and well ahead of static slots.
func TestMixedSweepMakespan(t *testing.T) {
	for seed := range uint64(5) {
		runs := mixedSweep(seed, 300)
		bound := lowerBound(topoFourGPU, runs)
		packed := simulate(t, topoFourGPU, runs, time.Minute)
		slots := simulate(t, topoFourGPU, static(runs), time.Minute)
		ratio := packed.Seconds() / bound.Seconds()
		t.Logf("seed %d: makespan %v, lower bound %v: %.3f×; static slots %v: %.2f×", seed, packed, bound, ratio, slots, slots.Seconds()/bound.Seconds())
		if ratio > 1.15 || slots < packed*3/2 {
			t.Errorf("seed %d: makespan %v is %.3f× the lower bound %v (want ≤ 1.15×); static slots %v", seed, packed, ratio, bound, slots)
		}
	}
}

// BenchmarkMixedSweepMakespan reports, for a 300-run mixed sweep on four
// GPUs in virtual time, the makespan over the lower bound
// (makespan/bound), the same for static slots (static/bound), and how
// long the packing decisions take.
func BenchmarkMixedSweepMakespan(b *testing.B) {
	runs := mixedSweep(1, 300)
	bound := lowerBound(topoFourGPU, runs)
	var packed, slots time.Duration
	for b.Loop() {
		packed = simulate(b, topoFourGPU, runs, time.Minute)
	}
	slots = simulate(b, topoFourGPU, static(runs), time.Minute)
	b.ReportMetric(packed.Seconds()/bound.Seconds(), "makespan/bound")
	b.ReportMetric(slots.Seconds()/bound.Seconds(), "static/bound")
}
