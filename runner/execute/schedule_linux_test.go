package execute

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/resources/usage"
	"github.com/nodepack/nodepack/runner/failure"
	"github.com/nodepack/nodepack/runner/run"
)

// allowedCPUs returns the CPUs this process may use, as a topology's CPUs
// (each its own core), so that runs can be pinned on any machine.
func allowedCPUs(t *testing.T) []pack.CPU {
	t.Helper()
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Skip(err)
	}
	var cpus []pack.CPU
	for id := range 1024 {
		if set.IsSet(id) {
			cpus = append(cpus, pack.CPU{ID: id, Core: id})
		}
	}
	return cpus
}

// fourGPUs is a node of four fake GPUs, two on each of two NUMA nodes,
// with the CPUs this process may use (on NUMA node 0: a CPU-only test
// machine has one) and 40 GiB of memory each.
func fourGPUs(t *testing.T) pack.Topology {
	topo := pack.Topology{CPUs: allowedCPUs(t)}
	for i, numa := range []int{0, 0, 1, 1} {
		topo.GPUs = append(topo.GPUs, pack.GPU{Index: i, UUID: "GPU-fake-" + strconv.Itoa(i), NUMA: numa, MemoryBytes: 40 << 30})
	}
	return topo
}

// waitFor is a command that ends once file exists: a run that holds its
// resources until the test lets it go.
func waitFor(file string) string {
	return "while [ ! -e " + file + " ]; do sleep 0.01; done"
}

func request(text string) *pack.Request {
	r, err := pack.ParseRequest(text, pack.Request{}, 0)
	if err != nil {
		panic(err)
	}
	return &r
}

// TestMixedRequestsNeverOvercommit packs 2-GPU, 1-GPU and quarter-GPU runs
// on four fake GPUs: at no instant do the runs on a GPU claim more than
// the GPU, each run sees exactly its GPUs in CUDA_VISIBLE_DEVICES, runs on
// one GPU see the same value, and a 2-GPU run gets GPUs of one NUMA node.
func TestMixedRequestsNeverOvercommit(t *testing.T) {
	topo := fourGPUs(t)
	var runs []run.Run
	for i, text := range []string{
		"gpus=2 cpus=0", "gpus=0.25 cpus=0", "gpus=0.25 cpus=0", "gpus=1 cpus=0", "gpus=0.25 cpus=0",
		"gpus=2 cpus=0", "gpus=0.25 cpus=0", "gpus=0.5 cpus=0", "gpus=1 cpus=0", "gpus=0.25 cpus=0",
		"gpus=0.25 cpus=0", "gpus=2 cpus=0", "gpus=0.5 cpus=0", "gpus=0.25 cpus=0", "gpus=1 cpus=0",
	} {
		runs = append(runs, run.Run{ID: "r" + strconv.Itoa(i), Index: i, Request: request(text),
			Args: []string{"bash", "-c", "sleep 0.$((RANDOM % 3)); echo $CUDA_VISIBLE_DEVICES"}})
	}
	sum, events, err := execute(t, t.Context(), func(o *Options) { o.Topology, o.Parallel = topo, 16 }, Options{}, runs...)
	if err != nil || sum.Succeeded != len(runs) {
		t.Fatalf("Execute: %d of %d succeeded, %v", sum.Succeeded, len(runs), err)
	}
	type change struct {
		at    time.Time
		share int // thousandths of a GPU, + at the start, - at the end
		gpu   string
	}
	var changes []change
	for _, ev := range events {
		r := *ev.Run.Request
		if got, want := strings.TrimSpace(readLog(t, ev.Stdout)), strings.Join(ev.Place.UUIDs(), ","); got != want {
			t.Errorf("%s saw CUDA_VISIBLE_DEVICES=%q, was given %q", ev.Run.ID, got, want)
		}
		share := r.GPUShare
		if r.GPUs > 0 {
			share = pack.GPUWhole
		}
		if len(ev.Place.GPUs) != max(r.GPUs, 1) || ev.Place.Request != r {
			t.Errorf("%s asked for %v and got %d GPUs for %v", ev.Run.ID, r, len(ev.Place.GPUs), ev.Place.Request)
		}
		if r.GPUs == 2 && ev.Place.GPUs[0].NUMA != ev.Place.GPUs[1].NUMA {
			t.Errorf("%s: 2 GPUs on NUMA nodes %d and %d", ev.Run.ID, ev.Place.GPUs[0].NUMA, ev.Place.GPUs[1].NUMA)
		}
		for _, g := range ev.Place.GPUs {
			changes = append(changes, change{ev.Start, share, g.UUID}, change{ev.End, -share, g.UUID})
		}
	}
	// Ends before starts at the same instant: the allocator took the GPU
	// back before it handed it out again.
	slices.SortFunc(changes, func(a, b change) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.share - b.share
	})
	claimed := map[string]int{}
	for _, c := range changes {
		if claimed[c.gpu] += c.share; claimed[c.gpu] > pack.GPUWhole {
			t.Fatalf("at %v, %s is claimed %d thousandths", c.at.Format(time.StampMicro), c.gpu, claimed[c.gpu])
		}
	}
}

