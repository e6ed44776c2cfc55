package resources

import (
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
)

func fakeGPUs(gpus ...GPU) func() ([]GPU, []string) {
	return func() ([]GPU, []string) { return gpus, nil }
}

func noDriver() ([]GPU, []string) {
	return nil, []string{"NVML not available (ERROR_LIBRARY_NOT_FOUND): no GPUs detected"}
}

func TestDetect(t *testing.T) {
	local := []GPU{
		{Index: 0, UUID: "GPU-aaaa", NUMA: -1, CPUs: []int{0, 1, 2, 3, 8, 9, 10, 11}},
		{Index: 1, UUID: "GPU-bbbb", NUMA: -1, CPUs: []int{4, 5, 6, 7, 12, 13, 14, 15}},
	}
	tests := []struct {
		description string
		opts        Options
		wantSource  string
		wantGPUs    []string
		wantCPUs    []int
		wantErr     string
	}{
		{
			description: "NVML GPUs, NUMA node taken from their local CPUs",
			opts:        Options{GPUProbe: fakeGPUs(local...)},
			wantSource:  sourceNVML, wantGPUs: []string{"GPU-aaaa", "GPU-bbbb"}, wantCPUs: seq(0, 15),
		},
		{
			description: "CUDA_VISIBLE_DEVICES narrows NVML's view",
			opts:        Options{GPUProbe: fakeGPUs(local...), Getenv: envOf(map[string]string{"CUDA_VISIBLE_DEVICES": "1"})},
			wantSource:  sourceNVML, wantGPUs: []string{"GPU-bbbb"}, wantCPUs: seq(0, 15),
		},
		{
			description: "no driver, CUDA_VISIBLE_DEVICES set: opaque GPUs",
			opts:        Options{GPUProbe: noDriver, Getenv: envOf(map[string]string{"CUDA_VISIBLE_DEVICES": "2,3"})},
			wantSource:  sourceEnv, wantGPUs: []string{"2", "3"}, wantCPUs: seq(0, 15),
		},
		{
			description: "no driver, empty CUDA_VISIBLE_DEVICES: no GPUs",
			opts:        Options{GPUProbe: noDriver, Getenv: envOf(map[string]string{"CUDA_VISIBLE_DEVICES": ""})},
			wantSource:  sourceEnv, wantCPUs: seq(0, 15),
		},
		{
			description: "no driver, nothing set",
			opts:        Options{GPUProbe: noDriver},
			wantSource:  sourceNone, wantCPUs: seq(0, 15),
		},
		{
			description: "--gpus none never asks the driver",
			opts:        Options{GPUs: "none", GPUProbe: func() ([]GPU, []string) { panic("probed") }},
			wantSource:  sourceFlag, wantCPUs: seq(0, 15),
		},
		{
			description: "--gpus and --cpus select",
			opts:        Options{GPUs: "GPU-b", CPUs: "4-7", GPUProbe: fakeGPUs(local...)},
			wantSource:  sourceFlag, wantGPUs: []string{"GPU-bbbb"}, wantCPUs: seq(4, 7),
		},
		{
			description: "bad --cpus is an error naming the entry",
			opts:        Options{CPUs: "0-3,zz", GPUProbe: noDriver},
			wantErr:     `"zz"`,
		},
		{
			description: "--cpus outside the affinity mask",
			opts:        Options{CPUs: "16", GPUProbe: noDriver},
			wantErr:     "cpu 16 is not allowed here",
		},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			o := tc.opts
			o.Root = dualSocketHT.tree()
			o.AllowedCPUs = func() ([]int, error) { return seq(0, 15), nil }
			if o.Getenv == nil {
				o.Getenv = envOf(nil)
			}
			n, err := Detect(t.Context(), o)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Detect error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if n.GPUSource != tc.wantSource || !reflect.DeepEqual(uuids(n.GPUs), tc.wantGPUs) || !reflect.DeepEqual(n.CPUIDs(), tc.wantCPUs) {
				t.Errorf("Detect = source %q gpus %v cpus %v; want %q %v %v", n.GPUSource, uuids(n.GPUs), n.CPUIDs(), tc.wantSource, tc.wantGPUs, tc.wantCPUs)
			}
			for _, g := range n.GPUs {
				if tc.wantSource == sourceNVML && g.NUMA != int(g.UUID[4]-'a') {
					t.Errorf("gpu %s: numa %d, want it from its local cpus", g.UUID, g.NUMA)
				}
			}
			if n.Schema != schema || n.Scheduler.Kind != "none" {
				t.Errorf("node %+v", n)
			}
		})
	}
}

