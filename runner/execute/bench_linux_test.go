//go:build linux

package execute

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/runner/proc"
	"github.com/nodepack/nodepack/runner/run"
	"github.com/nodepack/nodepack/runner/schedule"
)

// benchSlots pins two runs at a time to CPUs 0 and 1 when allowed, as the
// CLI would on this machine, and falls back to two unpinned runs.
func benchSlots() placement {
	var set unix.CPUSet
	if unix.SchedGetaffinity(0, &set) == nil && set.IsSet(0) && set.IsSet(1) {
		return func(o *Options) {
			o.Topology = pack.Topology{CPUs: []pack.CPU{{ID: 0, Core: 0}, {ID: 1, Core: 1}}}
			o.Request, o.Parallel = pack.Request{CPUs: 1}, 2
		}
	}
	return lanes(2)
}

// BenchmarkThroughput runs b.N `true` runs on two slots with log files on
// and reports runs per second and the slot refill gap: from the observed
// exit of one run to the start of the next run in the same slot (teardown,
// sweep, log and TMPDIR setup, fork and exec). Runs start directly from
// their goroutines' threads, as they do up to directLimit, or from the
// spawners, as those beyond do (compare with -cpu 2,3: one P more than
// CPUs, as nodepack sets it).
func BenchmarkThroughput(b *testing.B) {
	for _, tc := range []struct {
		name    string
		args    []string
		spawner bool
	}{
		{"exec", []string{"true"}, false},
		{"bash", []string{"bash", "-c", "true"}, false},
		{"bash/spawner", []string{"bash", "-c", "true"}, true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			if tc.spawner {
				defer proc.SetKnobs(proc.Knobs{Spawner: true})()
			}
			runs := func(yield func(run.Run, error) bool) {
				for i := range b.N {
					if !yield(run.Run{ID: strconv.Itoa(i), Index: i, Args: tc.args}, nil) {
						return
					}
				}
			}
			var events []run.Event
			dir := b.TempDir()
			if d := os.Getenv("NODEPACK_BENCH_DIR"); d != "" { // e.g. /dev/shm, to leave the file system out
				var err error
				if dir, err = os.MkdirTemp(d, "bench"); err != nil {
					b.Fatal(err)
				}
				defer os.RemoveAll(dir)
			}
			opts := Options{
				Process: Process{
					OutputDir: filepath.Join(dir, "out"),
					TempDir:   dir,
				},
				Hooks: Hooks{
					OnEvent: func(ev run.Event) {
						if ev.Kind == run.Finished {
							events = append(events, ev)
						}
					},
				},
			}
			b.ResetTimer()
			sum, err := Execute(b.Context(), runs, place(benchSlots(), opts))
			b.StopTimer()
			if err != nil || sum.Succeeded != b.N {
				b.Fatalf("%d of %d succeeded: %v", sum.Succeeded, b.N, err)
			}
			b.ReportMetric(float64(b.N)/sum.Wall().Seconds(), "runs/s")
			b.ReportMetric(sum.Utilization()*100, "%busy")
			if gaps := refillGaps(events); len(gaps) > 0 {
				b.ReportMetric(float64(gaps[len(gaps)/2].Microseconds()), "gap-p50-µs")
				b.ReportMetric(float64(gaps[len(gaps)*99/100].Microseconds()), "gap-p99-µs")
			}
		})
	}
}

// refillGaps returns, sorted, the time from each run's end to the next
// start in the same slot.
func refillGaps(events []run.Event) []time.Duration {
	last := map[int]time.Time{}
	var gaps []time.Duration
	slices.SortFunc(events, func(a, b run.Event) int { return a.Start.Compare(b.Start) })
	for _, ev := range events {
		if end, ok := last[ev.Lane]; ok {
			gaps = append(gaps, ev.Start.Sub(end))
		}
		last[ev.Lane] = ev.End
	}
	slices.Sort(gaps)
	return gaps
}

// BenchmarkFeatureCost is what each of a run's features costs nodepack
// per run, in CPU (this process and its children, of which true itself is
// the floor) and wall time per run, two at a time: a bare start, then
// with its directory and logs (and its metrics read at its end), then
// pinned to its CPUs with thread caps, then watched for --prune. The
// ledger is package runner's: bench/throughput.sh measures the whole.
func BenchmarkFeatureCost(b *testing.B) {
	policy := schedule.Prune{Metric: "loss", FirstStep: 1}
	for _, tc := range []struct {
		name   string
		logs   bool
		pinned bool
		prune  bool
	}{
		{"bare", false, false, false},
		{"logs", true, false, false},
		{"logs+pinned", true, true, false},
		{"logs+pinned+prune", true, true, true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			runs := func(yield func(run.Run, error) bool) {
				for i := range b.N {
					if !yield(run.Run{ID: strconv.Itoa(i), Index: i, Args: []string{"true"}}, nil) {
						return
					}
				}
			}
			dir := b.TempDir()
			if d := os.Getenv("NODEPACK_BENCH_DIR"); d != "" {
				var err error
				if dir, err = os.MkdirTemp(d, "bench"); err != nil {
					b.Fatal(err)
				}
				defer os.RemoveAll(dir)
			}
			opts := Options{Process: Process{TempDir: dir}}
			if tc.logs {
				opts.OutputDir = filepath.Join(dir, "out")
			}
			if tc.prune {
				p := policy
				opts.Prune = &p
			}
			slots := lanes(2)
			if tc.pinned {
				slots = benchSlots()
			}
			var before, beforeKids unix.Rusage
			unix.Getrusage(unix.RUSAGE_SELF, &before)
			unix.Getrusage(unix.RUSAGE_CHILDREN, &beforeKids)
			b.ResetTimer()
			sum, err := Execute(b.Context(), runs, place(slots, opts))
			b.StopTimer()
			if err != nil || sum.Succeeded != b.N {
				b.Fatalf("%d of %d succeeded: %v", sum.Succeeded, b.N, err)
			}
			var after, afterKids unix.Rusage
			unix.Getrusage(unix.RUSAGE_SELF, &after)
			unix.Getrusage(unix.RUSAGE_CHILDREN, &afterKids)
			cpu := func(r unix.Rusage) time.Duration {
				return time.Duration(r.Utime.Nano() + r.Stime.Nano())
			}
			used := cpu(after) - cpu(before) + cpu(afterKids) - cpu(beforeKids)
			b.ReportMetric(float64(used.Microseconds())/float64(b.N), "cpu-µs/run")
			b.ReportMetric(float64(b.N)/sum.Wall().Seconds(), "runs/s")
		})
	}
}