// TestParallelCapsRunsAtOnce: however many fit, at most Parallel run at
// once, and NODEPACK_SLOT is below it.
func TestParallelCapsRunsAtOnce(t *testing.T) {
	topo := pack.Topology{CPUs: allowedCPUs(t)}
	var runs []run.Run
	for i := range 12 {
		runs = append(runs, run.Run{ID: "r" + strconv.Itoa(i), Index: i, Args: []string{"bash", "-c", "sleep 0.05; echo $NODEPACK_SLOT"}})
	}
	_, events, err := execute(t, t.Context(), func(o *Options) { o.Topology, o.Parallel = topo, 3 }, Options{}, runs...)
	if err != nil || len(events) != 12 {
		t.Fatalf("Execute: %d events, %v", len(events), err)
	}
	for _, a := range events {
		at := 0
		for _, b := range events {
			if !b.Start.After(a.Start) && b.End.After(a.Start) {
				at++
			}
		}
		if at > 3 {
			t.Errorf("%d runs at once when %s started", at, a.Run.ID)
		}
		if slot, _ := strconv.Atoi(strings.TrimSpace(readLog(t, a.Stdout))); slot != a.Lane || slot >= 3 {
			t.Errorf("%s: NODEPACK_SLOT %d, event's lane %d", a.Run.ID, slot, a.Lane)
		}
	}
}

// startOrder runs the backfill scenario on two fake GPUs and returns the
// order in which runs started: "a" holds one GPU until "c1" has
// finished (or, with strict order, until it has started itself), "big"
// needs both, "c1" and "c2" one each.
func startOrder(t *testing.T, backfillWait time.Duration, c1 string) []string {
	dir := t.TempDir()
	gpus := fourGPUs(t)
	gpus.GPUs = gpus.GPUs[:2]
	release := filepath.Join(dir, "release")
	var mu sync.Mutex
	var order []string
	onEvent := func(ev run.Event) {
		mu.Lock()
		defer mu.Unlock()
		if ev.Kind == run.Started {
			order = append(order, ev.Run.ID)
		}
		strict := backfillWait < 0 && ev.Kind == run.Started && ev.Run.ID == "a"
		if strict || ev.Kind == run.Finished && ev.Run.ID == "c1" {
			os.WriteFile(release, nil, 0o644)
		}
	}
	runs := []run.Run{
		{ID: "a", Args: []string{"bash", "-c", waitFor(release)}, Request: request("gpus=1")},
		{ID: "big", Args: []string{"true"}, Request: request("gpus=2")},
		{ID: "c1", Args: []string{"bash", "-c", c1}, Request: request("gpus=1")},
		{ID: "c2", Args: []string{"true"}, Request: request("gpus=1")},
	}
	sum, _, err := execute(t, t.Context(), func(o *Options) { o.Topology, o.Parallel = gpus, 4 }, Options{Policy: Policy{BackfillWait: backfillWait}, Hooks: Hooks{OnEvent: onEvent}}, runs...)
	if err != nil || sum.Succeeded != 4 {
		t.Fatalf("Execute: %d of 4 succeeded, %v", sum.Succeeded, err)
	}
	return order
}

// TestBackfill: a 1-GPU run starts ahead of a 2-GPU run that does not fit
// yet; once runs have passed the 2-GPU run for BackfillWait, it keeps
// what frees up and starts before the runs behind it; with strict order
// nothing passes it. Runs that start together race to report it, so the
// cases say only which run must start before which.
func TestBackfill(t *testing.T) {
	for _, tc := range []struct {
		description string
		wait        time.Duration
		c1          string
		before      [][2]string
	}{
		{"backfill: c1 and c2 start ahead of big", time.Hour, "true", [][2]string{{"a", "big"}, {"c1", "big"}, {"c2", "big"}}},
		{"after the wait big reserves: c2 waits though a GPU is free", 50 * time.Millisecond, "sleep 0.3", [][2]string{{"a", "big"}, {"c1", "big"}, {"big", "c2"}}},
		{"strictly in order", -1, "true", [][2]string{{"a", "big"}, {"big", "c1"}, {"big", "c2"}}},
	} {
		t.Run(tc.description, func(t *testing.T) {
			order := startOrder(t, tc.wait, tc.c1)
			for _, b := range tc.before {
				if slices.Index(order, b[0]) > slices.Index(order, b[1]) {
					t.Errorf("runs started %v: %s after %s", order, b[0], b[1])
				}
			}
		})
	}
}

