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
