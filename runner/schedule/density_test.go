package schedule

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/runner/failure"
)

// gpuModel is a simulated GPU: speedup[k-1] is how much faster k runs of
// a shape progress on one GPU together than one alone (1.6: each of 2
// runs at 0.8 of its solo speed); past its end, the last value holds.
type gpuModel map[string][]float64

func (m gpuModel) speed(shape string, k int) float64 {
	f := m[shape]
	return f[min(k, len(f))-1] / float64(k)
}

// gpuRun is a run of a simulated training: steps to make at rate steps
// per second alone.
type gpuRun struct {
	shape string
	steps float64
	rate  float64
	// oomAbove: an attempt fails with cuda-oom when more than that many
	// runs are on its GPU; 0: never.
	oomAbove int
}

// gpuSweep is what a simulated sweep did: its makespan, its steps per
// second, the density decisions, and the most runs on one GPU at once.
type gpuSweep struct {
	makespan  time.Duration
	rate      float64
	changes   []DensityChange
	densest   int
	failures  int
	starts    int
	lastLevel map[string]int
}

// simulateGPU runs a sweep of trainings through a Scheduler of cfg in
// virtual time, a tick of a second at a time: every run progresses at its
// rate times the model's speed for the runs on its GPU (times a noise
// factor around 1 drawn per tick, when noise > 0), reports its step, and
// ends when it has made its steps.
func simulateGPU(t testing.TB, cfg Config, model gpuModel, runs []gpuRun, noise float64) gpuSweep {
	t.Helper()
	s, err := New(cfg, simStart)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	type live struct {
		k     Key
		r     gpuRun
		gpu   string
		step  float64
		n     int
		fails bool
	}
	var out gpuSweep
	now, next, total := simStart, 0, 0.0
	running := map[Key]*live{}
	index := map[Key]int{}
	attempts := map[Key]int{}
	for tick := 0; tick < 100000; tick++ {
		for next < len(runs) && s.Room() {
			k, err := s.Add(cfg.Request, runs[next].shape)
			if err != nil {
				t.Fatalf("Add: %v", err)
			}
			index[k] = next
			next++
		}
		plan, err := s.Next(now)
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		out.changes = append(out.changes, plan.Densities...)
		for _, st := range plan.Starts {
			attempts[st.Key]++
			s.Started(st.Key, attempts[st.Key], now)
			running[st.Key] = &live{k: st.Key, r: runs[index[st.Key]], gpu: st.Place.GPUs[0].UUID, n: attempts[st.Key]}
			out.starts++
		}
		if len(running) == 0 && next >= len(runs) && s.Waiting() == 0 {
			break
		}
		perGPU := map[string]int{}
		keys := slices.Sorted(maps.Keys(running)) // one order: the noise and the reports replay exactly
		for _, l := range running {
			perGPU[l.gpu]++
			out.densest = max(out.densest, perGPU[l.gpu])
		}
		// A fixed density without noise reports nothing the policy reads
		// between ends: the seconds until the first run ends go in one
		// jump, each run as far as it would get second by second.
		jump := 1.0
		if !cfg.Request.AutoShare && noise == 0 && len(plan.Starts) == 0 {
			jump = math.Inf(1)
			for _, k := range keys {
				l := running[k]
				if l.r.oomAbove > 0 && perGPU[l.gpu] > l.r.oomAbove {
					jump = 1
					break
				}
				d := l.r.rate * model.speed(l.r.shape, perGPU[l.gpu])
				jump = min(jump, max(math.Floor((l.r.steps-l.step)/d), 1))
			}
			if math.IsInf(jump, 1) {
				jump = 1
			}
		}
		now = now.Add(time.Duration(jump) * time.Second)
		for _, k := range keys {
			l := running[k]
			if l.r.oomAbove > 0 && perGPU[l.gpu] > l.r.oomAbove {
				l.fails = true
				continue
			}
			f := 1.0
			if noise > 0 {
				f = 1 + noise*(2*rng.Float64()-1)
			}
			d := l.r.rate * model.speed(l.r.shape, perGPU[l.gpu]) * f
			for range int(jump) {
				total += min(d, l.r.steps-l.step)
				l.step = min(l.step+d, l.r.steps)
			}
		}
		for _, k := range keys {
			l := running[k]
			if !l.fails {
				s.Progress(k, l.step, now)
			}
			if l.step < l.r.steps && !l.fails {
				continue
			}
			end := End{Outcome: Succeeded, Attempt: l.n}
			if l.fails {
				end.Outcome, end.Class = Failed, failure.CUDAOOM
				out.failures++
			}
			after := s.Ended(k, end, now)
			delete(running, k)
			if !after.Retry || after.Anew {
				s.Release(k)
			}
			if after.Retry && !after.Anew {
				t.Fatalf("a retry in place: not simulated")
			}
		}
	}
	out.makespan = now.Sub(simStart)
	out.rate = total / out.makespan.Seconds()
	out.lastLevel = map[string]int{}
	for shape, d := range s.dens {
		out.lastLevel[shape] = d.level
		if testing.Verbose() {
			for k, p := range d.pairs {
				t.Logf("%s pairs %v: %d, mean ratio %.3f", shape, k, p.n, math.Exp(p.logs/float64(p.n)))
			}
			for n, rs := range d.at {
				t.Logf("%s at %d: %d readings", shape, n, len(rs))
			}
		}
	}
	return out
}

