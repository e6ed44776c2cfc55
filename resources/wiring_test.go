//go:build cgo && linux

package resources_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"

	"github.com/nodepack/nodepack"
	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/resources"
	"github.com/nodepack/nodepack/runner"
	"github.com/nodepack/nodepack/runner/execute"
	"github.com/nodepack/nodepack/runner/run"
	"github.com/nodepack/nodepack/runner/sweep"
)

// TestWiredNodeLearnsGPUMemory is the embedder's one call, nodepack.Run,
// on go-nvml's DGX A100 mock narrowed to GPU 0 (40 GiB; its local CPUs
// those of this machine among 0-15 and 128-143), where every run's
// processes use 6 GiB of it: three gpu_mem=auto runs, of which the first
// has the GPU alone and is measured by the sampler the call wired, and the
// next ones share the GPU by what it used plus a margin (6.6 GiB), the
// second starting while the first still runs (the first waits for it). Without the wiring (no
// sampler) gpu_mem=auto cannot even be asked for.
func TestWiredNodeLearnsGPUMemory(t *testing.T) {
	const used = 6 << 30
	var watched atomic.Int32 // GPUs the fault watcher registered for
	server := resources.MockDGX()
	for _, d := range server.Devices {
		d := d.(*dgxa100.Device)
		uuid := d.UUID
		d.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
			return runsOn(uuid, used), nvml.SUCCESS
		}
		d.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{Gpu: 50}, nvml.SUCCESS }
		d.GetSupportedEventTypesFunc = func() (uint64, nvml.Return) { return nvml.EventTypeXidCriticalError, nvml.SUCCESS }
		d.RegisterEventsFunc = func(uint64, nvml.EventSet) nvml.Return { watched.Add(1); return nvml.SUCCESS }
	}
	// The fault watcher's event set: no fault comes.
	server.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) {
		return &mock.EventSet{
			WaitFunc: func(timeout uint32) (nvml.EventData, nvml.Return) {
				time.Sleep(time.Duration(timeout) * time.Millisecond / 10)
				return nvml.EventData{}, nvml.ERROR_TIMEOUT
			},
			FreeFunc: func() nvml.Return { return nvml.SUCCESS },
		}, nvml.SUCCESS
	}
	defer resources.UseNVML(server)()
	// The mock, not this machine's CUDA_VISIBLE_DEVICES or batch job, says
	// which GPUs there are.
	noEnv := func(string) (string, bool) { return "", false }
	node, err := resources.Detect(t.Context(), resources.Options{GPUs: "0", Getenv: noEnv})
	if err != nil || len(node.GPUs) != 1 {
		t.Fatalf("detect: %v, %d GPUs", err, len(node.GPUs))
	}
	dir := t.TempDir()
	tasks := filepath.Join(dir, "tasks.txt")
	// Every run waits for GO, which the test makes once the second run
	// has started (or gives up after a minute): it holds its GPU until
	// the others have joined it, whatever the load on the machine.
	goFile := filepath.Join(dir, "GO")
	wait := "for i in $(seq 600); do [ -e " + goFile + " ] && exit 0; sleep 0.1; done; exit 1 #"
	if err := os.WriteFile(tasks, []byte(wait+" 1\n"+wait+" 2\n"+wait+" 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	started := map[int]run.Event{}
	ended := map[int]run.Event{}
	opts := nodepack.Options{
		Options: runner.Options{
			Source: sweep.Spec{TaskFile: tasks},
			Output: filepath.Join(dir, "out"),
			Execute: execute.Options{
				Policy: execute.Policy{
					Request: pack.Request{AutoGPUMem: true},
				},
				Process: execute.Process{
					TempDir: dir,
				},
				Hooks: execute.Hooks{
					OnEvent: func(ev run.Event) {
						mu.Lock()
						defer mu.Unlock()
						if ev.Kind == run.Started {
							started[ev.Run.Index] = ev
							if ev.Run.Index == 1 {
								os.WriteFile(goFile, nil, 0o644)
							}
						} else {
							ended[ev.Run.Index] = ev
						}
					},
				},
			},
		},
		Node:           &node,
		SampleInterval: 200 * time.Millisecond,
	}
	o, err := nodepack.Run(t.Context(), opts)
	if err != nil || o.Summary.Succeeded != 3 {
		t.Fatalf("run: %v, %+v", err, o.Summary)
	}
	if r := started[0].Place.Request; r.GPUShare != pack.GPUWhole || r.GPUMem != 0 {
		t.Errorf("the first run asked for %v; want the GPU alone, to be measured", r)
	}
	learned := uint64(used + used/10)
	for _, i := range []int{1, 2} {
		if r := started[i].Place.Request; r.GPUMem != learned {
			t.Errorf("run %d asked for %v; want gpu_mem=%s, what the first used and a tenth", i, r, pack.FormatSize(learned))
		}
	}
	if !started[1].Start.Before(ended[0].End) {
		t.Errorf("run 1 started at %v, after run 0 ended at %v: the GPU was not shared", started[1].Start, ended[0].End)
	}
	if watched.Load() != 1 {
		t.Errorf("the fault watcher registered for %d GPUs; want the one of the node", watched.Load())
	}
	if peak := ended[0].Usage.Sampled.GPUs; len(peak) != 1 || peak[0].ProcessPeakMemoryBytes != used {
		t.Errorf("run 0's measured GPU use %+v; want %d bytes", peak, used)
	}
	for i := range 3 {
		if g := ended[i].Usage.Sampled.GPUs; len(g) != 1 || !(g[0].EnergyJoules > 0) {
			t.Errorf("run %d's share of its GPU's energy: %+v; want some", i, g)
		}
	}
}

// runsOn lists the processes of nodepack runs (NODEPACK_RUN_ID in their
// environment; bash, the runs' own process) whose CUDA_VISIBLE_DEVICES is uuid, each using bytes of
// GPU memory: what NVML reports for the processes on a GPU.
func runsOn(uuid string, bytes uint64) []nvml.ProcessInfo {
	var procs []nvml.ProcessInfo
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !bytesHas(env, "NODEPACK_RUN_ID=") || !bytesHas(env, "CUDA_VISIBLE_DEVICES="+uuid+"\x00") {
			continue
		}
		if comm, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "comm")); string(comm) != "bash\n" {
			continue // the run's own process, not the sleeps it starts
		}
		procs = append(procs, nvml.ProcessInfo{Pid: uint32(pid), UsedGpuMemory: bytes})
	}
	return procs
}

func bytesHas(b []byte, s string) bool { return bytes.Contains(b, []byte(s)) }