// TestDetectRealSystem runs detection on this machine: whatever it finds,
// the allowed CPUs are exactly the affinity mask and a missing driver is
// not an error.
func TestDetectRealSystem(t *testing.T) {
	n, err := Detect(t.Context(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := affinityCPUs()
	if !reflect.DeepEqual(n.CPUIDs(), want) {
		t.Errorf("cpus %v, want the affinity mask %v", n.CPUIDs(), want)
	}
	if n.Memory.TotalBytes == 0 || n.Hostname == "" {
		t.Errorf("memory %d hostname %q", n.Memory.TotalBytes, n.Hostname)
	}
}

// TestGridEngineSlots: a Grid Engine job that may run on all 16 CPUs but
// was granted fewer slots uses that many, whole cores first (CPU i and
// i+8 are one core here), and says why; this host's line of PE_HOSTFILE
// counts over NSLOTS, the whole job's; --cpus and a binding to as many
// CPUs as slots are left alone.
func TestGridEngineSlots(t *testing.T) {
	sge := map[string]string{"SGE_ROOT": "/opt/sge", "JOB_ID": "9", "SGE_TASK_ID": "undefined"}
	with := func(kv ...string) map[string]string {
		m := maps.Clone(sge)
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	host, _ := os.Hostname()
	tests := []struct {
		description string
		env         map[string]string
		allowed     []int
		cpus        string // --cpus
		want        []int
		wantSource  string
	}{
		{"NSLOTS=1: one CPU", with("NSLOTS", "1"), seq(0, 15), "", []int{0}, sourceSlots},
		{"NSLOTS=3: a whole core, then half of the next", with("NSLOTS", "3"), seq(0, 15), "", []int{0, 1, 8}, sourceSlots},
		{"this host's slots in PE_HOSTFILE, not the job's NSLOTS", with("NSLOTS", "6", "PE_HOSTFILE", "/spool/pe_hostfile"), seq(0, 15), "", []int{0, 1, 8, 9}, sourceSlots},
		{"as many slots as CPUs", with("NSLOTS", "16"), seq(0, 15), "", seq(0, 15), sourceAffinity},
		{"-binding linear:2: the mask already holds the slots", with("NSLOTS", "2"), []int{4, 12}, "", []int{4, 12}, sourceAffinity},
		{"--cpus wins", with("NSLOTS", "1"), seq(0, 15), "2-5", seq(2, 5), sourceFlag},
		{"not Grid Engine", map[string]string{"NSLOTS": "1"}, seq(0, 15), "", seq(0, 15), sourceAffinity},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			root := dualSocketHT.tree()
			root["spool/pe_hostfile"] = &fstest.MapFile{Data: []byte("other.cluster 2 all.q@other UNDEFINED\n" + host + ".cluster 4 all.q@" + host + " UNDEFINED\n")}
			n, err := Detect(t.Context(), Options{Root: root, Getenv: envOf(tc.env), CPUs: tc.cpus, GPUProbe: noDriver,
				AllowedCPUs: func() ([]int, error) { return tc.allowed, nil }})
			if err != nil {
				t.Fatal(err)
			}
			warned := slices.ContainsFunc(n.Warnings, func(w string) bool { return strings.Contains(w, "-binding linear:") })
			if !reflect.DeepEqual(n.CPUIDs(), tc.want) || n.CPUSource != tc.wantSource || warned != (tc.wantSource == sourceSlots) {
				t.Errorf("cpus %v from %s, warnings %q; want %v from %s", n.CPUIDs(), n.CPUSource, n.Warnings, tc.want, tc.wantSource)
			}
		})
	}
}
