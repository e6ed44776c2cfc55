package pack

import (
	"strings"
	"testing"
)

func TestParseRequest(t *testing.T) {
	base := Request{GPUs: 1, CPUs: 16}
	tests := []struct {
		description string
		text        string
		base        Request
		want        Request
		wantErr     string
	}{
		{"empty keeps the base", "", base, base, ""},
		{"two GPUs: CPUs follow the GPUs", "gpus=2", base, Request{GPUs: 2, CPUs: 32}, ""},
		{"two GPUs and CPUs given", "gpus=2 cpus=8", base, Request{GPUs: 2, CPUs: 8}, ""},
		{"a quarter of a GPU, as a decimal", "gpus=0.25", base, Request{GPUShare: 250, CPUs: 4}, ""},
		{"a quarter of a GPU, as a fraction", "gpus=1/4", base, Request{GPUShare: 250, CPUs: 4}, ""},
		{"a third rounds down, so three fit", "gpus=1/3", base, Request{GPUShare: 333, CPUs: 5}, ""},
		{"a share from a share", "gpus=0.5", Request{GPUShare: 250, CPUs: 4}, Request{GPUShare: 500, CPUs: 8}, ""},
		{"gpus=1.0 is one GPU", "gpus=1.0", Request{GPUShare: 500, CPUs: 8}, Request{GPUs: 1, CPUs: 16}, ""},
		{"CPU-only keeps the CPUs", "gpus=0", base, Request{CPUs: 16}, ""},
		{"gpu_mem alone shares a GPU by memory", "gpu_mem=12GiB cpus=4", base, Request{GPUMem: 12 << 30, CPUs: 4}, ""},
		{"gpu_mem alone drops the base's share", "gpu_mem=12GiB", Request{GPUShare: 250, CPUs: 4}, Request{GPUMem: 12 << 30, CPUs: 4}, ""},
		{"gpu_mem with a share", "gpus=0.5 gpu_mem=12GiB", base, Request{GPUShare: 500, GPUMem: 12 << 30, CPUs: 8}, ""},
		{"gpu_mem with GPUs of its own", "gpus=2 gpu_mem=40GiB", base, Request{GPUs: 2, GPUMem: 40 << 30, CPUs: 32}, ""},
		{"gpus=0 drops the base's gpu_mem", "gpus=0", Request{GPUMem: 1 << 30, CPUs: 2}, Request{CPUs: 2}, ""},
		{"gpus=2 drops the base's auto", "gpus=2", Request{AutoGPUMem: true, CPUs: 4}, Request{GPUs: 2, CPUs: 4}, ""},
		{"auto gets a quarter of a GPU's CPUs", "gpu_mem=auto", base, Request{AutoGPUMem: true, CPUs: 4}, ""},
		{"auto with CPUs given", "gpu_mem=auto cpus=16", base, Request{AutoGPUMem: true, CPUs: 16}, ""},
		{"commas and host memory", "gpus=1,cpus=2,mem=32G", base, Request{GPUs: 1, CPUs: 2, Mem: 32 << 30}, ""},
		{"a shared CPU", "cpus=0", base, Request{GPUs: 1}, ""},
		{"no base CPUs to scale", "gpus=2", Request{GPUs: 1}, Request{GPUs: 2}, ""},
		{"CPU-only base: nothing to scale from", "gpus=2", Request{CPUs: 3}, Request{GPUs: 2, CPUs: 3}, ""},
		{"at least one CPU", "gpus=0.01", base, Request{GPUShare: 10, CPUs: 1}, ""},
		{"a key twice, even with one value", "gpus=1 gpus=1", base, base, "gpus given twice (gpus=1, then gpus=1): give it once"},
		{"a key twice, the last does not win", "gpus=1,cpus=2,gpus=2", base, base, "gpus given twice (gpus=1, then gpus=2): give it once"},
		{"unknown key", "gpu=2", base, base, `unknown key "gpu": want gpus, gpu_mem, cpus or mem`},
		{"no value", "gpus=", base, base, `"gpus=": want key=value (gpus, gpu_mem, cpus, mem)`},
		{"a word alone", "big", base, base, `"big": want key=value (gpus, gpu_mem, cpus, mem)`},
		{"more than one GPU as a fraction", "gpus=1.5", base, base, "gpus=1.5: a share is of one GPU: more than 1 must be a whole number of GPUs"},
		{"negative GPUs", "gpus=-1", base, base, "gpus=-1: must not be negative"},
		{"zero share", "gpus=0.0", base, base, "gpus=0.0: want more than 0"},
		{"division by zero", "gpus=1/0", base, base, "gpus=1/0: want a number of GPUs or a fraction of one, such as 0.25 or 1/4"},
		{"NaN", "gpus=NaN", base, base, "gpus=NaN: want more than 0"},
		{"bad size", "gpu_mem=lots", base, base, `gpu_mem=lots: "lots": want a size such as 12GiB, 512MiB or 16G`},
		{"negative CPUs", "cpus=-2", base, base, "cpus=-2: want a whole number, 0 for a shared CPU"},
		{"auto and GPUs of its own", "gpus=2 gpu_mem=auto", base, base, "gpus=2 and a share of one GPU exclude each other"},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			got, err := ParseRequest(tc.text, tc.base, 0)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("ParseRequest(%q) error = %v, want %q", tc.text, err, tc.wantErr)
				}
				if got != tc.base {
					t.Errorf("ParseRequest(%q) on error = %+v, want the base", tc.text, got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseRequest(%q) = %+v, %v; want %+v", tc.text, got, err, tc.want)
			}
			// String writes what ParseRequest reads back.
			again, err := ParseRequest(got.String(), Request{}, 0)
			if err != nil || again != got {
				t.Errorf("ParseRequest(%q) = %+v, %v; want %+v", got.String(), again, err, got)
			}
		})
	}
}

