package resources

import (
	"os"
	"os/exec"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/nodepack/nodepack/resources/usage"
)

// TestProcessTreeSampling samples a real tree: a shell whose child holds
// 40 MB and whose setsid grandchild sleeps. The root is skipped, as it is
// for a launcher.
func TestProcessTreeSampling(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	cmd := exec.Command("bash", "-c", `setsid sleep 30 & bash -c 'x=$(head -c 40000000 /dev/zero | tr "\0" a); sleep 30' & wait`)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() }()
	deadline := time.Now().Add(10 * time.Second)
	var pids []int
	for {
		pids, _ = processTree(cmd.Process.Pid, true, pids[:0], nil)
		if len(pids) >= 3 || time.Now().After(deadline) { // setsid sleep, the inner shell, its children
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if slices.Contains(pids, cmd.Process.Pid) || len(pids) < 3 {
		t.Fatalf("tree %v: want the descendants of %d without it", pids, cmd.Process.Pid)
	}
	s := NewUsageSampler(100 * time.Millisecond)
	defer s.Close()
	sp := s.Start(usage.Target{Root: cmd.Process.Pid, SkipRoot: true})
	for {
		time.Sleep(200 * time.Millisecond)
		var rss uint64
		ps, _ := processTree(cmd.Process.Pid, true, nil, nil)
		for _, pid := range ps {
			rss += processRSS(pid)
		}
		if rss > 40e6 || time.Now().After(deadline) {
			break
		}
	}
	// A sample begun after the tree was seen above 40 MB: the next one
	// counted may have read the tree before.
	sp.mu.Lock()
	seen := sp.got.Samples
	sp.mu.Unlock()
	waitSamples(sp, seen+2, 10*time.Second)
	got := sp.Stop()
	if got.Samples < 2 || got.TreeRSSPeak < 40e6 {
		t.Errorf("usage %+v: want ≥ 2 samples and a peak above 40 MB", got)
	}
}

// BenchmarkUsageSample is the cost of one sample of a small tree (a shell
// and two children): at the default 10 s interval the sampler's share of
// one core is this time divided by 10 s.
func BenchmarkUsageSample(b *testing.B) {
	if runtime.GOOS != "linux" {
		b.Skip("reads /proc")
	}
	cmd := exec.Command("bash", "-c", "sleep 60 & sleep 60 & wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() }()
	time.Sleep(100 * time.Millisecond)
	s := &UsageSampler{interval: time.Hour}
	sp := &Sampling{}
	var pids []int
	var buf []byte
	var ru0, ru1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	b.ResetTimer()
	for b.Loop() {
		pids, buf = processTree(cmd.Process.Pid, false, pids[:0], buf)
		sp.sample(s, pids)
	}
	b.StopTimer()
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	cpu := time.Duration(ru1.Utime.Nano()+ru1.Stime.Nano()-ru0.Utime.Nano()-ru0.Stime.Nano()) / time.Duration(b.N)
	b.ReportMetric(float64(cpu.Nanoseconds())/1e3, "cpu-µs/sample")
	b.ReportMetric(100*cpu.Seconds()/10, "%core@10s")
	if len(pids) != 3 {
		b.Fatalf("tree %v, want 3 processes", pids)
	}
}

// TestOneGoroutineSamplesEveryRun: fifty trees sampled at once cost one
// goroutine, and each gets its samples.
func TestOneGoroutineSamplesEveryRun(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	s := NewUsageSampler(100 * time.Millisecond)
	defer s.Close()
	before := runtime.NumGoroutine()
	var sps []*Sampling
	for range 50 {
		sps = append(sps, s.Start(usage.Target{Root: os.Getpid()}))
	}
	if grown := runtime.NumGoroutine() - before; grown > 1 {
		t.Errorf("%d goroutines for 50 samplings, want one", grown)
	}
	for _, sp := range sps {
		waitSamples(sp, 2, 10*time.Second)
		if got := sp.Stop(); got.Samples < 2 || got.TreeRSSPeak == 0 {
			t.Errorf("sampled %+v, want 2 samples or more of this process", got)
		}
	}
}

// TestLimit: a tree over its limit is reported once, at the limit's own
// pace (the sampler's interval is an hour); one under it never is.
func TestLimit(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	s := NewUsageSampler(time.Hour)
	defer s.Close()
	over := make(chan uint64, 10)
	limit := func(bytes uint64, exceeded func(uint64)) *usage.Limit {
		return &usage.Limit{Bytes: bytes, Interval: 10 * time.Millisecond, Exceeded: exceeded}
	}
	sp := s.Start(usage.Target{Root: os.Getpid(), Limit: limit(1<<20, func(rss uint64) { over <- rss })})
	under := s.Start(usage.Target{Root: os.Getpid(), Limit: limit(1<<50, func(rss uint64) { t.Errorf("under the limit, reported over: %d", rss) })})
	select {
	case rss := <-over:
		if rss <= 1<<20 {
			t.Errorf("reported over at %d bytes, limit %d", rss, 1<<20)
		}
	case <-time.After(time.Minute):
		t.Fatal("a test process above 1 MiB was never reported over its limit")
	}
	// Three more samples of the other: time enough for a second report.
	waitSamples(under, 4, time.Minute)
	sp.Stop()
	if got := under.Stop(); got.Samples < 4 {
		t.Errorf("%d samples under the limit's pace, want 4", got.Samples)
	}
	if len(over) != 0 {
		t.Errorf("reported over %d more times, want once", len(over))
	}
}

// waitSamples waits until sp has taken n samples, or limit has passed.
func waitSamples(sp *Sampling, n int, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for {
		sp.mu.Lock()
		got := sp.got.Samples
		sp.mu.Unlock()
		if got >= n || time.Now().After(deadline) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestGPULimitWithoutReadings: where no GPU library can read a run's GPU
// memory, a GPU limit is not watched: the run is not sampled every second
// for readings that cannot come.
func TestGPULimitWithoutReadings(t *testing.T) {
	s := &UsageSampler{interval: time.Hour} // no NVML, whatever this machine has
	defer s.Close()
	sp := s.Start(usage.Target{Root: os.Getpid(), GPUs: []string{"GPU-x"},
		GPULimit: &usage.Limit{Bytes: 1, Interval: time.Millisecond, Exceeded: func(uint64) { t.Error("exceeded without a reading") }}})
	defer sp.Stop()
	if due := sp.dueIn(); due < time.Hour {
		t.Errorf("sampled every %v for a GPU limit that cannot be read", due)
	}
}
