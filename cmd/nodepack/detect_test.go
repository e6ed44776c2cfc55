package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/nodepack/nodepack/resources"
)

// inventoryDoc is the part of detect --json these tests read.
type inventoryDoc struct {
	Schema    string `json:"schema"`
	CPUs      []struct{ ID, Core, Socket, NUMA int }
	GPUs      []struct{ UUID string }
	GPUSource string `json:"gpu_source"`
}

func TestDetectUnderTaskset(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("needs 2 CPUs")
	}
	if _, err := os.Stat("/usr/bin/taskset"); err != nil {
		t.Skip("no taskset")
	}
	cmd := nodepackCommand(t, []string{"taskset", "-c", "1"}, "detect", "--json")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("taskset -c 1 nodepack detect --json: %v", err)
	}
	var doc inventoryDoc
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if doc.Schema != "nodepack.node/v1" || len(doc.CPUs) != 1 || doc.CPUs[0].ID != 1 {
		t.Errorf("under taskset -c 1: schema %q, cpus %+v; want exactly cpu 1", doc.Schema, doc.CPUs)
	}
}

// gpuless makes this process's detection find no GPUs, on a GPU node too
// (an empty CUDA_VISIBLE_DEVICES hides them all, as CUDA does): there
// --gpus declares the GPUs it names, so the tests below read the same on
// any machine. Narrowing real GPUs by --gpus is tested in resources on
// the NVML mock.
func gpuless(t *testing.T) {
	t.Setenv("CUDA_VISIBLE_DEVICES", "")
}

func TestDetectTable(t *testing.T) {
	gpuless(t)
	code, stdout, stderr := runCLI(t, "detect", "--gpus", "GPU-aaaa,GPU-bbbb")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !regexp.MustCompile(`(?m)^gpus\s+2\s`).MatchString(stdout) {
		t.Errorf("table does not say 2 gpus:\n%s", stdout)
	}
	for _, want := range []string{"host", "cpus", "allowed:", "memory", "source: flag", "GPU-aaaa", "GPU-bbbb"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("table lacks %q:\n%s", want, stdout)
		}
	}
}

// TestInventoryRoundTrip: a saved inventory is reprinted unchanged.
func TestInventoryRoundTrip(t *testing.T) {
	gpuless(t)
	code, saved, stderr := runCLI(t, "detect", "--json", "--gpus", "0,1")
	if code != exitOK {
		t.Fatalf("detect --json: exit %d: %s", code, stderr)
	}
	file := filepath.Join(t.TempDir(), "node.json")
	if err := os.WriteFile(file, []byte(saved), 0o644); err != nil {
		t.Fatal(err)
	}
	code, again, stderr := runCLI(t, "detect", "--inventory", file, "--json")
	if code != exitOK || again != saved {
		t.Errorf("detect --inventory --json: exit %d (%s), reprint differs:\n%s\nsaved:\n%s", code, stderr, again, saved)
	}

	// A richer node, as a DGX would save it, round-trips too.
	var n resources.Node
	if err := json.Unmarshal([]byte(saved), &n); err != nil {
		t.Fatal(err)
	}
	n.GPUs[0].MIGEnabled, n.GPUs[0].MIG = true, []resources.MIG{{UUID: "MIG-1", MemoryBytes: 1 << 30}}
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.WriteJSON(f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	want, _ := os.ReadFile(file)
	if code, again, _ := runCLI(t, "detect", "--inventory", file, "--json"); code != exitOK || again != string(want) {
		t.Errorf("MIG node reprint differs:\n%s\nwant:\n%s", again, want)
	}
}

func TestDetectBadInput(t *testing.T) {
	gpuless(t)
	dir := t.TempDir()
	broken := filepath.Join(dir, "broken.json")
	os.WriteFile(broken, []byte("{\n \"schema\": \"nodepack.node/v1\",\n \"cpus\": [1,]\n}\n"), 0o644)
	tests := []struct {
		description string
		args        []string
		want        string
	}{
		{"bad gpu entry", []string{"--gpus", "0,banana"}, `bad entry "banana"`},
		{"bad cpu entry", []string{"--cpus", "0-1,x"}, `"x"`},
		{"cpu not allowed", []string{"--cpus", "4095"}, "cpu 4095 is not allowed here"},
		{"missing inventory", []string{"--inventory", filepath.Join(dir, "nope.json")}, "nope.json"},
		{"broken inventory names file, line and column", []string{"--inventory", broken}, "broken.json:3:"},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, append([]string{"detect"}, tc.args...)...)
			if code != exitUsage || stdout != "" || !strings.Contains(stderr, tc.want) || strings.Count(stderr, "\n") != 1 {
				t.Errorf("exit %d, stdout %q, stderr %q; want 2 and one line containing %q", code, stdout, stderr, tc.want)
			}
		})
	}
}