// TestParseRequestFollowsMemory: a run that shares a GPU by gpu_mem alone
// and does not say cpus gets the CPUs of the part of a GPU its memory is,
// as --gpu-mem-per-run's runs do, so that runs sharing a GPU by memory are
// not held apart by CPUs they never asked for.
func TestParseRequestFollowsMemory(t *testing.T) {
	const gib = 1 << 30
	base := Request{GPUs: 1, CPUs: 16}
	tests := []struct {
		description string
		text        string
		base        Request
		gpuMemory   uint64
		want        Request
	}{
		{"10GiB of 76GiB: 2 of 16 CPUs", "gpu_mem=10GiB", base, 76 * gib, Request{GPUMem: 10 * gib, CPUs: 2}},
		{"half the memory: half the CPUs", "gpu_mem=38GiB", base, 76 * gib, Request{GPUMem: 38 * gib, CPUs: 8}},
		{"a sliver: at least one CPU", "gpu_mem=512MiB", base, 76 * gib, Request{GPUMem: 512 << 20, CPUs: 1}},
		{"more than a GPU has: no more than its CPUs", "gpu_mem=100GiB", base, 76 * gib, Request{GPUMem: 100 * gib, CPUs: 16}},
		{"CPUs given win", "gpu_mem=10GiB cpus=6", base, 76 * gib, Request{GPUMem: 10 * gib, CPUs: 6}},
		{"memory unknown: the base's CPUs", "gpu_mem=10GiB", base, 0, Request{GPUMem: 10 * gib, CPUs: 16}},
		{"from two GPUs' CPUs, per GPU", "gpu_mem=19GiB", Request{GPUs: 2, CPUs: 32}, 76 * gib, Request{GPUMem: 19 * gib, CPUs: 4}},
		{"from a share's CPUs, per GPU", "gpu_mem=19GiB", Request{GPUShare: 250, CPUs: 4}, 76 * gib, Request{GPUMem: 19 * gib, CPUs: 4}},
		{"from a memory base: by the two memories", "gpu_mem=20GiB", Request{GPUMem: 10 * gib, CPUs: 2}, 76 * gib, Request{GPUMem: 20 * gib, CPUs: 4}},
		{"a shared CPU stays shared", "gpu_mem=10GiB", Request{GPUs: 1}, 76 * gib, Request{GPUMem: 10 * gib}},
		{"a share with memory follows the share", "gpus=0.5 gpu_mem=10GiB", base, 76 * gib, Request{GPUShare: 500, GPUMem: 10 * gib, CPUs: 8}},
		{"auto: a quarter, whatever the memory", "gpu_mem=auto", base, 76 * gib, Request{AutoGPUMem: true, CPUs: 4}},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			got, err := ParseRequest(tc.text, tc.base, tc.gpuMemory)
			if err != nil || got != tc.want {
				t.Fatalf("ParseRequest(%q, %+v, %s) = %+v, %v; want %+v", tc.text, tc.base, FormatSize(tc.gpuMemory), got, err, tc.want)
			}
		})
	}
}