// fixed is the sweep run at k runs per GPU from the start, for comparison.
func fixed(t testing.TB, cfg Config, model gpuModel, runs []gpuRun, k int) gpuSweep {
	cfg.Request.AutoShare, cfg.Request.GPUShare = false, pack.GPUWhole/k
	return simulateGPU(t, cfg, model, runs, 0)
}

func trainings(n int, shape string, steps, rate float64) []gpuRun {
	runs := make([]gpuRun, n)
	for i := range runs {
		runs[i] = gpuRun{shape: shape, steps: steps, rate: rate}
	}
	return runs
}

// TestDensity is the density rule (gpus=auto), case by case, in virtual
// time against a simulated GPU: the levels it goes through, where it
// settles, and its throughput against one run per GPU and the best fixed
// density.
func TestDensity(t *testing.T) {
	twoGPUs := node(1, 16, 2, 80<<30, 0)
	auto := pack.Request{AutoShare: true, CPUs: 1}
	cfg := Config{Topology: twoGPUs, Request: auto, DensityWindow: 20 * sec}
	// Small trainings: two MLPs, a CNN; one run alone uses a third of the GPU.
	saturating := gpuModel{"mlp": {1, 1.8, 2.4, 2.6, 2.7, 2.75, 2.75, 2.75}}
	contention := gpuModel{"mlp": {1, 1.5, 1.2, 0.9, 0.6}}
	flat := gpuModel{"mlp": {1, 1, 1, 1}}
	mixed := gpuModel{"mlp": {1, 1.8, 2.4, 2.6, 2.7, 2.75}, "big": {1, 1, 1, 1, 1}}
	tests := []struct {
		name, desc string
		model      gpuModel
		runs       []gpuRun
		noise      float64
		levels     []string // each decision "shape from→to", in order
		settles    map[string]int
		vsOne      float64 // at least this times one run per GPU's steps/s
		vsBest     float64 // at least this times the best fixed density's
	}{
		{
			name:    "saturates",
			desc:    "throughput that saturates: one more run per GPU while it pays more than the margin, then it stays",
			model:   saturating,
			runs:    trainings(200, "mlp", 3000, 10),
			levels:  []string{"mlp 1→2", "mlp 2→3", "mlp 3→4", "mlp 4→5", "mlp 5→5"},
			settles: map[string]int{"mlp": 5},
			vsOne:   2, vsBest: 0.95,
		},
		{
			name:    "contention",
			desc:    "throughput that falls with contention past 2 runs: it tries 3, and steps back to 2",
			model:   contention,
			runs:    trainings(200, "mlp", 3000, 10),
			levels:  []string{"mlp 1→2", "mlp 2→3", "mlp 3→2"},
			settles: map[string]int{"mlp": 2},
			vsOne:   1.3, vsBest: 0.95,
		},
		{
			name:    "flat",
			desc:    "a run that fills the GPU alone: 2 runs make no more progress than 1, and it keeps 1 per GPU",
			model:   flat,
			runs:    trainings(60, "mlp", 3000, 10),
			levels:  []string{"mlp 1→2", "mlp 2→1"},
			settles: map[string]int{"mlp": 1},
			vsOne:   0.9, vsBest: 0.9,
		},
		{
			name:  "noisy",
			desc:  "the saturating GPU, runs of one shape whose speeds alone differ up to 2× (batch sizes), each second's progress off by up to ±30%: it still climbs to the knee, and never swings",
			model: saturating,
			runs: func() []gpuRun {
				rng := rand.New(rand.NewPCG(3, 4))
				runs := trainings(200, "mlp", 3000, 10)
				for i := range runs {
					runs[i].rate = 6 + 8*rng.Float64()
				}
				return runs
			}(),
			noise: 0.3,
			vsOne: 2, vsBest: 0.95,
		},
		{
			name:    "short-runs",
			desc:    "runs of 30 s alone, read once or twice each: the means of many runs' readings decide",
			model:   saturating,
			runs:    trainings(600, "mlp", 300, 10),
			settles: map[string]int{"mlp": 5},
			vsOne:   2, vsBest: 0.9,
		},
		{
			name:  "two-shapes",
			desc:  "small trainings and a big one that fills a GPU alone, in one sweep, sharing GPUs: each shape finds its own density",
			model: mixed,
			runs: func() []gpuRun {
				var runs []gpuRun
				for i := range 150 {
					runs = append(runs, gpuRun{shape: "mlp", steps: 3000, rate: 10})
					if i%3 == 0 {
						runs = append(runs, gpuRun{shape: "big", steps: 3000, rate: 10})
					}
				}
				return runs
			}(),
			settles: map[string]int{"big": 1},
			vsOne:   1.5,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := simulateGPU(t, cfg, tc.model, tc.runs, tc.noise)
			var levels []string
			for _, c := range got.changes {
				levels = append(levels, fmt.Sprintf("%s %d→%d", c.Shape, c.From, c.To))
			}
			if tc.levels != nil && strings.Join(levels, ", ") != strings.Join(tc.levels, ", ") {
				t.Errorf("%s\ndecisions %q, want %q", tc.desc, levels, tc.levels)
			}
			if tc.noise > 0 && len(levels) > 6 {
				t.Errorf("%s\n%d decisions %q: it swings", tc.desc, len(levels), levels)
			}
			for shape, want := range tc.settles {
				if got.lastLevel[shape] != want {
					t.Errorf("%s\n%s settles at %d runs per GPU, want %d (decisions %q)", tc.desc, shape, got.lastLevel[shape], want, levels)
				}
			}
			one := fixed(t, cfg, tc.model, tc.runs, 1)
			best := one
			for k := 2; k <= pack.AutoRunsPerGPU; k++ {
				if f := fixed(t, cfg, tc.model, tc.runs, k); f.rate > best.rate {
					best = f
				}
			}
			t.Logf("decisions %q; auto %.1f steps/s in %v (%d decisions), one per GPU %.1f, best fixed %.1f: %.2f× one, %.2f× best",
				levels, got.rate, got.makespan, len(got.changes), one.rate, best.rate, got.rate/one.rate, got.rate/best.rate)
			if r := got.rate / one.rate; r < tc.vsOne {
				t.Errorf("%s\nauto makes %.2f× the progress of one run per GPU, want at least %.2f×", tc.desc, r, tc.vsOne)
			}
			if r := got.rate / best.rate; tc.vsBest > 0 && r < tc.vsBest {
				t.Errorf("%s\nauto makes %.2f× the progress of the best fixed density, want at least %.2f×", tc.desc, r, tc.vsBest)
			}
		})
	}
}