// gateSampler is a Sampler whose runs' GPU memory settles when the test
// says so.
type gateSampler struct {
	started chan usage.Target
	peak    uint64 // what Sampled reports as the run's own GPU memory
}

func (g *gateSampler) Sample(t usage.Target) func() usage.Sampled {
	g.started <- t
	return func() usage.Sampled {
		var s usage.Sampled
		for _, u := range t.GPUs {
			s.GPUs = append(s.GPUs, usage.GPU{UUID: u, Samples: 1, ProcessPeakMemoryBytes: g.peak})
		}
		return s
	}
}

// TestReadinessGate: a run that shares its GPU by memory keeps the next
// one off that GPU until its memory has settled; without a word from the
// Sampler, until SettleTimeout; and it never holds up other GPUs.
func TestReadinessGate(t *testing.T) {
	topo := fourGPUs(t)
	topo.GPUs = topo.GPUs[:1]
	dir := t.TempDir()
	done := filepath.Join(dir, "done")
	sampler := &gateSampler{started: make(chan usage.Target, 10)}
	var mu sync.Mutex
	starts := map[string]time.Time{}
	onEvent := func(ev run.Event) {
		if ev.Kind == run.Started {
			mu.Lock()
			starts[ev.Run.ID] = ev.Start
			mu.Unlock()
		}
	}
	runs := []run.Run{
		{ID: "first", Args: []string{"bash", "-c", waitFor(done)}},
		{ID: "second", Args: []string{"bash", "-c", waitFor(done)}},
		{ID: "third", Args: []string{"bash", "-c", "touch " + done}},
	}
	opts := Options{
		Policy: Policy{
			Topology:      topo,
			Request:       pack.Request{GPUMem: 10 << 30},
			SettleTimeout: time.Hour,
			Parallel:      3,
		},
		Process: Process{
			TempDir: dir,
		},
		Hooks: Hooks{
			Sampler: sampler,
			OnEvent: onEvent,
		},
	}
	x, err := Start(t.Context(), run.Runs(runs...), opts)
	if err != nil {
		t.Fatal(err)
	}
	first := <-sampler.started
	if first.Settle == nil {
		t.Fatal("no Settle asked of the Sampler for a run sharing its GPU by memory")
	}
	// Give a broken gate the chance to start the second run at once.
	time.Sleep(200 * time.Millisecond)
	settledAt := time.Now()
	first.Settle.Done(6 << 30)
	second := <-sampler.started
	second.Settle.Done(6 << 30)
	third := <-sampler.started
	third.Settle.Done(1 << 30)
	sum, err := x.Wait()
	if err != nil || sum.Succeeded != 3 {
		t.Fatalf("Wait: %d of 3 succeeded, %v", sum.Succeeded, err)
	}
	if starts["second"].Before(settledAt) {
		t.Errorf("the second run started %v before the first settled", settledAt.Sub(starts["second"]))
	}

	// No word from the Sampler: the gate opens after SettleTimeout.
	opts.SettleTimeout = 150 * time.Millisecond
	opts.Sampler = &gateSampler{started: make(chan usage.Target, 10)}
	os.Remove(done)
	clear(starts)
	sum, err = Execute(t.Context(), run.Runs(runs...), opts)
	if err != nil || sum.Succeeded != 3 {
		t.Fatalf("Execute: %d of 3 succeeded, %v", sum.Succeeded, err)
	}
	if d := starts["second"].Sub(starts["first"]); d < opts.SettleTimeout {
		t.Errorf("without a settle, the second run started %v after the first, want ≥ %v", d, opts.SettleTimeout)
	}
}

