package runner

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/resources/usage"
	"github.com/nodepack/nodepack/runner/execute"
	"github.com/nodepack/nodepack/runner/results"
	"github.com/nodepack/nodepack/runner/run"
	"github.com/nodepack/nodepack/runner/sweep"
)

// TestGPUFaultIsRecorded: a GPU taken out of use after a fault is in the
// ledger (gpu_out), in status, and said as it happens.
func TestGPUFaultIsRecorded(t *testing.T) {
	dir := t.TempDir()
	tasks := filepath.Join(dir, "tasks.txt")
	if err := os.WriteFile(tasks, []byte("true\ntrue\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	var mask unix.CPUSet
	if err := unix.SchedGetaffinity(0, &mask); err != nil {
		t.Skip(err)
	}
	cpu := 0
	for !mask.IsSet(cpu) {
		cpu++
	}
	topo := pack.Topology{CPUs: []pack.CPU{{ID: cpu}}, GPUs: []pack.GPU{{UUID: "GPU-a", NUMA: -1}, {UUID: "GPU-b", NUMA: -1}}}
	faults := make(chan usage.GPUFault, 1)
	var notes []string
	var mu sync.Mutex
	noted := make(chan struct{}, 1)
	opts := Options{Source: sweep.Spec{TaskFile: tasks}, Output: out, Plan: oneSlot,
		OnNote: func(line string) {
			mu.Lock()
			notes = append(notes, line)
			mu.Unlock()
			select {
			case noted <- struct{}{}:
			default:
			}
		},
		Execute: execute.Options{
			Policy: execute.Policy{
				Topology: topo,
				Request:  pack.Request{GPUs: 1},
				Parallel: 1,
			},
			Process: execute.Process{
				TempDir: dir,
			},
			Hooks: execute.Hooks{
				GPUFaults: faults,
				OnEvent: func(ev run.Event) {
					if ev.Kind == run.Started && ev.Run.Index == 0 {
						faults <- usage.GPUFault{UUID: "GPU-b", Reason: "Xid 79", Time: time.Now()}
					}
				},
			},
		}}
	sw, err := Prepare(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer sw.Close()
	session, err := sw.Start(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// The fault reaches the runner on its own goroutine: wait for its note.
	select {
	case <-noted:
	case <-time.After(time.Minute):
		t.Fatal("no note of the fault")
	}
	o, err := session.Wait()
	if err != nil || o.Summary.Succeeded != 2 || len(o.Summary.GPUsOut) != 1 {
		t.Fatalf("outcome %+v, %v", o.Summary, err)
	}
	st, err := results.ReadStatus(out, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(st.GPUsOut) != 1 || st.GPUsOut[0].UUID != "GPU-b" || st.GPUsOut[0].Reason != "Xid 79" {
		t.Errorf("status GPUs out %+v", st.GPUsOut)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(notes) != 1 || !strings.Contains(notes[0], "GPU GPU-b reported Xid 79: taken out of use") {
		t.Errorf("notes %q", notes)
	}
}