// TestDensityMemory: gpus=auto never goes past what the GPU's memory
// holds: a learned gpu_mem=auto bounds it, and a cuda-oom at k runs on a
// GPU steps the shape back below k for good.
func TestDensityMemory(t *testing.T) {
	oneGPU := node(1, 16, 1, 40<<30, 0)
	model := gpuModel{"mlp": {1, 1.9, 2.8, 3.6, 4.4, 5.2}}
	t.Run("learned", func(t *testing.T) {
		// A 40 GiB GPU holds 38 GiB of runs; the shape measured 10 GiB and
		// claims 11: at most 3.
		cfg := Config{Topology: oneGPU, Request: pack.Request{AutoShare: true, AutoGPUMem: true, CPUs: 1}, Measured: true, DensityWindow: 20 * sec}
		s, err := New(cfg, simStart)
		if err != nil {
			t.Fatal(err)
		}
		k, _ := s.Add(cfg.Request, "mlp")
		plan, _ := s.Next(simStart)
		if len(plan.Starts) != 1 || plan.Starts[0].Place.Request.GPUShare != pack.GPUWhole {
			t.Fatalf("starts %+v: want the probe alone on the GPU", plan.Starts)
		}
		s.Started(k, 1, simStart)
		s.Settled(k, 1, 10*gib)
		if d := s.densityOf("mlp"); d.most != 3 {
			t.Errorf("most %d runs per GPU, want 3 (38 GiB / 11 GiB)", d.most)
		}
		if got := s.Assignment(k).Request.String(); got != "gpus=1 gpu_mem=11GiB cpus=1" {
			t.Errorf("the probe holds %s, want gpus=1 gpu_mem=11GiB cpus=1", got)
		}
	})
	t.Run("cuda-oom", func(t *testing.T) {
		cfg := Config{Topology: oneGPU, Request: pack.Request{AutoShare: true, CPUs: 1}, DensityWindow: 20 * sec, Retries: 1}
		runs := trainings(40, "mlp", 2000, 10)
		for i := range runs {
			runs[i].oomAbove = 3
		}
		got := simulateGPU(t, cfg, model, runs, 0)
		if got.lastLevel["mlp"] != 3 {
			t.Errorf("settles at %d runs per GPU, want 3 (4 ran out of memory)", got.lastLevel["mlp"])
		}
		last := got.changes[len(got.changes)-1]
		if last.From != 4 || last.To != 3 || !last.Final || !strings.Contains(last.Why, "cuda-oom") {
			t.Errorf("last decision %+v: want 4→3 for good, for cuda-oom", last)
		}
		t.Logf("%d failures, %d starts", got.failures, got.starts)
	})
}

