package runner

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nodepack/nodepack/resources/batch"
	"github.com/nodepack/nodepack/runner/claim"
	"github.com/nodepack/nodepack/runner/schedule"
)

// BenchmarkPoolClaims is issue 55's scale target in simulation: 64 tasks
// of 8 lanes each share a sweep of 1,000,000 runs through one claims
// folder (on the file system of the test's temporary directory), each
// claiming schedule.ClaimSize runs as a task with free lanes does; in
// claims+leases each also renews its lease and reads the others' at
// every claim (far more often than every sixth of a lease). It reports the file system's time
// per run (µs/run: the whole simulation's time over the runs, every task
// claiming at once), every task's time in claims summed over the runs
// (task-µs/run, which on a machine of fewer cores than tasks also counts
// their waits for a core), the claims made and the runs per claim. The
// target: at most 1 ms of the file system's time per run.
func BenchmarkPoolClaims(b *testing.B) {
	b.Run("claims", func(b *testing.B) { benchmarkPoolClaims(b, false) })
	b.Run("claims+leases", func(b *testing.B) { benchmarkPoolClaims(b, true) })
}

func benchmarkPoolClaims(b *testing.B, leases bool) {
	const runs, tasks, lanes = 1_000_000, 64, 8
	for range b.N {
		out := b.TempDir()
		start := time.Now()
		var spent atomic.Int64 // nanoseconds in claims and leases, all tasks
		var claims, claimed atomic.Int64
		var wg sync.WaitGroup
		for k := range tasks {
			p, err := claim.Open(out, "bench", fmt.Sprintf("t%02d", k), runs)
			if err != nil {
				b.Fatal(err)
			}
			wg.Go(func() {
				for {
					t0 := time.Now()
					n := max(p.Tasks(), 1)
					c, ok, err := p.ClaimWith(func(left int) int { return schedule.ClaimSize(left, n, lanes, lanes) })
					if err == nil && ok && leases {
						err = p.Renew(claim.Busy)
					}
					if err == nil && leases {
						_, err = p.Peers(t0, time.Minute)
					}
					spent.Add(int64(time.Since(t0)))
					if err != nil {
						b.Error(err)
						return
					}
					if !ok {
						return
					}
					claims.Add(1)
					claimed.Add(int64(c.To - c.From))
				}
			})
		}
		wg.Wait()
		if claimed.Load() != runs {
			b.Fatalf("%d runs claimed, want %d", claimed.Load(), runs)
		}
		b.ReportMetric(float64(time.Since(start))/runs/1e3, "µs/run")
		b.ReportMetric(float64(spent.Load())/runs/1e3, "task-µs/run")
		b.ReportMetric(float64(claims.Load()), "claims")
		b.ReportMetric(float64(runs)/float64(claims.Load()), "runs/claim")
	}
}

// TestPoolTaskNames: --pool auto names a task by its batch job (an array
// task's job and index, a step's rank), a PBS array element's id made a
// file name; outside a job by host and process; a given name must be a
// file name of letters, digits, '.', '-' and '_'.
func TestPoolTaskNames(t *testing.T) {
	for _, tc := range []struct {
		spec string
		job  batch.Job
		want string
	}{
		{"auto", batch.Job{Kind: batch.Slurm, JobID: "812", ArrayJobID: "800", Array: &batch.Array{Index: 3, Step: 1}}, "800_3"},
		{"auto", batch.Job{Kind: batch.SGE, JobID: "55", Array: &batch.Array{Index: 2, Step: 1}}, "55_2"},
		{"auto", batch.Job{Kind: batch.Slurm, JobID: "9", Tasks: &batch.Tasks{Rank: 1, Count: 4}}, "9.1"},
		{"auto", batch.Job{Kind: batch.PBS, JobID: "123[4].server", Array: &batch.Array{Index: 4, Step: 1}}, "123_4_.server"},
		{"node-7", batch.Job{}, "node-7"},
	} {
		got, err := poolTask(tc.spec, tc.job)
		if err != nil || got != tc.want {
			t.Errorf("poolTask(%q, %+v) = %q, %v; want %q", tc.spec, tc.job, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", ".hidden", "a/b", "a b", "ä", string(make([]byte, 101))} {
		if _, err := poolTask(bad, batch.Job{}); err == nil {
			t.Errorf("poolTask(%q) took it", bad)
		}
	}
}

// TestLateRenewal: a renewal that lands after the stop the one before it
// set (a slow mount, a process starved of CPU, whose lapse timer fired
// late or not yet) may come after the supervisor stopped the runs: a run
// that ends then is fenced, not done (its stop is no failure of its
// own), from before the renewal moves the lease on until the task has
// lapsed; a renewal in time fences nothing.
func TestLateRenewal(t *testing.T) {
	p := &poolRuns{lease: 6 * time.Second, beat: time.Second, ladder: 300 * time.Millisecond, t0: time.Now(),
		given: map[string]int{"r": 0}, lost: map[int]bool{}, again: map[string]bool{}}
	p.lapse = time.AfterFunc(time.Hour, func() {})
	defer p.lapse.Stop()
	var notes []string
	p.note = func(s string) { notes = append(notes, s) }
	stopped := 0
	p.fence = func(which func(id string) bool) {
		if which("r") {
			stopped++
		}
	}
	if late := p.renewed(time.Now()); late || p.fenced("r") {
		t.Fatalf("the first renewal: late %v, fenced %v", late, p.fenced("r"))
	}
	if late := p.renewed(time.Now()); late || p.fenced("r") {
		t.Fatalf("a renewal in time: late %v, fenced %v", late, p.fenced("r"))
	}
	p.safe.Store(1) // the last renewal's stop is past: the lapse timer is late
	if late := p.renewed(time.Now()); !late {
		t.Fatal("a renewal after its stop was due is not late")
	}
	if !p.fenced("r") {
		t.Fatal("a run that ends between a late renewal and its lapse is not fenced")
	}
	p.lapsing(true)
	if !p.lapsed || p.late.Load() || stopped != 1 || !p.fenced("r") {
		t.Fatalf("after a late renewal: lapsed %v, late %v, stopped %d, fenced %v", p.lapsed, p.late.Load(), stopped, p.fenced("r"))
	}
	if len(notes) != 1 {
		t.Errorf("notes %q, want the lapse said once", notes)
	}
}
