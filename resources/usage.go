package resources

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nodepack/nodepack/resources/usage"
)

// UsageSampler measures running processes at a low rate: the summed
// resident memory of a process tree (through gopsutil) and the memory and
// utilisation of GPUs (through NVML, when there is a driver). It is a
// [usage.Sampler], the runner's. One goroutine takes every sample of every
// tree, whatever the number of runs, so starting and stopping a sampling
// costs a map insert and a delete. Its methods may be called concurrently;
// Close it when done.
type UsageSampler struct {
	interval time.Duration
	gpus     gpuReader // nil without NVML

	mu     sync.Mutex
	active map[*Sampling]struct{}

	energyMu sync.Mutex            // held while the GPUs' energy is shared out; before a Sampling's mu
	energy   map[string]*gpuEnergy // by UUID
	wakeAt   time.Time             // when the sampling goroutine wakes next; zero when it is not running
	wake     chan struct{}         // tells the sampling goroutine to look again
	closed   chan struct{}
}

var _ usage.Sampler = (*UsageSampler)(nil)

// gpuReader reads one GPU's current memory use and utilisation, and the
// memory some processes use on it.
type gpuReader interface {
	readGPU(uuid string) (usedBytes uint64, utilization float64, hasUtil, ok bool)
	// processMemory is what pids use on the GPU; ok is false when the
	// driver does not say what each process uses; foreign, when processes
	// use memory there and none of them is in this PID namespace.
	processMemory(uuid string, pids []int) (bytes uint64, foreign, ok bool)
	// energy is the GPU's energy counter, in millijoules since the driver
	// loaded; ok is false where it has none (before Volta, a MIG device).
	energy(uuid string) (millijoules uint64, ok bool)
	close()
}

// NewUsageSampler returns a sampler that samples every interval (at least
// 100 ms), the first time after min(interval, 500 ms).
func NewUsageSampler(interval time.Duration) *UsageSampler {
	return &UsageSampler{interval: max(interval, 100*time.Millisecond), gpus: openGPUReader()}
}

// Close stops the sampling goroutine and releases NVML.
func (s *UsageSampler) Close() {
	s.mu.Lock()
	if s.closed != nil {
		close(s.closed)
	}
	s.mu.Unlock()
	if s.gpus != nil {
		s.gpus.close()
	}
}

// Sample starts sampling t; the function it returns stops and reports.
func (s *UsageSampler) Sample(t usage.Target) func() usage.Sampled {
	return s.Start(t).Stop
}

// Sampling is one process tree being sampled.
type Sampling struct {
	s        *UsageSampler
	target   usage.Target
	next     time.Time      // the next sample is due; guarded by s.mu
	run      sync.Mutex     // held while a sample is taken
	stopped  bool           // guarded by run
	settler  *usage.Settler // nil once settled, or without Target.Settle
	foreign  int            // samples in a row that saw only another PID namespace's processes
	limit    *usage.Limit   // nil once exceeded, or without Target.Limit
	gpuLimit *usage.Limit   // nil once exceeded, or without Target.GPULimit
	mu       sync.Mutex
	got      usage.Sampled
	util     []float64 // summed utilisation per GPU
	joules   []float64 // this run's share of each GPU's energy so far
	nUtl     []int
}

// lateness is how much later than due a first sample may come, so that a
// run starting while the sampling goroutine sleeps need not wake it.
const lateness = 100 * time.Millisecond