// TestDensityReadings: a reading needs the window with no run joining or
// leaving its GPU; a run counts on its GPU from its first report.
func TestDensityReadings(t *testing.T) {
	cfg := Config{Topology: node(1, 16, 1, 80<<30, 0), Request: pack.Request{AutoShare: true, CPUs: 1}, DensityWindow: 10 * sec}
	s, err := New(cfg, simStart)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := s.Add(cfg.Request, "mlp")
	s.Add(cfg.Request, "mlp")
	s.Next(simStart)
	at := func(sec int) time.Time { return simStart.Add(time.Duration(sec) * time.Second) }
	for i := 0; i <= 9; i++ {
		s.Progress(a, float64(10*i), at(i))
	}
	if n := len(s.dens["mlp"].at[1]); n != 0 {
		t.Fatalf("%d readings after 9 s of a 10 s window, want none", n)
	}
	s.Progress(a, 100, at(10))
	if rs := s.dens["mlp"].at[1]; len(rs) != 1 || math.Abs(rs[0].rate-10) > 1e-9 {
		t.Fatalf("readings %+v, want one of 10 steps/s", rs)
	}
	if plan, _ := s.Next(at(10)); len(plan.Densities) != 0 {
		t.Fatalf("densities %+v after one reading: want none before four", plan.Densities)
	}
	for i := 11; i <= 40; i++ {
		s.Progress(a, float64(10*i), at(i))
	}
	plan, _ := s.Next(at(40))
	if len(plan.Densities) != 1 || plan.Densities[0].To != 2 {
		t.Fatalf("densities %+v: want 1→2", plan.Densities)
	}
	if len(plan.Starts) != 1 {
		t.Fatalf("starts %+v: want a second run beside the first, whose claim shrank to half", plan.Starts)
	}
	b := plan.Starts[0].Key
	// The newcomer has not reported yet: a's window goes on at 1 run.
	s.Progress(a, 450, at(45))
	// Its first report: both start over at 2 runs.
	s.Progress(b, 1, at(46))
	s.Progress(a, 460, at(46))
	s.Progress(a, 500, at(55))
	if n := len(s.dens["mlp"].at[2]); n != 0 {
		t.Fatalf("%d readings at 2 runs 9 s after the newcomer's first report, want none", n)
	}
	s.Progress(a, 510, at(56))
	if rs := s.dens["mlp"].at[2]; len(rs) != 1 || math.Abs(rs[0].rate-5) > 1e-9 {
		t.Fatalf("readings at 2 runs %+v, want one of 5 steps/s", rs)
	}
	// a was read alone at 10 steps/s and beside b at 5: one pair, half the speed.
	if p := s.dens["mlp"].pairs[[2]int{1, 2}]; p == nil || p.n != 1 || math.Abs(math.Exp(p.logs)-0.5) > 1e-9 {
		t.Fatalf("pair 1→2 %+v: want one, of ratio 0.5", p)
	}
}