// TestAutoGPUMem: with gpu_mem=auto the first run of a shape has its GPU
// alone until its memory settles; then it claims what it used plus a
// margin, and the runs like it join with that request.
func TestAutoGPUMem(t *testing.T) {
	topo := fourGPUs(t)
	topo.GPUs = topo.GPUs[:1] // 38 GiB for runs sharing it
	dir := t.TempDir()
	done := filepath.Join(dir, "done")
	sampler := &gateSampler{started: make(chan usage.Target, 10), peak: 8 << 30}
	var runs []run.Run
	for i := range 4 {
		runs = append(runs, run.Run{ID: "seed" + strconv.Itoa(i), Index: i, Args: []string{"bash", "-c", waitFor(done) + " # seed=" + strconv.Itoa(i)}})
	}
	var starts []run.Event
	var mu sync.Mutex
	opts := Options{
		Policy: Policy{
			Topology:      topo,
			Request:       pack.Request{AutoGPUMem: true},
			SettleTimeout: time.Hour,
			Parallel:      4,
		},
		Process: Process{
			TempDir: dir,
		},
		Hooks: Hooks{
			Sampler: sampler,
			OnEvent: func(ev run.Event) {
				if ev.Kind == run.Started {
					mu.Lock()
					starts = append(starts, ev)
					mu.Unlock()
				}
			},
		},
	}
	x, err := Start(t.Context(), run.Runs(runs...), opts)
	if err != nil {
		t.Fatal(err)
	}
	probe := <-sampler.started
	time.Sleep(200 * time.Millisecond) // a broken probe would let the others start now
	mu.Lock()
	if len(starts) != 1 || starts[0].Place.Request.GPUShare != pack.GPUWhole {
		t.Errorf("before the first run settled: %d started, the first with %v; want it alone with its GPU", len(starts), starts[0].Place.Request)
	}
	mu.Unlock()
	probe.Settle.Done(8 << 30)
	for range 3 {
		s := <-sampler.started
		s.Settle.Done(8 << 30)
	}
	os.WriteFile(done, nil, 0o644)
	sum, err := x.Wait()
	if err != nil || sum.Succeeded != 4 {
		t.Fatalf("Wait: %d of 4 succeeded, %v", sum.Succeeded, err)
	}
	want := uint64(8<<30 + 8<<30/10)
	for _, ev := range starts[1:] {
		if ev.Place.Request.GPUMem != want || ev.Place.Request.GPUShare != 0 {
			t.Errorf("%s started with %v, want gpu_mem=%s", ev.Run.ID, ev.Place.Request, pack.FormatSize(want))
		}
	}
}

// TestRunThatNeverFitsEndsTheStream: a run further down the source whose
// request can never fit ends the sweep like a source error, naming it;
// the runs before it ran.
func TestRunThatNeverFitsEndsTheStream(t *testing.T) {
	topo := pack.Topology{CPUs: allowedCPUs(t)}
	runs := []run.Run{
		{ID: "fine", Args: []string{"true"}},
		{ID: "huge", Args: []string{"true"}, Origin: "tasks.txt:2", Request: request("gpus=1")},
	}
	sum, _, err := execute(t, t.Context(), func(o *Options) { o.Topology = topo }, Options{}, runs...)
	if err == nil || !strings.Contains(err.Error(), "tasks.txt:2: gpus=1 cpus=0: the node has no GPUs") || sum.Succeeded != 1 {
		t.Errorf("err %v, %d succeeded; want the run named and the first run done", err, sum.Succeeded)
	}
}

// blindSampler is a Sampler that cannot see any run's GPU memory, as one
// without NVML: it says so for every run that asks.
type blindSampler struct{}

func (blindSampler) Sample(t usage.Target) func() usage.Sampled {
	if t.Settle != nil {
		go t.Settle.Blind("NVML is not available")
	}
	return func() usage.Sampled { return usage.Sampled{} }
}

// TestGateWithoutReadings: where no reading of a run's GPU memory can
// come (the Sampler is blind to it, or there is none), runs sharing a GPU
// by gpu_mem do not wait for one: three runs that each wait until all
// three have started all succeed under a gate of an hour, and the sweep
// is told why, once.
func TestGateWithoutReadings(t *testing.T) {
	topo := fourGPUs(t)
	topo.GPUs = topo.GPUs[:1]
	for _, tc := range []struct {
		name    string
		sampler usage.Sampler
		why     string
	}{
		{"a blind sampler", blindSampler{}, "(NVML is not available)"},
		{"no sampler", nil, "(the runs are not measured)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var runs []run.Run
			for i := range 3 {
				wait := fmt.Sprintf("touch %s/started.%d; while [ $(ls %s | grep -c started) -lt 3 ]; do sleep 0.01; done", dir, i, dir)
				runs = append(runs, run.Run{ID: fmt.Sprint("r", i), Args: []string{"bash", "-c", wait}})
			}
			var mu sync.Mutex
			var notes []string
			opts := Options{
				Policy: Policy{
					Topology:      topo,
					Request:       pack.Request{GPUMem: 10 << 30},
					SettleTimeout: time.Hour,
					Parallel:      3,
				},
				Process: Process{
					Timeout: 10 * time.Second,
					TempDir: dir,
				},
				Hooks: Hooks{
					Sampler: tc.sampler,
					OnNote:  func(n string) { mu.Lock(); notes = append(notes, n); mu.Unlock() },
				},
			}
			sum, err := Execute(t.Context(), run.Runs(runs...), opts)
			if err != nil || sum.Succeeded != 3 {
				t.Fatalf("Execute: %d of 3 succeeded, %v: the gate waited for readings that cannot come", sum.Succeeded, err)
			}
			if len(notes) != 1 || !strings.Contains(notes[0], "cannot be read here "+tc.why) {
				t.Errorf("notes %q; want one saying why the GPU memory cannot be read %s", notes, tc.why)
			}
		})
	}
}

