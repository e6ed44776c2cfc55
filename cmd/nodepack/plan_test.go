package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/resources"
	"github.com/spf13/pflag"
)

func readPlan(t *testing.T, stdout string) planDoc {
	t.Helper()
	var doc planDoc
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	if doc.Schema != "nodepack.plan/v1" {
		t.Fatalf("schema %q", doc.Schema)
	}
	return doc
}

// checkSlots checks the placement promises against the inventory: no CPU
// twice, whole cores (both hyperthreads of a core together), and, where
// wantLocal, every CPU on the NUMA node of the slot's GPU.
func checkSlots(t *testing.T, node resources.Node, doc planDoc, wantLocal bool) {
	t.Helper()
	cpuOf := map[int]resources.CPU{}
	threadsOf := map[[2]int]int{}
	for _, c := range node.CPUs {
		cpuOf[c.ID] = c
		threadsOf[[2]int{c.Socket, c.Core}]++
	}
	gpuNUMA := map[string]int{}
	for _, g := range node.GPUs {
		gpuNUMA[g.UUID] = g.NUMA
	}
	owner := map[int]int{}
	for _, s := range doc.Slots {
		perCore := map[[2]int]int{}
		for _, id := range s.CPUs {
			if prev, ok := owner[id]; ok {
				t.Errorf("cpu %d in slots %d and %d", id, prev, s.Slot)
			}
			owner[id] = s.Slot
			c := cpuOf[id]
			perCore[[2]int{c.Socket, c.Core}]++
			if wantLocal && c.NUMA != gpuNUMA[s.GPUs[0].UUID] {
				t.Errorf("slot %d: cpu %d on NUMA node %d, its GPU on %d", s.Slot, id, c.NUMA, gpuNUMA[s.GPUs[0].UUID])
			}
		}
		for core, n := range perCore {
			if n != threadsOf[core] {
				t.Errorf("slot %d: core %v split: %d of %d threads", s.Slot, core, n, threadsOf[core])
			}
		}
	}
}

// TestPlanDGX is the promise: 16 slots at 2 runs per GPU, whole
// cores local to each GPU's NUMA node, no CPU twice.
func TestPlanDGX(t *testing.T) {
	tests := []struct {
		description string
		inventory   string
		args        []string
		wantLocal   bool
	}{
		{"one GPU per NUMA node, default CPUs", "8gpu-8numa.json", nil, true},
		{"DGX A100 GPU pairs, 8 CPUs each fit the local cores", "dgx-a100.json", []string{"--cpus-per-run", "8"}, true},
		{"DGX A100 GPU pairs, default CPUs: all used, whole cores", "dgx-a100.json", nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			file := "../../examples/inventories/" + tc.inventory
			node, err := resources.ReadInventory(file)
			if err != nil {
				t.Fatal(err)
			}
			args := append([]string{"plan", "--inventory", file, "--parallel", "16", "--runs-per-gpu", "2", "--json"}, tc.args...)
			code, stdout, stderr := runCLI(t, args...)
			if code != exitOK {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			doc := readPlan(t, stdout)
			if len(doc.Slots) != 16 {
				t.Fatalf("%d slots, want 16", len(doc.Slots))
			}
			perGPU := map[string]int{}
			for _, s := range doc.Slots {
				if len(s.GPUs) != 1 || !s.SharedGPUs {
					t.Errorf("slot %d: gpus %v shared %v; want one shared GPU", s.Slot, s.GPUs, s.SharedGPUs)
				}
				perGPU[s.GPUs[0].UUID]++
			}
			for uuid, n := range perGPU {
				if n != 2 {
					t.Errorf("%s has %d runs, want 2", uuid, n)
				}
			}
			checkSlots(t, node, doc, tc.wantLocal)
			if !tc.wantLocal && len(doc.Idle.CPUs) != 0 {
				t.Errorf("idle cpus %v, want all used", doc.Idle.CPUs)
			}
			// The same inputs always give the same placement.
			if _, again, _ := runCLI(t, args...); again != stdout {
				t.Errorf("second plan differs")
			}
		})
	}
}

func TestPlanErrors(t *testing.T) {
	dgx := "../../examples/inventories/dgx-a100.json"
	tests := []struct {
		description string
		args        []string
		want        string
	}{
		{"parallel not a multiple of the GPUs", []string{"--inventory", dgx, "--parallel", "12"}, "use --parallel 8, or --runs-per-gpu 2 with --parallel 16"},
		{"too many CPUs per run", []string{"--inventory", dgx, "--parallel", "8", "--cpus-per-run", "64"}, "--cpus-per-run"},
		{"bad inventory", []string{"--inventory", "nope.json"}, "nope.json"},
		{"bad flag value", []string{"--parallel", "many"}, "invalid argument"},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, append([]string{"plan"}, tc.args...)...)
			if code != exitUsage || stdout != "" || !strings.Contains(stderr, tc.want) || strings.Count(stderr, "\n") != 1 {
				t.Errorf("exit %d, stdout %q, stderr %q; want 2 and one line containing %q", code, stdout, stderr, tc.want)
			}
		})
	}
}

// TestPlanSharesCPUsOnSmallNodes: more runs than CPUs on this machine is
// a warning, not an error.
func TestPlanSharesCPUsOnSmallNodes(t *testing.T) {
	code, stdout, stderr := runCLI(t, "plan", "--gpus", "none", "--cpus", "0", "--parallel", "3", "--json")
	if code != exitOK || !strings.Contains(stderr, "share") {
		t.Fatalf("exit %d stderr %q", code, stderr)
	}
	doc := readPlan(t, stdout)
	if len(doc.Slots) != 3 || !doc.Slots[0].SharedCPUs || len(doc.Warnings) != 1 {
		t.Errorf("slots %+v warnings %q", doc.Slots, doc.Warnings)
	}
}