// Start samples the process tree and the GPUs of t until Stop: every
// interval, and every t.Settle.Interval until the tree's memory on its
// GPUs has settled.
func (s *UsageSampler) Start(t usage.Target) *Sampling {
	sp := &Sampling{s: s, target: t, util: make([]float64, len(t.GPUs)), nUtl: make([]int, len(t.GPUs)), joules: make([]float64, len(t.GPUs))}
	for _, u := range t.GPUs {
		sp.got.GPUs = append(sp.got.GPUs, usage.GPU{UUID: u})
	}
	sp.limit, sp.gpuLimit = t.Limit, t.GPULimit
	if t.Settle != nil {
		sp.settler = &usage.Settler{Samples: t.Settle.Samples}
	}
	if t.Settle != nil || t.GPULimit != nil {
		if why := s.blindTo(t.GPUs); why != "" {
			// Nothing to watch: no sample every second for it.
			sp.settler, sp.gpuLimit = nil, nil
			if t.Settle != nil && t.Settle.Blind != nil {
				go t.Settle.Blind(why)
			}
		}
	}
	s.shareEnergy(sp, +1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.active == nil {
		s.active = make(map[*Sampling]struct{})
		s.wake = make(chan struct{}, 1)
		s.closed = make(chan struct{})
		go s.loop()
	}
	s.active[sp] = struct{}{}
	sp.next = time.Now().Add(min(s.interval, 500*time.Millisecond, sp.dueIn()))
	if s.wakeAt.IsZero() || s.wakeAt.After(sp.next.Add(lateness)) {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
	return sp
}

// blindTo says why the sampler cannot see what a run uses on the GPUs
// uuids at all, or "".
func (s *UsageSampler) blindTo(uuids []string) string {
	if s.gpus == nil {
		return "NVML is not available"
	}
	for _, u := range uuids {
		if _, _, _, ok := s.gpus.readGPU(u); !ok {
			return "NVML does not know GPU " + u
		}
	}
	return ""
}

// loop takes the samples that are due, then sleeps until the next one is.
func (s *UsageSampler) loop() {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var pids []int
	var buf []byte
	var due []*Sampling
	for {
		s.mu.Lock()
		now := time.Now()
		due = due[:0]
		next := now.Add(time.Hour)
		for sp := range s.active {
			if !sp.next.After(now) {
				due = append(due, sp)
			} else if sp.next.Before(next) {
				next = sp.next
			}
		}
		if len(due) == 0 {
			s.wakeAt = next
		}
		s.mu.Unlock()
		if len(due) > 0 {
			for _, sp := range due {
				sp.run.Lock()
				if !sp.stopped {
					pids, buf = processTree(sp.target.Root, sp.target.SkipRoot, pids[:0], buf)
					sp.sample(s, pids)
				}
				sp.run.Unlock()
				s.mu.Lock()
				sp.next = time.Now().Add(min(s.interval, sp.dueIn()))
				s.mu.Unlock()
			}
			continue
		}
		timer.Reset(time.Until(next))
		select {
		case <-timer.C:
		case <-s.wake:
			timer.Stop()
		case <-s.closed:
			return
		}
	}
}

// dueIn is how soon the next sample is due for the readiness gate or the
// memory limit; a long time once there is neither to watch.
func (sp *Sampling) dueIn() time.Duration {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	due := time.Duration(1<<63 - 1)
	if sp.settler != nil {
		due = max(sp.target.Settle.Interval, 10*time.Millisecond)
	}
	for _, l := range []*usage.Limit{sp.limit, sp.gpuLimit} {
		if l != nil {
			due = min(due, max(l.Interval, 10*time.Millisecond))
		}
	}
	return due
}

// sample takes one sample, calls Limit.Exceeded when the tree is over its
// limit, and calls Settle.Done when the tree's own GPU memory has settled
// with it.
func (sp *Sampling) sample(s *UsageSampler, pids []int) {
	s.shareEnergy(sp, 0)
	var rss uint64
	for _, pid := range pids {
		rss += processRSS(pid)
	}
	sp.mu.Lock()
	sp.got.Samples++
	sp.got.TreeRSSPeak = max(sp.got.TreeRSSPeak, rss)
	if l := sp.limit; l != nil && rss > l.Bytes {
		sp.limit = nil
		sp.mu.Unlock()
		l.Exceeded(rss)
		sp.mu.Lock()
	}
	if s.gpus == nil {
		sp.mu.Unlock()
		return
	}
	var own uint64 // the tree's memory on all its GPUs
	blind, foreign, measured := "", true, false
	for i := range sp.got.GPUs {
		g := &sp.got.GPUs[i]
		used, util, hasUtil, ok := s.gpus.readGPU(g.UUID)
		if !ok {
			continue
		}
		g.Samples++
		g.PeakMemoryBytes = max(g.PeakMemoryBytes, used)
		if hasUtil {
			sp.util[i] += util
			sp.nUtl[i]++
		}
		mem, elsewhere, ok := s.gpus.processMemory(g.UUID, pids)
		if !ok {
			blind = "the driver does not say what each process uses on GPU " + g.UUID
			continue
		}
		g.ProcessPeakMemoryBytes = max(g.ProcessPeakMemoryBytes, mem)
		own += mem
		foreign, measured = foreign && elsewhere, true
	}
	var over func(uint64)
	if l := sp.gpuLimit; l != nil && measured && own > l.Bytes {
		over, sp.gpuLimit = l.Exceeded, nil
	}
	var done func(uint64)
	var blinded func(string)
	var peak uint64
	if sp.settler != nil {
		if foreign && measured && own == 0 {
			// Seen as often as a settle takes, not once: a process may
			// have exited between the driver's list and /proc.
			if sp.foreign++; sp.foreign > sp.target.Settle.Samples {
				blind = "the processes on its GPUs are in another PID namespace (a container's?)"
			}
		} else {
			sp.foreign = 0
		}
		switch {
		case blind != "":
			blinded = sp.target.Settle.Blind
			sp.settler = nil
		case sp.settler.Add(own):
			done, peak = sp.target.Settle.Done, sp.settler.Peak()
			sp.settler = nil
		}
	}
	sp.mu.Unlock()
	if over != nil {
		over(own)
	}
	if done != nil {
		done(peak)
	}
	if blinded != nil {
		blinded(blind)
	}
}

// Stop ends the sampling and returns what it saw. No sample is taken, and
// no Settle.Done called, once it returns.
func (sp *Sampling) Stop() usage.Sampled {
	if s := sp.s; s != nil {
		s.mu.Lock()
		delete(s.active, sp)
		s.mu.Unlock()
	}
	sp.run.Lock()
	if !sp.stopped && sp.s != nil {
		sp.s.shareEnergy(sp, -1)
	}
	sp.stopped = true
	sp.run.Unlock()
	sp.mu.Lock()
	defer sp.mu.Unlock()
	got := sp.got
	got.GPUs = append([]usage.GPU(nil), sp.got.GPUs...)
	for i := range got.GPUs {
		got.GPUs[i].EnergyJoules = sp.joules[i]
		if sp.nUtl[i] > 0 {
			got.GPUs[i].MeanUtilization = sp.util[i] / float64(sp.nUtl[i])
		}
	}
	return got
}

// processTree appends root's descendants (and root unless skipRoot) to
// pids, reading /proc/PID/task/TID/children; buf is scratch space.
func processTree(root int, skipRoot bool, pids []int, buf []byte) ([]int, []byte) {
	if !skipRoot {
		pids = append(pids, root)
	}
	queue := []int{root}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		dir := "/proc/" + strconv.Itoa(pid) + "/task"
		tasks, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, t := range tasks {
			b, err := os.ReadFile(dir + "/" + t.Name() + "/children")
			if err != nil {
				continue
			}
			buf = append(buf[:0], b...)
			for f := range strings.FieldsSeq(string(buf)) {
				if child, err := strconv.Atoi(f); err == nil {
					pids = append(pids, child)
					queue = append(queue, child)
				}
			}
		}
	}
	return pids, buf
}

// gpuEnergy is one GPU's energy counter as last read, and the runs on it
// since.
type gpuEnergy struct {
	last  uint64 // millijoules
	known bool   // last was read
	runs  []*Sampling
}

// shareEnergy reads the energy counters of sp's GPUs and shares each one's
// advance since it was last read evenly among the runs on that GPU since
// then; with join +1 sp then joins its GPUs' runs, with -1 it leaves them.
// So every joule a GPU spends while runs are on it goes to one of them,
// and none to a run before it started or after it stopped.
func (s *UsageSampler) shareEnergy(sp *Sampling, join int) {
	if s.gpus == nil {
		return
	}
	s.energyMu.Lock()
	defer s.energyMu.Unlock()
	for _, u := range sp.target.GPUs {
		mj, ok := s.gpus.energy(u)
		if !ok {
			continue
		}
		if s.energy == nil {
			s.energy = map[string]*gpuEnergy{}
		}
		g := s.energy[u]
		if g == nil {
			g = &gpuEnergy{}
			s.energy[u] = g
		}
		if g.known && mj > g.last && len(g.runs) > 0 {
			share := float64(mj-g.last) / 1e3 / float64(len(g.runs))
			for _, r := range g.runs {
				r.mu.Lock()
				r.joules[slices.Index(r.target.GPUs, u)] += share
				r.mu.Unlock()
			}
		}
		g.last, g.known = mj, true
		switch join {
		case +1:
			g.runs = append(g.runs, sp)
		case -1:
			g.runs = slices.DeleteFunc(g.runs, func(r *Sampling) bool { return r == sp })
		}
	}
}