func TestTopologyGPUMemory(t *testing.T) {
	const gib = 1 << 30
	topo := Topology{GPUs: []GPU{{UUID: "GPU-a", MemoryBytes: 80 * gib}, {UUID: "GPU-b", MemoryBytes: 40 * gib}, {UUID: "GPU-c"}}}
	if got, want := topo.GPUMemory(), uint64(38*gib); got != want {
		t.Errorf("GPUMemory = %s, want %s: the smallest GPU that reports memory, less 5%%", FormatSize(got), FormatSize(want))
	}
	if got := (Topology{GPUs: []GPU{{UUID: "GPU-c"}}}).GPUMemory(); got != 0 {
		t.Errorf("GPUMemory with no memory known = %d, want 0", got)
	}
}

func TestRequestStringAndClass(t *testing.T) {
	tests := []struct {
		request   Request
		wantText  string
		wantClass string
	}{
		{Request{CPUs: 4}, "gpus=0 cpus=4", "CPU only"},
		{Request{GPUs: 1, CPUs: 16}, "gpus=1 cpus=16", "1 GPU"},
		{Request{GPUs: 2, CPUs: 32, Mem: 64 << 30}, "gpus=2 cpus=32 mem=64GiB", "2 GPUs"},
		{Request{GPUShare: 250, CPUs: 4}, "gpus=0.25 cpus=4", "0.25 GPU"},
		{Request{GPUShare: 333}, "gpus=0.333 cpus=0", "0.333 GPU"},
		{Request{GPUMem: 12 << 30, CPUs: 2}, "gpu_mem=12GiB cpus=2", "12GiB of a GPU"},
		{Request{GPUShare: 500, GPUMem: 1536 << 20, CPUs: 2}, "gpus=0.5 gpu_mem=1.5GiB cpus=2", "0.5 GPU, 1.5GiB"},
		{Request{AutoGPUMem: true, CPUs: 2}, "gpu_mem=auto cpus=2", "measured memory of a GPU"},
	}
	for _, tc := range tests {
		if got := tc.request.String(); got != tc.wantText {
			t.Errorf("%+v.String() = %q, want %q", tc.request, got, tc.wantText)
		}
		if got := tc.request.Class(); got != tc.wantClass {
			t.Errorf("%+v.Class() = %q, want %q", tc.request, got, tc.wantClass)
		}
	}
}

