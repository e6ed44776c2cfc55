//go:build linux

package execute

import (
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/nodepack/nodepack/runner/proc"
	"github.com/nodepack/nodepack/runner/run"
)

// BenchmarkStart runs `true` on two slots, with logs and a private
// TMPDIR per run: runs per second, and the CPU time per run of this process
// and its children together.
func BenchmarkStart(b *testing.B) {
	if err := proc.Setup(); err != nil {
		b.Fatal(err)
	}
	runs := func(yield func(run.Run, error) bool) {
		for i := range b.N {
			if !yield(run.Run{ID: strconv.Itoa(i), Args: []string{"true"}}, nil) {
				return
			}
		}
	}
	dir := b.TempDir()
	cpu0 := cpuTime()
	b.ResetTimer()
	sum, err := Execute(b.Context(), runs, place(benchSlots(), Options{Process: Process{OutputDir: filepath.Join(dir, "out"), TempDir: dir}}))
	b.StopTimer()
	if err != nil || sum.Succeeded != b.N {
		b.Fatalf("%d of %d succeeded: %v", sum.Succeeded, b.N, err)
	}
	b.ReportMetric(float64(b.N)/sum.Wall().Seconds(), "runs/s")
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/run")
}

// cpuTime is the user and system time of this process and its reaped
// children.
func cpuTime() time.Duration {
	var self, children syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children)
	ns := self.Utime.Nano() + self.Stime.Nano() + children.Utime.Nano() + children.Stime.Nano()
	return time.Duration(ns)
}
