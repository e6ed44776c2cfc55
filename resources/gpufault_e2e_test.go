//go:build cgo && linux

package resources

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/resources/usage"
	"github.com/nodepack/nodepack/runner/execute"
	"github.com/nodepack/nodepack/runner/failure"
	"github.com/nodepack/nodepack/runner/run"
)

// TestGPUFaultEndToEnd: go-nvml's DGX A100 mock reports an Xid 79 on GPU 2
// while eight 1-GPU runs hold the eight GPUs. The watcher passes it to the
// runner, which takes GPU 2 out: the run on it fails (as a CUDA program on
// a failed GPU does) and is gpu-error, runs again on another GPU, and no
// later run starts on GPU 2. (This test reaches up into the runner, as no
// package of nodepack's may: the two halves meet only in the CLI.)
func TestGPUFaultEndToEnd(t *testing.T) {
	server := dgxa100.New()
	for _, d := range server.Devices {
		d := d.(*dgxa100.Device)
		d.GetSupportedEventTypesFunc = func() (uint64, nvml.Return) {
			return nvml.EventTypeXidCriticalError | nvml.EventTypeDoubleBitEccError, nvml.SUCCESS
		}
		d.RegisterEventsFunc = func(uint64, nvml.EventSet) nvml.Return { return nvml.SUCCESS }
	}
	events := make(chan nvml.EventData, 1)
	uuids := feedEvents(server, events, func() {})
	faults := watchGPUFaults(t.Context(), server, uuids)
	if faults == nil {
		t.Fatal("no watch")
	}
	cpus, err := affinityCPUs()
	if err != nil {
		t.Skip(err)
	}
	topo := pack.Topology{}
	for _, c := range cpus {
		topo.CPUs = append(topo.CPUs, pack.CPU{ID: c, Core: c})
	}
	for i, u := range uuids {
		topo.GPUs = append(topo.GPUs, pack.GPU{Index: i, UUID: u, NUMA: i / 4, MemoryBytes: 40 << 30})
	}
	bad := uuids[2]

	dir := t.TempDir()
	release := filepath.Join(dir, "release")
	line := `while [ ! -e ` + release + ` ]; do sleep 0.01; done; test "$CUDA_VISIBLE_DEVICES" != ` + bad + ` || { echo 'CUDA error: an illegal memory access was encountered' >&2; exit 1; }`
	var runs []run.Run
	for i := range 12 {
		runs = append(runs, run.Run{ID: "run" + string(rune('a'+i)), Args: []string{"bash", "-c", line}, Request: &pack.Request{GPUs: 1}})
	}
	var mu sync.Mutex
	started := 0
	var out time.Time // when GPU 2 went out
	var evs []run.Event
	opts := execute.Options{
		Policy: execute.Policy{
			Topology: topo,
			Parallel: 8,
		},
		Process: execute.Process{
			OutputDir: filepath.Join(dir, "out"),
			TempDir:   dir,
		},
		Hooks: execute.Hooks{
			GPUFaults: faults,
			OnGPUFault: func(f usage.GPUFault, none bool) {
				mu.Lock()
				out = time.Now()
				mu.Unlock()
				if f.UUID != bad || f.Reason != "Xid 79" || none {
					t.Errorf("fault %+v (none left: %v), want Xid 79 on %s", f, none, bad)
				}
				os.WriteFile(release, nil, 0o644) // the runs may end now
			},
			OnEvent: func(ev run.Event) {
				mu.Lock()
				defer mu.Unlock()
				evs = append(evs, ev)
				if ev.Kind == run.Started {
					if started++; started == 8 { // every GPU busy: GPU 2 fails
						events <- nvml.EventData{Device: server.Devices[2], EventType: nvml.EventTypeXidCriticalError, EventData: 79}
					}
				}
			},
		},
	}
	x, err := execute.Start(t.Context(), run.Runs(runs...), opts)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := x.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if sum.Succeeded != len(runs) || len(sum.GPUsOut) != 1 || sum.GPUsOut[0].UUID != bad {
		t.Errorf("summary: %d of %d succeeded, GPUs out %+v", sum.Succeeded, len(runs), sum.GPUsOut)
	}
	failed := 0
	for _, ev := range evs {
		on := ev.Place.GPUs[0].UUID
		switch {
		case ev.Kind == run.Finished && ev.Reason != run.OK:
			failed++
			if on != bad || ev.Class != failure.GPUError || !ev.Retry {
				t.Errorf("%s attempt %d failed on %s as %q (retry %v); want gpu-error on %s, retried", ev.Run.ID, ev.Attempt, on, ev.Class, ev.Retry, bad)
			}
		case ev.Kind == run.Started && on == bad && ev.Start.After(out):
			t.Errorf("%s attempt %d started on %s after it went out", ev.Run.ID, ev.Attempt, bad)
		}
	}
	if failed != 1 {
		t.Errorf("%d failed attempts, want the one on %s", failed, bad)
	}
}
