package schedule

import (
	"container/heap"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/nodepack/nodepack/pack"
)

// TestClaimSize: the share of the runs left shrinks with them, never
// below what fills a task's free lanes (nor above what is left), never
// above maxClaim.
func TestClaimSize(t *testing.T) {
	for _, tc := range []struct {
		left, tasks, slots, want int
	}{
		{1000, 16, 8, 32},       // 1000 / 32
		{100, 16, 8, 8},         // 4, but a claim fills the free lanes
		{100, 16, 1, 4},         // one lane free: the share
		{20, 16, 1, 1},          // the tail: one run for the one free lane
		{5, 16, 8, 5},           // no more than is left
		{0, 16, 8, 0},           // nothing left
		{1_000_000, 4, 64, 256}, // at most maxClaim
		{1_000_000, 1, 8, 32},   // the first task to start: four runs a lane, not half the sweep
		{10, 0, 0, 4},           // no task counted: one; no lane counted: one, four runs for it
	} {
		lanes := max(tc.slots, 1)
		if tc.left == 1_000_000 && tc.tasks == 4 {
			lanes = 64
		}
		if got := ClaimSize(tc.left, tc.tasks, tc.slots, lanes); got != tc.want {
			t.Errorf("ClaimSize(%d, %d, %d, %d) = %d, want %d", tc.left, tc.tasks, tc.slots, lanes, got, tc.want)
		}
	}
}

// lanesAt is a min-heap of when each lane is free.
type lanesAt []time.Duration

func (h lanesAt) Len() int           { return len(h) }
func (h lanesAt) Less(i, j int) bool { return h[i] < h[j] }
func (h lanesAt) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *lanesAt) Push(x any)        { *h = append(*h, x.(time.Duration)) }
func (h *lanesAt) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// listSchedule runs durs in order on the lanes, each free from its time
// in free, a run to the lane free first; it returns when the last ends.
func listSchedule(durs []time.Duration, free []time.Duration) time.Duration {
	h := lanesAt(slices.Clone(free))
	heap.Init(&h)
	end := time.Duration(0)
	for _, d := range durs {
		at := heap.Pop(&h).(time.Duration)
		heap.Push(&h, at+d)
		end = max(end, at+d)
	}
	for _, at := range h {
		end = max(end, at)
	}
	return end
}

// poolMakespan: tasks starting at starts, slots lanes each, draw the runs
// in order from one pool, ClaimSize at a time whenever a lane of one
// frees with no run waiting (all its lanes at its start), counting the
// tasks started by then; each task runs
// what it claimed in order on its own lanes. It returns the makespan and
// how many claims were made.
func poolMakespan(durs, starts []time.Duration, slots int) (time.Duration, int) {
	type task struct {
		lanes lanesAt
		queue []time.Duration
	}
	tasks := make([]*task, len(starts))
	for i, s := range starts {
		lanes := make(lanesAt, slots)
		for k := range lanes {
			lanes[k] = s
		}
		tasks[i] = &task{lanes: lanes}
	}
	next, claims, end := 0, 0, time.Duration(0)
	for {
		// The task whose lane frees first takes its next run, claiming
		// first when its queue is empty.
		ti := -1
		for i, tk := range tasks {
			if (len(tk.queue) > 0 || next < len(durs)) && (ti < 0 || tk.lanes[0] < tasks[ti].lanes[0]) {
				ti = i
			}
		}
		if ti < 0 {
			return end, claims
		}
		tk := tasks[ti]
		if len(tk.queue) == 0 {
			free := 0 // its lanes free now
			for _, at := range tk.lanes {
				if at <= tk.lanes[0] {
					free++
				}
			}
			started := 0 // the tasks that have started by now: those a task sees
			for _, s := range starts {
				if s <= tk.lanes[0] {
					started++
				}
			}
			n := ClaimSize(len(durs)-next, started, free, slots)
			tk.queue = append(tk.queue, durs[next:next+n]...)
			next += n
			claims++
		}
		at := heap.Pop(&tk.lanes).(time.Duration)
		heap.Push(&tk.lanes, at+tk.queue[0])
		end = max(end, at+tk.queue[0])
		tk.queue = tk.queue[1:]
	}
}