func TestSizes(t *testing.T) {
	for _, tc := range []struct {
		text string
		want uint64
	}{
		{"12GiB", 12 << 30}, {"12G", 12 << 30}, {"12GB", 12e9}, {"1.5GiB", 3 << 29},
		{"512M", 512 << 20}, {"100", 100}, {"7B", 7}, {" 2TiB ", 2 << 40}, {"0", 0},
	} {
		got, err := ParseSize(tc.text)
		if err != nil || got != tc.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tc.text, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "GiB", "-1G", "1e30T", "NaN", "twelve"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) accepted", bad)
		}
	}
	for _, tc := range []struct {
		bytes uint64
		want  string
	}{
		{12 << 30, "12GiB"}, {3 << 29, "1.5GiB"}, {300 << 20, "300MiB"}, {1000, "1000"}, {1 << 40, "1TiB"},
	} {
		if got := FormatSize(tc.bytes); got != tc.want {
			t.Errorf("FormatSize(%d) = %q, want %q", tc.bytes, got, tc.want)
		}
	}
	if h := GPUMemHeadroom(80 << 30); h != 4<<30 {
		t.Errorf("GPUMemHeadroom(80GiB) = %s, want 4GiB", FormatSize(h))
	}
	if h := GPUMemHeadroom(1 << 30); h != 256<<20 {
		t.Errorf("GPUMemHeadroom(1GiB) = %s, want 256MiB", FormatSize(h))
	}
}

// FuzzParseRequest: whatever the text, ParseRequest does not panic, and
// what it accepts is valid and reads back the same through String.
func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{"gpus=2 cpus=16", "gpus=0.25", "gpu_mem=12GiB,cpus=4", "gpus=1/3 mem=1.5G", "gpu_mem=auto", "cpus=0", "gpus=1e-9",
		"gpus=1 gpus=2", "cpus=4,mem=1G,cpus=4", "gpu_mem=auto gpu_mem=2G"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		r, err := ParseRequest(text, Request{GPUs: 1, CPUs: 8}, 0)
		keys := map[string]bool{}
		for _, w := range strings.FieldsFunc(text, func(c rune) bool { return c == ' ' || c == '\t' || c == ',' }) {
			k, _, _ := strings.Cut(w, "=")
			if keys[k] && err == nil {
				t.Fatalf("ParseRequest(%q) = %+v: key %s given twice, and accepted", text, r, k)
			}
			keys[k] = true
		}
		if err != nil {
			return
		}
		if err := r.Validate(); err != nil {
			t.Fatalf("ParseRequest(%q) = %+v, which is invalid: %v", text, r, err)
		}
		again, err := ParseRequest(r.String(), Request{}, 0)
		if err != nil || again != r {
			t.Fatalf("ParseRequest(%q) = %+v; its String %q reads back as %+v, %v", text, r, r.String(), again, err)
		}
	})
}

func TestMoreGPUMemory(t *testing.T) {
	const gib = 1 << 30
	for _, tc := range []struct {
		desc string
		in   Request
		gpu  uint64
		want Request
	}{
		{"memory grows by half", Request{GPUMem: 12 * gib, CPUs: 4}, 80 * gib, Request{GPUMem: 18 * gib, CPUs: 4}},
		{"a share with memory grows its memory", Request{GPUShare: 250, GPUMem: 8 * gib}, 80 * gib, Request{GPUShare: 250, GPUMem: 12 * gib}},
		{"past the headroom: a GPU of its own", Request{GPUMem: 60 * gib}, 80 * gib, Request{GPUs: 1}},
		{"exactly up to the headroom still shares", Request{GPUMem: 50 * gib}, 80 * gib, Request{GPUMem: 75 * gib}},
		{"a share without memory: a GPU of its own", Request{GPUShare: 500, CPUs: 8}, 80 * gib, Request{GPUs: 1, CPUs: 8}},
		{"unknown GPU memory: a GPU of its own", Request{GPUMem: gib}, 0, Request{GPUs: 1}},
		{"GPUs of its own stay", Request{GPUs: 2, GPUMem: 40 * gib}, 80 * gib, Request{GPUs: 2, GPUMem: 40 * gib}},
		{"CPU only stays", Request{CPUs: 2}, 80 * gib, Request{CPUs: 2}},
	} {
		if got := MoreGPUMemory(tc.in, tc.gpu); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.desc, got, tc.want)
		}
	}
}
