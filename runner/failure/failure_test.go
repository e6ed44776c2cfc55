package failure

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"unicode/utf8"
)

// The messages below are the frameworks' own formats, as their sources
// write them (named per case), with the numbers of one occurrence.
var logs = map[string]string{
	// PyTorch 2.x, c10/cuda/CUDACachingAllocator.cpp, through torch.OutOfMemoryError.
	"torch": `Traceback (most recent call last):
  File "train.py", line 12, in <module>
    x = torch.empty(1 << 40, device="cuda")
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 TiB. GPU 0 has a total capacity of 79.15 GiB of which 78.60 GiB is free. Including non-PyTorch memory, this process has 550.00 MiB memory in use.
`,
	// PyTorch 1.x: the same allocator, raised as RuntimeError.
	"torch1": "RuntimeError: CUDA out of memory. Tried to allocate 36.00 MiB (GPU 0; 7.93 GiB total capacity; 130.35 MiB already allocated)\n",
	// PyTorch's C10_CUDA_CHECK on cudaErrorMemoryAllocation.
	"cudart": "RuntimeError: CUDA error: out of memory\nCUDA kernel errors might be asynchronously reported at some other API call\n",
	// cuBLAS handle creation without memory, as PyTorch reports it.
	"cublas": "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`\n",
	// TensorFlow 2.x, bfc_allocator.cc through ResourceExhaustedError.
	"tf": "tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating tensor with shape[16384,16384] and type float on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc [Op:RandomStandardNormal]\n",
	// TensorFlow's stream executor on a failed cuMemAlloc.
	"tfdriver": "2026-11-24 10:00:00.000000: E tensorflow/compiler/xla/stream_executor/cuda/cuda_driver.cc:628] failed to alloc 17179869184 bytes on host: CUDA_ERROR_OUT_OF_MEMORY: out of memory\n",
	// JAX on GPU.
	"jax": "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 68719476736 bytes.\n",
	// cudaErrorIllegalAddress, as PyTorch reports it.
	"illegal": "RuntimeError: CUDA error: an illegal memory access was encountered\nCompile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n",
	// An assert in a kernel (an index out of range in an embedding).
	"assert": "../aten/src/ATen/native/cuda/Indexing.cu:1289: indexSelectLargeIndex: block: [0,0,0], thread: [0,0,0] Assertion `srcIndex < srcSelectDimSize` failed.\nRuntimeError: CUDA error: device-side assert triggered\n",
	// torch.distributed on an NCCL failure.
	"nccl": "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:219, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.18.1\n",
	// Python writing to a full disk.
	"disk": "OSError: [Errno 28] No space left on device: '/scratch/ckpt/epoch3.pt'\n",
	// A plain Python error: the user's to fix.
	"python": "Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n    import tourch\nModuleNotFoundError: No module named 'tourch'\n",
	// Not a GPU out-of-memory: a Linux tool's message about host memory.
	"malloc": "bash: fork: Cannot allocate memory\n",
}

func TestClassify(t *testing.T) {
	user, err := ParsePattern(`gpu-error=Xid \d+`)
	if err != nil {
		t.Fatal(err)
	}
	enoent := &os.PathError{Op: "fork/exec", Path: "/nope", Err: syscall.ENOENT}
	for _, tc := range []struct {
		desc     string
		outcome  Outcome
		log      string
		patterns []Pattern
		want     Class
	}{
		{"PyTorch 2 OOM", Outcome{ExitCode: 1}, logs["torch"], Builtin, CUDAOOM},
		{"PyTorch 1 OOM", Outcome{ExitCode: 1}, logs["torch1"], Builtin, CUDAOOM},
		{"CUDA runtime OOM", Outcome{ExitCode: 1}, logs["cudart"], Builtin, CUDAOOM},
		{"cuBLAS allocation", Outcome{ExitCode: 1}, logs["cublas"], Builtin, CUDAOOM},
		{"TensorFlow OOM", Outcome{ExitCode: 1}, logs["tf"], Builtin, CUDAOOM},
		{"TensorFlow driver OOM", Outcome{ExitCode: 134, Signal: "SIGABRT"}, logs["tfdriver"], Builtin, CUDAOOM},
		{"JAX OOM", Outcome{ExitCode: 1}, logs["jax"], Builtin, CUDAOOM},
		{"illegal address", Outcome{ExitCode: 1}, logs["illegal"], Builtin, GPUError},
		{"device-side assert", Outcome{ExitCode: 1}, logs["assert"], Builtin, GPUError},
		{"NCCL", Outcome{ExitCode: 1}, logs["nccl"], Builtin, GPUError},
		{"disk full", Outcome{ExitCode: 1}, logs["disk"], Builtin, DiskFull},
		{"a Python error", Outcome{ExitCode: 1}, logs["python"], Builtin, Exit},
		{"host memory is not GPU memory", Outcome{ExitCode: 254}, logs["malloc"], Builtin, Exit},
		{"exit code without log", Outcome{ExitCode: 3}, "", Builtin, Exit},
		{"signal", Outcome{ExitCode: 139, Signal: "SIGSEGV"}, "", Builtin, Signal},
		{"command not found", Outcome{ExitCode: 127}, "bash: line 1: trian.py: command not found\n", Builtin, NotFound},
		{"not executable", Outcome{ExitCode: 126}, "bash: ./run.sh: Permission denied\n", Builtin, NotFound},
		{"could not start", Outcome{ExitCode: -1, StartErr: enoent}, "", Builtin, NotFound},
		{"not in PATH", Outcome{ExitCode: -1, StartErr: &exec.Error{Name: "trian", Err: exec.ErrNotFound}}, "", Builtin, NotFound},
		{"could not start otherwise", Outcome{ExitCode: -1, StartErr: syscall.E2BIG}, "", Builtin, Exit},
		{"timeout wins over the log", Outcome{TimedOut: true, ExitCode: 143, Signal: "SIGTERM"}, logs["torch"], Builtin, Timeout},
		{"interrupted wins over all", Outcome{Interrupted: true, TimedOut: true, OOMKilled: true}, logs["torch"], Builtin, Interrupted},
		{"kernel OOM kill", Outcome{OOMKilled: true, ExitCode: 137, Signal: "SIGKILL"}, "", Builtin, HostOOM},
		{"stopped over its GPU memory, whatever its log says", Outcome{OverGPUMem: true, ExitCode: 137, Signal: "SIGKILL"}, logs["torch"], Builtin, GPUMem},
		{"a GPU fault reported by the driver", Outcome{GPUFault: true, ExitCode: 1}, logs["torch"], Builtin, GPUError},
		{"the user's pattern first", Outcome{ExitCode: 1}, "NVRM: Xid 79, GPU has fallen off the bus\n" + logs["torch"], append([]Pattern{user}, Builtin...), GPUError},
		{"built-in order: OOM before the GPU error it causes", Outcome{ExitCode: 1}, logs["illegal"] + logs["cudart"], Builtin, CUDAOOM},
		{"no patterns", Outcome{ExitCode: 1}, logs["torch"], nil, Exit},
	} {
		if got := Classify(tc.outcome, []byte(tc.log), tc.patterns); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.desc, got, tc.want)
		}
	}
}