func TestPlanTable(t *testing.T) {
	code, stdout, _ := runCLI(t, "plan", "--inventory", "../../examples/inventories/dgx-a100.json", "--gpus", "0-3", "--parallel", "2", "--gpus-per-run", "2")
	if code != exitOK {
		t.Fatal(code)
	}
	for _, want := range []string{"SLOT", "0:GPU-1a2b3c00", "2 slots; each run: 2 GPUs", "idle:"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("table lacks %q:\n%s", want, stdout)
		}
	}
}

// TestOptionFlagsCoverPackOptions: every field of pack.Options that a
// flag gives has its flag in optionFlags, so that a *pack.FitError or a
// plan warning naming it reaches the terminal as the flag the user typed;
// a field added to pack.Options without a flag here fails this test.
func TestOptionFlagsCoverPackOptions(t *testing.T) {
	fs := pflag.NewFlagSet("plan", pflag.ContinueOnError)
	var o packOptions
	o.AddFlags(fs)
	typ := reflect.TypeFor[pack.Options]()
	for i := range typ.NumField() {
		name := typ.Field(i).Name
		if name == "Runs" || name == "AutoGPUMem" { // no flag; AutoGPUMem is GPUMem "auto"
			continue
		}
		flag, ok := optionFlags[name]
		if !ok {
			t.Errorf("pack.Options.%s has no flag in optionFlags", name)
			continue
		}
		if fs.Lookup(strings.TrimPrefix(flag, "--")) == nil {
			t.Errorf("optionFlags[%q] = %s, which packOptions does not bind", name, flag)
		}
	}
	for field := range optionFlags {
		if _, ok := typ.FieldByName(field); !ok {
			t.Errorf("optionFlags names %s, which pack.Options does not have", field)
		}
	}
}

// TestPlanMemorySharersGetTheirPartOfCPUs: runs that share a GPU by
// gpu_mem alone (a task file's #nodepack line, no cpus) get CPUs in
// proportion to their part of the GPU's memory, as --gpu-mem-per-run's
// runs do; before, they kept a whole GPU's 32 CPUs, and on a real H100
// node two such runs never ran at once.
func TestPlanMemorySharersGetTheirPartOfCPUs(t *testing.T) {
	tasks := filepath.Join(t.TempDir(), "tasks.txt")
	if err := os.WriteFile(tasks, []byte("#nodepack gpu_mem=10GiB\necho a\necho b\n#nodepack gpu_mem=auto\necho c\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI(t, "plan", "--inventory", "../../examples/inventories/dgx-a100.json", tasks)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	// 80 GB A100s, 76 GiB of each shareable, 32 CPUs per GPU: 10GiB is 4.
	for _, want := range []string{"2  gpu_mem=10GiB cpus=4 ", "1  gpu_mem=auto cpus=8 "} {
		if !strings.Contains(stdout, want) {
			t.Errorf("plan lacks %q:\n%s", want, stdout)
		}
	}
}

// TestPlanFirstWave: with runs that ask for different things, plan shows
// them tallied by request and where the first wave goes, as run's
// scheduler places it, instead of the default request's slot table.
func TestPlanFirstWave(t *testing.T) {
	args := []string{"plan", "--inventory", "../../examples/inventories/dgx-a100.json", "../../examples/tasks/mixed.txt"}
	code, stdout, stderr := runCLI(t, args...)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"runs: 8, by request\n", "first wave: 8 runs start at once", "RUN  ", "gpus=2 cpus=64", "(shared)", "NUMA: the NUMA node"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("plan lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "SLOT") {
		t.Errorf("plan shows the default request's slots above runs that ask for others:\n%s", stdout)
	}
	code, stdout, _ = runCLI(t, append([]string{"plan", "--json"}, args[1:]...)...)
	var doc planDoc
	if err := json.Unmarshal([]byte(stdout), &doc); code != exitOK || err != nil || doc.Runs == nil {
		t.Fatalf("plan --json: exit %d, %v", code, err)
	}
	gpus := map[string]int{}
	for _, w := range doc.Runs.FirstWave {
		for _, g := range w.GPUs {
			gpus[g]++
		}
		if w.Request == "gpus=2 cpus=64" && len(w.GPUs) != 2 {
			t.Errorf("a 2-GPU run got %v", w.GPUs)
		}
		// What examples/tasks/mixed.txt says of them: two GPUs of one NUMA
		// node (0 and 1, 2 and 3 on a DGX A100), 64 CPUs that span two.
		if w.Request == "gpus=2 cpus=64" && len(w.GPUs) == 2 {
			pair := strings.SplitN(w.GPUs[0], ":", 2)[0] + "," + strings.SplitN(w.GPUs[1], ":", 2)[0]
			if pair != "0,1" && pair != "2,3" && pair != "4,5" && pair != "6,7" || w.NUMA != -1 {
				t.Errorf("a 2-GPU run got GPUs %s (NUMA %d): want a pair of one NUMA node, its CPUs spanning two", pair, w.NUMA)
			}
		}
	}
	if len(doc.Runs.FirstWave) != 8 || len(gpus) != 7 {
		t.Errorf("first wave %+v: want 8 runs on 7 GPUs (the four quarter-GPU runs share one)", doc.Runs.FirstWave)
	}
}
