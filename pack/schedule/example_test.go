package schedule_test

import (
	"fmt"
	"time"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/pack/schedule"
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