func TestParsePattern(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    Class
		wantErr string
	}{
		{`cuda-oom=my allocator: no room`, CUDAOOM, ""},
		{`host-oom=std::bad_alloc`, HostOOM, ""},
		{`disk-full=quota exceeded`, DiskFull, ""},
		{`cuda-oom`, "", "want CLASS=REGEX"},
		{`cuda-oom=`, "", "want CLASS=REGEX"},
		{`oom=x`, "", `unknown failure class "oom"`},
		{`exit=x`, "", "exit is not read from a log"},
		{`gpu-mem=x`, "", "gpu-mem is not read from a log"},
		{`gpu-error=(`, "", "missing closing )"},
	} {
		p, err := ParsePattern(tc.in)
		switch {
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("ParsePattern(%q) = %v, want error with %q", tc.in, err, tc.wantErr)
		case tc.wantErr == "" && (err != nil || p.Class != tc.want):
			t.Errorf("ParsePattern(%q) = %v, %v; want class %s", tc.in, p.Class, err, tc.want)
		}
	}
}

func TestReadTailIsBounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stderr.log")
	var b strings.Builder
	for b.Len() < 3*tailBytes {
		b.WriteString("progress: step 12345 loss 0.1234\n")
	}
	b.WriteString(logs["torch"])
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	tail := ReadTail(filepath.Dir(path), filepath.Base(path), 0)
	if len(tail) > tailBytes || len(tail) < tailBytes-100 {
		t.Fatalf("tail of %d bytes, want at most %d and nearly that", len(tail), tailBytes)
	}
	if !strings.HasPrefix(string(tail), "progress: step") {
		t.Errorf("tail starts inside a line: %.40q", tail)
	}
	if Classify(Outcome{ExitCode: 1}, tail, Builtin) != CUDAOOM {
		t.Error("the message at the end of a long log is not found")
	}
	if ReadTail(t.TempDir(), "missing", 0) != nil || ReadTail(filepath.Dir(t.TempDir()), filepath.Base(t.TempDir()), 0) != nil {
		t.Error("a missing file or a directory has a tail")
	}
	// A later attempt's part of the log only.
	from := int64(b.Len() - len(logs["torch"]))
	if got := string(ReadTail(filepath.Dir(path), filepath.Base(path), from)); got != logs["torch"] {
		t.Errorf("tail from the attempt's start: %.60q", got)
	}
	if got := ReadTail(filepath.Dir(path), filepath.Base(path), int64(b.Len())); got != nil {
		t.Errorf("an attempt that wrote nothing has a tail %.40q", got)
	}
}

func TestLastLines(t *testing.T) {
	long := strings.Repeat("é", 300) // 600 bytes
	for _, tc := range []struct {
		desc string
		in   string
		want []string
	}{
		{"fewer lines than asked", "a\nb\n", []string{"a", "b"}},
		{"the last ones, blanks skipped", "1\n2\n\n3\n  \n4\n5\r\n\n", []string{"3", "4", "5"}},
		{"no newline at the end", "x\ny", []string{"x", "y"}},
		{"nothing", "", nil},
		{"a long line cut at a rune", long, []string{strings.Repeat("é", 99) + "…"}},
	} {
		got := LastLines([]byte(tc.in), 3, 201)
		if strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("%s: %q, want %q", tc.desc, got, tc.want)
		}
		for _, l := range got {
			if len(l) > 201 || !utf8.ValidString(l) {
				t.Errorf("%s: line %q too long or not UTF-8", tc.desc, l)
			}
		}
	}
}

func FuzzClassify(f *testing.F) {
	for _, l := range logs {
		f.Add([]byte(l), 1, "")
	}
	f.Add([]byte("x"), 137, "SIGKILL")
	f.Fuzz(func(t *testing.T, tail []byte, code int, sig string) {
		c := Classify(Outcome{ExitCode: code, Signal: sig}, tail, Builtin)
		if !c.Valid() || c == Interrupted || c == Timeout || c == HostOOM {
			t.Fatalf("class %q from a log and an exit", c)
		}
		for _, l := range LastLines(tail, 5, 200) {
			if len(l) > 200 {
				t.Fatalf("line of %d bytes", len(l))
			}
		}
	})
}
