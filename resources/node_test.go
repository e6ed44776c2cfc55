package resources

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodepack/nodepack/resources/batch"
)

// sampleNode has every kind of field filled in.
var sampleNode = Node{
	Hostname: "gpu017",
	CPUModel: "AMD EPYC 7742 64-Core Processor",
	CPUs:     []CPU{{ID: 0, Core: 0, Socket: 0, NUMA: 0}, {ID: 1, Core: 1, Socket: 0, NUMA: 0}, {ID: 64, Core: 0, Socket: 1, NUMA: 1}},
	GPUs: []GPU{
		{Index: 0, UUID: "GPU-aaaa", Name: "A100", MemoryBytes: 40 << 30, PCIBusID: "00000000:07:00.0", NUMA: 0, CPUs: []int{0, 1}},
		{Index: 1, UUID: "GPU-bbbb", Name: "A100", MemoryBytes: 40 << 30, PCIBusID: "00000000:0F:00.0", NUMA: 1, CPUs: []int{},
			MIGEnabled: true, MIG: []MIG{{UUID: "MIG-cccc", MemoryBytes: 5 << 30}}},
	},
	GPUSource: sourceNVML,
	Memory:    Memory{TotalBytes: 512 << 30, CgroupLimitBytes: 64 << 30},
	Scheduler: batch.Job{Kind: "slurm", JobID: "42", Array: &batch.Array{Index: 1, Min: 0, Max: 2, Step: 1, Count: 3},
		EndTime: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)},
	Warnings: []string{"something odd"},
}

func TestInventoryRoundTrip(t *testing.T) {
	var first bytes.Buffer
	if err := sampleNode.WriteJSON(&first); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{`"schema": "nodepack.node/v1"`, `"memory_bytes": 68719476736`, `"gpu_source": "nvml"`, `"mig"`, `"end_time": "2026-11-21T12:00:00Z"`} {
		if !strings.Contains(first.String(), name) {
			t.Errorf("document lacks %s:\n%s", name, first.String())
		}
	}
	path := filepath.Join(t.TempDir(), "node.json")
	if err := os.WriteFile(path, first.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	n, err := ReadInventory(path)
	if err != nil {
		t.Fatal(err)
	}
	var second bytes.Buffer
	if err := n.WriteJSON(&second); err != nil {
		t.Fatal(err)
	}
	if first.String() != second.String() {
		t.Errorf("round trip changed the document:\n%s\nthen\n%s", first.String(), second.String())
	}
}

func TestParseInventoryErrors(t *testing.T) {
	tests := []struct {
		description string
		doc         string
		want        string
	}{
		{"syntax error names line and column", "{\n  \"schema\": \"nodepack.node/v1\",\n  \"cpus\": [,]\n}", "node.json:3:12"},
		{"wrong type names line", "{\n  \"schema\": \"nodepack.node/v1\",\n  \"cpus\": 7\n}", "node.json:3:"},
		{"unknown field", `{"schema":"nodepack.node/v1","cpu":[]}`, `unknown field "cpu"`},
		{"other schema", `{"schema":"nodepack.plan/v1"}`, `schema "nodepack.plan/v1"`},
		{"duplicate cpu", `{"schema":"nodepack.node/v1","cpus":[{"id":1},{"id":1}]}`, "cpu 1 listed twice"},
		{"gpu cpu outside node", `{"schema":"nodepack.node/v1","cpus":[{"id":1}],"gpus":[{"index":0,"uuid":"GPU-a","cpus":[2]}]}`, "cpu 2 is not among"},
		{"duplicate gpu", `{"schema":"nodepack.node/v1","gpus":[{"uuid":"GPU-a"},{"index":1,"uuid":"GPU-a"}]}`, "GPU-a listed twice"},
		{"trailing data", `{"schema":"nodepack.node/v1"} {}`, "trailing data"},
		{"empty file", ``, "node.json"},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			_, err := parseInventory([]byte(tc.doc), "node.json")
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "node.json") {
				t.Errorf("ParseInventory error = %v, want one starting with the file and containing %q", err, tc.want)
			}
		})
	}
}

func FuzzParseInventory(f *testing.F) {
	var buf bytes.Buffer
	sampleNode.WriteJSON(&buf)
	f.Add(buf.Bytes())
	f.Add([]byte(`{"schema":"nodepack.node/v1","cpus":[{"id":0}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		n, err := parseInventory(data, "fuzz.json")
		if err != nil {
			return
		}
		// Whatever parses must reprint to a document that parses to the same bytes.
		var a, b bytes.Buffer
		if err := n.WriteJSON(&a); err != nil {
			t.Fatal(err)
		}
		m, err := parseInventory(a.Bytes(), "again.json")
		if err != nil {
			t.Fatalf("reprinted document does not parse: %v\n%s", err, a.String())
		}
		m.WriteJSON(&b)
		if a.String() != b.String() {
			t.Fatalf("not stable:\n%s\n%s", a.String(), b.String())
		}
	})
}

func TestTopology(t *testing.T) {
	topo := sampleNode.Topology()
	if len(topo.CPUs) != 3 || topo.CPUs[2].ID != 64 || topo.CPUs[2].Socket != 1 || topo.CPUs[2].NUMA != 1 {
		t.Errorf("cpus %+v", topo.CPUs)
	}
	if len(topo.GPUs) != 2 {
		t.Fatalf("gpus %+v, want GPU-aaaa and the MIG device of GPU-bbbb", topo.GPUs)
	}
	if g := topo.GPUs[0]; g.UUID != "GPU-aaaa" || g.MIG || g.NUMA != 0 || len(g.LocalCPUs) != 2 || g.MemoryBytes != 40<<30 {
		t.Errorf("gpu 0 = %+v", g)
	}
	if g := topo.GPUs[1]; g.UUID != "MIG-cccc" || !g.MIG || g.Parent != "GPU-bbbb" || g.Index != 1 || g.MemoryBytes != 5<<30 {
		t.Errorf("gpu 1 = %+v", g)
	}
	if topo.Memory != 64<<30 {
		t.Errorf("memory for runs %d, want the cgroup limit, 64 GiB", topo.Memory)
	}
}

func TestWithin(t *testing.T) {
	here := Node{CPUs: []CPU{{ID: 0}, {ID: 1}}, GPUs: []GPU{{Index: 0, UUID: "GPU-a", MIG: []MIG{{UUID: "MIG-b"}}}}}
	tests := []struct {
		description string
		node        Node
		want        string // in the error; empty for none
	}{
		{"the same node", here, ""},
		{"fewer CPUs, a MIG device", Node{CPUs: []CPU{{ID: 1}}, GPUs: []GPU{{UUID: "MIG-b"}}}, ""},
		{"a CPU this process may not use", Node{CPUs: []CPU{{ID: 0}, {ID: 5}, {ID: 6}}}, "CPUs 5-6 are not among the CPUs this process may use here (0-1)"},
		{"another node's GPU", Node{CPUs: []CPU{{ID: 0}}, GPUs: []GPU{{Index: 3, UUID: "GPU-z"}}}, "GPU 3 (GPU-z) is not on this node, which shows 1 GPUs"},
	}
	for _, tc := range tests {
		err := tc.node.Within(here)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.description, err, tc.want)
		}
	}
}
