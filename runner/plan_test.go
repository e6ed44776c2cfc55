package runner

import (
	"testing"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/runner/sweep"
)

// TestPlanRuns: a sweep built in Go, planned on a node of two GPUs and
// four cores: its runs tallied by request in the order they first
// appear, the first wave as the scheduler places it, and its shards.
func TestPlanRuns(t *testing.T) {
	topo := pack.Topology{
		CPUs: []pack.CPU{{ID: 0, Core: 0}, {ID: 1, Core: 1}, {ID: 2, Core: 2}, {ID: 3, Core: 3}},
		GPUs: []pack.GPU{{UUID: "GPU-a", Index: 0, NUMA: -1}, {UUID: "GPU-b", Index: 1, NUMA: -1}},
	}
	base := pack.Request{GPUs: 1, CPUs: 1}
	spec := sweep.Spec{Command: []string{"train"}, Runs: []sweep.Entry{
		{Params: map[string]any{"seed": 1}, Request: &pack.Request{GPUs: 2, CPUs: 2}},
		{Params: map[string]any{"seed": 2}},
		{Params: map[string]any{"seed": 3}},
	}}
	p, err := PlanRuns(spec, topo, base, 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	if p.Total != 3 || p.Shards != 2 || p.SlurmArray != "0-1" || len(p.Requests) != 2 ||
		p.Requests[0] != (RequestCount{Request: "gpus=2 cpus=2", Class: "2 GPUs", Runs: 1}) || p.Requests[1].Runs != 2 {
		t.Errorf("plan %+v, requests %+v", p, p.Requests)
	}
	// The 2-GPU run takes both GPUs; the others wait for it.
	if len(p.FirstWave) != 1 || p.FirstWave[0].Origin != "runs[0]" || len(p.FirstWave[0].GPUs) != 2 {
		t.Errorf("first wave %+v, want runs[0] alone on both GPUs", p.FirstWave)
	}
	huge := spec
	huge.Runs = []sweep.Entry{{Params: map[string]any{"seed": 1}, Request: &pack.Request{GPUs: 3}}}
	if _, err := PlanRuns(huge, topo, base, 0, 0); err == nil {
		t.Error("a run of 3 GPUs on a node of 2 planned")
	}
}
