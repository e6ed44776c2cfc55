package main

import (
	"slices"
	"testing"
	"time"

	"github.com/nodepack/nodepack/runner/ledger"
)

// TestStaggerSeedWorkflow is clusterduck's seed workflow as its users
// type it, on four fake GPUs: --parallel 4 --stagger D over a Hydra sweep
// of four runs that each end before the stagger is up. The ledger shows
// four runs on four GPUs, the k-th started at least k staggers after the
// sweep (its header, written before the first start).
func TestStaggerSeedWorkflow(t *testing.T) {
	fourGPUNode(t) // four fake GPUs, or skip
	out := t.TempDir() + "/out"
	const stagger = 300 * time.Millisecond
	code, _, stderr := runCLI(t, "run", "-q", "-o", out, "--parallel", "4", "--stagger", stagger.String(),
		"--sweep", "--", "true", "model=convnet,transformer", "+iteration=range(2)")
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	log, err := ledger.ReadFile(out + "/ledger.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var starts []*ledger.Record
	for _, run := range log.Runs {
		starts = append(starts, run.Started)
	}
	if len(starts) != 4 {
		t.Fatalf("%d runs started, want 4", len(starts))
	}
	slices.SortFunc(starts, func(a, b *ledger.Record) int { return a.Index - b.Index })
	gpus := map[string]bool{}
	for k, r := range starts {
		if len(r.GPUs) != 1 || gpus[r.GPUs[0]] {
			t.Errorf("run %d (%s) got GPUs %v; want one GPU no other run had", k, r.Origin, r.GPUs)
		}
		if len(r.GPUs) > 0 {
			gpus[r.GPUs[0]] = true
		}
		if d := r.Time.Sub(log.Header().Time); d < time.Duration(k)*stagger {
			t.Errorf("run %d started %v after the sweep, want at least %v", k, d, time.Duration(k)*stagger)
		}
	}
}