// overSampler is a Sampler that finds every run with a GPU limit over it
// at once, as a run that allocates past its gpu_mem would be.
type overSampler struct{ limits chan uint64 }

func (o overSampler) Sample(t usage.Target) func() usage.Sampled {
	if t.GPULimit != nil {
		o.limits <- t.GPULimit.Bytes
		go t.GPULimit.Exceeded(t.GPULimit.Bytes + 1<<30)
	}
	return func() usage.Sampled { return usage.Sampled{} }
}

// TestGPUMemPromise: a run sharing its GPU by gpu_mem whose own GPU memory
// passes its gpu_mem and the GPU's headroom is stopped at once, fails
// gpu-mem with a line in its stderr saying so, and is retried with half
// as much gpu_mem again; a run with its GPU to itself is not held to it.
func TestGPUMemPromise(t *testing.T) {
	topo := fourGPUs(t)
	topo.GPUs = topo.GPUs[:1]
	dir := t.TempDir()
	sampler := overSampler{limits: make(chan uint64, 4)}
	var mu sync.Mutex
	var ends []run.Event
	opts := Options{
		Policy: Policy{
			Topology:      topo,
			Request:       pack.Request{GPUMem: 10 << 30},
			SettleTimeout: time.Millisecond,
			Retries:       1,
			RetryBackoff:  time.Millisecond,
		},
		Process: Process{
			OutputDir: dir,
			TempDir:   dir,
			Timeout:   5 * time.Second,
		},
		Hooks: Hooks{
			Sampler: sampler,
			OnEvent: func(ev run.Event) {
				if ev.Kind == run.Finished {
					mu.Lock()
					ends = append(ends, ev)
					mu.Unlock()
				}
			},
		},
	}
	sum, err := Execute(t.Context(), run.Runs(run.Run{ID: "greedy", Args: []string{"sleep", "60"}}), opts)
	if err != nil || sum.Failed != 1 {
		t.Fatalf("Execute: %+v, %v; want the run failed", sum, err)
	}
	if len(ends) != 2 {
		t.Fatalf("%d attempts, want 2 (one retry)", len(ends))
	}
	headroom := pack.GPUMemHeadroom(40 << 30)
	for i, want := range []uint64{10 << 30, 15 << 30} {
		ev := ends[i]
		if ev.Class != failure.GPUMem || ev.Place.Request.GPUMem != want || ev.End.Sub(ev.Start) > 30*time.Second {
			t.Errorf("attempt %d: class %q, gpu_mem %d after %v; want gpu-mem, %d, stopped at once", i+1, ev.Class, ev.Place.Request.GPUMem, ev.End.Sub(ev.Start), want)
		}
		select {
		case got := <-sampler.limits:
			if got != want+headroom {
				t.Errorf("attempt %d held to %d bytes, want gpu_mem and the headroom, %d", i+1, got, want+headroom)
			}
		default:
			t.Errorf("attempt %d was held to no GPU memory", i+1)
		}
	}
	stderr, _ := os.ReadFile(filepath.Join(dir, "runs", "greedy", "stderr.log"))
	if !strings.Contains(string(stderr), "of GPU memory, over the gpu_mem=10GiB it asked for and the GPU's 2GiB headroom") {
		t.Errorf("stderr does not say why:\n%s", stderr)
	}

	opts.Request, opts.Retries = pack.Request{GPUs: 1}, 0
	sum, err = Execute(t.Context(), run.Runs(run.Run{ID: "alone", Args: []string{"true"}}), opts)
	if err != nil || sum.Succeeded != 1 || len(sampler.limits) != 0 {
		t.Errorf("a run with its GPU to itself: %+v, %v, %d limits; want it succeeded, held to none", sum, err, len(sampler.limits))
	}
}
