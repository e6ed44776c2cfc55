package execute

import (
	"testing"
	"time"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/runner/failure"
	"github.com/nodepack/nodepack/runner/schedule"
)

// TestPolicyKnowsFailureClasses: the scheduler names the failure classes
// its retry rules treat apart as strings of its own (it imports only pack);
// this holds them to runner/failure's, so that a class renamed there
// cannot silently lose its rule.
func TestPolicyKnowsFailureClasses(t *testing.T) {
	topo := pack.Topology{
		CPUs: []pack.CPU{{ID: 0}, {ID: 1, Core: 1}},
		GPUs: []pack.GPU{{UUID: "GPU-a", NUMA: -1, MemoryBytes: 40 << 30}, {Index: 1, UUID: "GPU-b", NUMA: -1, MemoryBytes: 40 << 30}},
	}
	shared := pack.Request{GPUMem: 10 << 30}
	tests := []struct {
		description string
		class       failure.Class
		req         pack.Request
		fault       bool
		retry, anew bool
	}{
		{"exit: the general budget, retried in place", failure.Exit, pack.Request{GPUs: 1}, false, true, false},
		{"host-oom: no retry without a budget of its own", failure.HostOOM, pack.Request{GPUs: 1}, false, false, false},
		{"not-found: no retry without a budget of its own", failure.NotFound, pack.Request{GPUs: 1}, false, false, false},
		{"cuda-oom: retried anew with more GPU memory", failure.CUDAOOM, shared, false, true, true},
		{"gpu-mem: retried anew with more GPU memory", failure.GPUMem, shared, false, true, true},
		{"gpu-error on a faulted GPU: retried anew elsewhere", failure.GPUError, pack.Request{GPUs: 1}, true, true, true},
	}
	start := time.Now()
	for _, tc := range tests {
		s, err := schedule.New(schedule.Config{Topology: topo, Retries: 1, Measured: true}, start)
		if err != nil {
			t.Fatal(err)
		}
		k, err := s.Add(tc.req, "")
		if err != nil {
			t.Fatal(err)
		}
		plan, _ := s.Next(start)
		if len(plan.Starts) != 1 {
			t.Fatalf("%s: starts %+v", tc.description, plan.Starts)
		}
		s.Started(k, 1, start)
		if tc.fault {
			s.Fault(plan.Starts[0].Place.GPUs[0].UUID)
		}
		after := s.Ended(k, schedule.End{Outcome: schedule.Failed, Class: tc.class, Attempt: 1}, start)
		if after.Retry != tc.retry || after.Anew != tc.anew {
			t.Errorf("%s: retry %v anew %v, want %v %v", tc.description, after.Retry, after.Anew, tc.retry, tc.anew)
		}
	}
	if _, err := schedule.New(schedule.Config{Parallel: 1, Retry: map[failure.Class]int{failure.Interrupted: 1}}, start); err == nil {
		t.Error("a retry budget for interrupted attempts was taken")
	}
}