// TestSlowdowns: each run's own slowdowns, joined through the numbers of
// runs they were read with, give the speed with each number relative to
// another, by least squares, though no run was read with both.
func TestSlowdowns(t *testing.T) {
	d := &density{pairs: map[[2]int]*pairSum{}}
	// Runs at 0.9 of their speed with 2 runs, then at 0.8 of that with 3;
	// two runs read with 1 and 3 say 0.7, a little off the chain's 0.72.
	d.pair(1, 2, 10, 9)
	d.pair(2, 1, 18, 20) // another run, read with 2 and then alone
	d.pair(2, 3, 9, 7.2)
	d.pair(1, 3, 10, 7)
	d.pair(1, 3, 20, 14)
	x, touch := d.slowdowns(2)
	if touch[3] != 3 || touch[2] != 3 || touch[1] != 4 {
		t.Errorf("pairs touching 1, 2, 3: %d, %d, %d; want 4, 3, 3", touch[1], touch[2], touch[3])
	}
	if x[2] != 0 {
		t.Errorf("x[2] = %v: the speed with 2 is what the others are against", x[2])
	}
	if got := math.Exp(x[3]); got < 0.78 || got > 0.8 {
		t.Errorf("speed with 3 / with 2 = %.3f, want about 0.79 (0.8 directly, 0.7/0.9 through 1)", got)
	}
	if got := math.Exp(x[1]); got < 1.1 || got > 1.12 {
		t.Errorf("speed with 1 / with 2 = %.3f, want about 1.11", got)
	}
	// A number no pair joins to the rest is left out.
	d.pair(5, 6, 1, 1)
	if x, _ := d.slowdowns(2); len(x) != 3 {
		t.Errorf("joined %v, want 1, 2 and 3 only", x)
	}
}

// TestDensityResumes: a resumed sweep starts each shape where an earlier
// session's last decision left it (State.Densities, by the shape written
// with spaces): three runs share the GPU at once, and a final level is
// not explored again.
func TestDensityResumes(t *testing.T) {
	shape := Shape([]string{"python", "train.py", "--seed=1"})
	cfg := Config{Topology: node(1, 16, 1, 80<<30, 0), Request: pack.Request{AutoShare: true, CPUs: 1}, DensityWindow: 10 * sec}
	s, err := New(cfg, simStart)
	if err != nil {
		t.Fatal(err)
	}
	s.Resume(State{Densities: map[string]DensityStart{"python train.py --seed=#": {Level: 3, Final: true}}})
	for range 4 {
		s.Add(cfg.Request, shape)
	}
	plan, _ := s.Next(simStart)
	var got []string
	for _, st := range plan.Starts {
		got = append(got, place(st.Place))
	}
	if want := strings.Repeat("GPU-0 [gpus=0.333 cpus=1] ", 3); strings.Join(got, " ")+" " != want {
		t.Errorf("starts %q, want three runs of a third of the GPU", got)
	}
	for i := range 100 {
		for k := range Key(3) {
			s.Progress(k, float64(10*i), simStart.Add(time.Duration(i)*time.Second))
		}
	}
	if plan, _ := s.Next(simStart.Add(100 * time.Second)); len(plan.Densities) != 0 {
		t.Errorf("decisions %+v: a final level is not explored again", plan.Densities)
	}
}

// TestDensityReportOrder: runs that report at one instant give the same
// windows whatever order they report in, also at the instant a newcomer
// first reports (found by ExampleScheduler_Progress, whose runs report in
// map order: its decisions moved by a second from one run to the next).
func TestDensityReportOrder(t *testing.T) {
	at := func(sec int) time.Time { return simStart.Add(time.Duration(sec) * time.Second) }
	windows := func(newcomerFirst bool) (window, window) {
		cfg := Config{Topology: node(1, 16, 1, 80<<30, 0), Request: pack.Request{AutoShare: true, CPUs: 1}, DensityWindow: 10 * sec}
		s, err := New(cfg, simStart)
		if err != nil {
			t.Fatal(err)
		}
		s.Resume(State{Densities: map[string]DensityStart{"mlp": {Level: 2}}})
		a, _ := s.Add(cfg.Request, "mlp")
		b, _ := s.Add(cfg.Request, "mlp")
		if plan, _ := s.Next(simStart); len(plan.Starts) != 2 {
			t.Fatalf("starts %+v: want both runs on the GPU at 2 runs per GPU", plan.Starts)
		}
		s.Progress(a, 0, at(0))
		s.Progress(a, 10, at(1))
		if newcomerFirst {
			s.Progress(b, 1, at(2))
			s.Progress(a, 20, at(2))
		} else {
			s.Progress(a, 20, at(2))
			s.Progress(b, 1, at(2))
		}
		return s.placed[a].win, s.placed[b].win
	}
	a1, b1 := windows(true)
	a2, b2 := windows(false)
	if a1.from != a2.from || a1.runs != a2.runs || b1.from != b2.from || b1.runs != b2.runs {
		t.Fatalf("windows differ with the order of reports at one instant: a %+v / %+v, b %+v / %+v", a1, a2, b1, b2)
	}
	if a1.runs != 2 || !a1.from.t.Equal(at(2)) {
		t.Fatalf("a's window %+v: want it from 2 s, at 2 runs", a1)
	}
}