// staticMakespan: each task runs its fixed shard (every len(starts)-th
// run, as --shard I/N deals them) on its own lanes from its start.
func staticMakespan(durs, starts []time.Duration, slots int) time.Duration {
	end := time.Duration(0)
	for i, s := range starts {
		var shard []time.Duration
		for k := i; k < len(durs); k += len(starts) {
			shard = append(shard, durs[k])
		}
		free := make([]time.Duration, slots)
		for k := range free {
			free[k] = s
		}
		end = max(end, listSchedule(shard, free))
	}
	return end
}

// poolCase is a sweep of n mixed-length runs (mixedSweep's durations) on
// tasks nodes of slots lanes, the tasks starting spread evenly over
// spread times the ideal span (all lanes from the start), in a shuffled
// order; and the one-pool list-scheduling bound: every run, in order, to
// the first lane free of all the tasks' lanes.
func poolCase(seed uint64, n, tasks, slots int, spread float64) (durs, starts []time.Duration, bound time.Duration) {
	for _, r := range mixedSweep(seed, n) {
		durs = append(durs, r.dur)
	}
	all := make([]time.Duration, tasks*slots)
	ideal := listSchedule(durs, all)
	rng := rand.New(rand.NewPCG(seed, 55))
	for i := range tasks {
		starts = append(starts, time.Duration(spread*float64(ideal)*float64(i)/float64(max(tasks-1, 1))))
	}
	rng.Shuffle(len(starts), func(i, j int) { starts[i], starts[j] = starts[j], starts[i] })
	var free []time.Duration
	for _, s := range starts {
		for range slots {
			free = append(free, s)
		}
	}
	return durs, starts, listSchedule(durs, free)
}

// TestPoolMakespan: in virtual time, 1,000 mixed-length runs on 16 tasks
// of 8 lanes whose starts are spread over 0 to 3/4 of the ideal span:
// drawing runs from one pool ClaimSize at a time ends within 1.05 times
// the one-pool list-scheduling bound (every run to the first free lane of
// all), with far fewer claims than runs; fixed shards take longer.
func TestPoolMakespan(t *testing.T) {
	for _, spread := range []float64{0, 0.25, 0.5, 0.75} {
		for seed := range uint64(5) {
			durs, starts, bound := poolCase(seed, 1000, 16, 8, spread)
			pool, claims := poolMakespan(durs, starts, 8)
			static := staticMakespan(durs, starts, 8)
			ratio := pool.Seconds() / bound.Seconds()
			if ratio > 1.05 || claims > len(durs)/2 {
				t.Errorf("spread %v seed %d: pool %.3f× the bound with %d claims (want ≤ 1.05×, at most one per two runs); static shards %.3f×",
					spread, seed, ratio, claims, static.Seconds()/bound.Seconds())
			}
		}
	}
}

// BenchmarkPoolMakespan reports, per spread of the tasks' starts (as a
// share of the ideal span), the makespan over the one-pool bound of the
// shared pool (pool/bound) and of fixed shards (static/bound), and the
// runs per claim, mean over 20 seeds, for 1,000 mixed-length runs on 16
// tasks of 8 lanes.
func BenchmarkPoolMakespan(b *testing.B) {
	for _, spread := range []float64{0, 0.25, 0.5, 0.75, 1} {
		b.Run(fmt.Sprintf("spread=%v", spread), func(b *testing.B) {
			var pool, static, perClaim float64
			for range b.N {
				pool, static, perClaim = 0, 0, 0
				for seed := range uint64(20) {
					durs, starts, bound := poolCase(seed, 1000, 16, 8, spread)
					p, claims := poolMakespan(durs, starts, 8)
					pool += p.Seconds() / bound.Seconds() / 20
					static += staticMakespan(durs, starts, 8).Seconds() / bound.Seconds() / 20
					perClaim += float64(len(durs)) / float64(claims) / 20
				}
			}
			b.ReportMetric(pool, "pool/bound")
			b.ReportMetric(static, "static/bound")
			b.ReportMetric(perClaim, "runs/claim")
		})
	}
}

// TestWindow checks Config.Window: the queue takes no more waiting runs
// than it says (a pool task's lanes), where the default looks 256 ahead.
func TestWindow(t *testing.T) {
	for _, tc := range []struct{ window, want int }{{0, 256}, {8, 8}, {1, 1}} {
		s, err := New(Config{Parallel: 8, Window: tc.window}, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for s.Room() && n < 1000 {
			if _, err := s.Add(pack.Request{}, ""); err != nil {
				t.Fatal(err)
			}
			n++
		}
		if n != tc.want {
			t.Errorf("Window %d: the queue took %d runs, want %d", tc.window, n, tc.want)
		}
	}
}
