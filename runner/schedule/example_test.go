package schedule_test

import (
	"fmt"
	"time"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/runner/schedule"
)

// Example drives the policy as package execute does, in virtual time:
// three one-GPU runs on a node with two GPUs and a stagger of a second.
// The caller adds runs, asks Next what to start, and reports each end;
// the scheduler decides, and says when to ask again.
func Example() {
	topo := pack.Topology{
		CPUs: []pack.CPU{{ID: 0}, {ID: 1, Core: 1}, {ID: 2, Core: 2}, {ID: 3, Core: 3}},
		GPUs: []pack.GPU{{Index: 0, UUID: "GPU-a", NUMA: -1}, {Index: 1, UUID: "GPU-b", NUMA: -1}},
	}
	req := pack.Request{GPUs: 1, CPUs: 2}
	start := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	s, err := schedule.New(schedule.Config{Topology: topo, Request: req, Stagger: time.Second}, start)
	if err != nil {
		fmt.Println(err)
		return
	}
	for range 3 {
		if _, err := s.Add(req, ""); err != nil {
			fmt.Println(err)
			return
		}
	}
	now := start
	for _, step := range []time.Duration{0, time.Second, 2 * time.Second} {
		now = start.Add(step)
		if step == 2*time.Second { // run 0 ends, and succeeded
			s.Ended(0, schedule.End{Outcome: schedule.Succeeded, Attempt: 1}, now)
			s.Release(0)
		}
		plan, _ := s.Next(now)
		for _, st := range plan.Starts {
			fmt.Printf("%v: start run %d in lane %d on %s\n", step, st.Key, st.Lane, st.Place.GPUs[0].UUID)
		}
		if !plan.Wake.IsZero() {
			fmt.Printf("%v: ask again at %v\n", step, plan.Wake.Sub(start))
		}
	}
	// Output:
	// 0s: start run 0 in lane 0 on GPU-a
	// 0s: ask again at 1s
	// 1s: start run 1 in lane 1 on GPU-b
	// 2s: start run 2 in lane 0 on GPU-a
}

// ExampleScheduler_Progress is the density rule (gpus=auto) in virtual
// time: four runs of one shape on one GPU, each reporting its step every
// second. Alone a run makes 10 steps a second; two together make 9 each,
// so the GPU makes 1.8× the progress with two; three make 5.5 each, less
// than two: the rule tries three, and steps back to two for good.
func ExampleScheduler_Progress() {
	topo := pack.Topology{
		CPUs: []pack.CPU{{ID: 0}, {ID: 1, Core: 1}, {ID: 2, Core: 2}, {ID: 3, Core: 3}},
		GPUs: []pack.GPU{{Index: 0, UUID: "GPU-a", NUMA: -1, MemoryBytes: 80 << 30}},
	}
	req := pack.Request{AutoShare: true, CPUs: 1}
	start := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	s, err := schedule.New(schedule.Config{Topology: topo, Request: req, DensityWindow: 5 * time.Second}, start)
	if err != nil {
		fmt.Println(err)
		return
	}
	for range 4 {
		s.Add(req, schedule.Shape([]string{"python", "train.py", "--seed=1"}))
	}
	steps := map[schedule.Key]float64{}
	for t := range 120 {
		now := start.Add(time.Duration(t) * time.Second)
		plan, _ := s.Next(now)
		for _, d := range plan.Densities {
			fmt.Printf("%ds: %d → %d runs per GPU (%s)\n", t, d.From, d.To, d.Why)
		}
		for _, st := range plan.Starts {
			fmt.Printf("%ds: start run %d, %s of %s\n", t, st.Key, st.Place.Request, st.Place.GPUs[0].UUID)
			steps[st.Key] = 0
		}
		speed := map[int]float64{1: 10, 2: 9, 3: 5.5}[len(steps)]
		for k := range steps {
			steps[k] += speed
			s.Progress(k, steps[k], now.Add(time.Second))
		}
	}
	// Output:
	// 0s: start run 0, gpus=1 cpus=1 of GPU-a
	// 21s: 1 → 2 runs per GPU (1 run: 10 steps/s)
	// 21s: start run 1, gpus=0.5 cpus=1 of GPU-a
	// 42s: 2 → 3 runs per GPU (2 runs: 1.80× the progress of 1: one more)
	// 42s: start run 2, gpus=0.333 cpus=1 of GPU-a
	// 48s: 3 → 2 runs per GPU (3 runs: 0.92× the progress of 2: one fewer)
}

// ExamplePruner_UsePrior: the forecast rule of a 10-step sweep learns from
// an earlier sweep of 20 steps (its steps mapped by fraction), but stops
// nothing by it until the sweep's own runs agree with it.
func ExamplePruner_UsePrior() {
	p, err := schedule.NewPruner(schedule.Prune{Metric: "loss", MaxStep: 10, Forecast: true})
	if err != nil {
		panic(err)
	}
	var earlier schedule.Prior // what --prune-prior reads of an earlier sweep's output
	for k := range 30 {
		var run schedule.PriorRun
		for s := 1.0; s <= 20; s++ {
			run.Points = append(run.Points, [2]float64{s, 0.1 + 0.01*float64(k) + 0.5/s})
		}
		run.Ended = true
		earlier.Runs = append(earlier.Runs, run)
	}
	uses, err := p.UsePrior([]schedule.Prior{earlier})
	fmt.Println(uses, err)
	for _, j := range p.Judge("first", 1, 2.0, nil) { // far worse than any run of the prior
		fmt.Printf("step %v: stop %v, by the prior %v\n", j.Step, j.Stop, j.Prior)
	}
	fmt.Println("in use:", p.Prior().On)
	// Output:
	// [{20 30 30}] <nil>
	// step 1: stop false, by the prior false
	// in use: false
}
