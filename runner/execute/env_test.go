package execute

import (
	"strings"
	"testing"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/runner/run"
)

var (
	gpuA = pack.GPU{Index: 0, UUID: "GPU-aaaa"}
	gpuB = pack.GPU{Index: 3, UUID: "GPU-bbbb"}
	migC = pack.GPU{Index: 5, UUID: "MIG-cccc", MIG: true}
)

// lookup returns the value os/exec would use: the last one for key.
func lookup(env []string, key string) (string, bool) {
	val, found := "", false
	for _, kv := range env {
		if k, v, _ := strings.Cut(kv, "="); k == key {
			val, found = v, true
		}
	}
	return val, found
}

func TestEnvBuild(t *testing.T) {
	type want map[string]string // "<unset>" means absent
	tests := []struct {
		name    string
		environ []string
		opts    Options
		run     run.Run
		lane    int
		place   pack.Assignment
		want    want
	}{
		{
			name:    "uuids and caps",
			environ: []string{"CUDA_VISIBLE_DEVICES=0,1", "GPU_DEVICE_ORDINAL=0,1", "ROCR_VISIBLE_DEVICES=0", "ZE_AFFINITY_MASK=0", "KMP_AFFINITY=x", "GOMP_CPU_AFFINITY=0-3", "SLURM_CPU_BIND=map_cpu:0", "SLURM_CPU_BIND_TYPE=map_cpu:", "SLURM_CPU_BIND_LIST=0x1", "HOME=/h"},
			lane:    1, place: pack.Assignment{GPUs: []pack.GPU{gpuA, gpuB}, CPUs: []int{4, 5, 6, 7, 9}},
			run: run.Run{ID: "abc", Index: 7},
			want: want{
				"CUDA_VISIBLE_DEVICES": "GPU-aaaa,GPU-bbbb", "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
				"GPU_DEVICE_ORDINAL": "<unset>", "ROCR_VISIBLE_DEVICES": "<unset>", "ZE_AFFINITY_MASK": "<unset>",
				"KMP_AFFINITY": "<unset>", "GOMP_CPU_AFFINITY": "<unset>", "SLURM_CPU_BIND": "<unset>", "SLURM_CPU_BIND_TYPE": "<unset>", "SLURM_CPU_BIND_LIST": "<unset>", "HOME": "/h",
				"OMP_NUM_THREADS": "5", "MKL_NUM_THREADS": "5", "PYTHON_CPU_COUNT": "5", "NUMEXPR_MAX_THREADS": "5",
				"TF_NUM_INTEROP_THREADS": "2", "OMP_THREAD_LIMIT": "<unset>", "GOMAXPROCS": "<unset>",
				"NODEPACK_RUN_ID": "abc", "NODEPACK_RUN_INDEX": "7", "NODEPACK_SLOT": "1", "NODEPACK_ATTEMPT": "2",
				"NODEPACK_GPUS": "0,3", "NODEPACK_GPU_UUIDS": "GPU-aaaa,GPU-bbbb", "NODEPACK_CPUS": "4-7,9",
				"TMPDIR": "/scratch/t", "TMP": "/scratch/t", "NODEPACK_RUN_DIR": "/out/runs/abc",
				"EGL_DEVICE_ID": "<unset>", "NODEPACK_SESSION": "tok",
			},
		},
		{
			name:    "a run of a run: the sessions chain",
			environ: []string{"NODEPACK_SESSION=outer"},
			want:    want{"NODEPACK_SESSION": "outer:tok"},
		},
		{
			name:  "cpu only",
			place: pack.Assignment{CPUs: []int{0}},
			want:  want{"CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1", "NODEPACK_GPUS": ""},
		},
		{
			name:  "indices keep MIG uuids, render",
			opts:  Options{Process: Process{GPUIDs: GPUIndices, Render: true}},
			place: pack.Assignment{GPUs: []pack.GPU{gpuB, migC}},
			want: want{"CUDA_VISIBLE_DEVICES": "3,MIG-cccc", "EGL_DEVICE_ID": "3", "MUJOCO_EGL_DEVICE_ID": "3", "PYGLET_HEADLESS_DEVICE": "3",
				"OMP_NUM_THREADS": "<unset>"},
		},
		{
			name:    "user caps win",
			environ: []string{"OMP_NUM_THREADS=8"},
			opts:    Options{Process: Process{Env: []string{"MKL_NUM_THREADS=3", "FOO=opts", "BAR=opts"}}},
			run:     run.Run{Env: []string{"OPENBLAS_NUM_THREADS=2", "FOO=run", "CUDA_VISIBLE_DEVICES=mine"}},
			place:   pack.Assignment{GPUs: []pack.GPU{gpuA}, CPUs: []int{0, 1, 2, 3}},
			want: want{"OMP_NUM_THREADS": "8", "MKL_NUM_THREADS": "3", "OPENBLAS_NUM_THREADS": "2", "BLIS_NUM_THREADS": "4",
				"FOO": "run", "BAR": "opts", "CUDA_VISIBLE_DEVICES": "mine"},
		},
		{
			name:  "no caps",
			opts:  Options{Process: Process{NoThreadCaps: true}},
			place: pack.Assignment{CPUs: []int{0, 1}},
			want:  want{"OMP_NUM_THREADS": "<unset>", "NODEPACK_CPUS": "0-1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newEnvBuilder(tt.environ, "tok", &tt.opts)
			a := attemptEnv{run: tt.run, lane: tt.lane, place: tt.place, attempt: 1}
			if tt.name == "uuids and caps" {
				a.attempt, a.runDir, a.tmpDir = 2, "/out/runs/abc", "/scratch/t"
			}
			env := b.build(a)
			for k, w := range tt.want {
				v, ok := lookup(env, k)
				if !ok {
					v = "<unset>"
				}
				if v != w {
					t.Errorf("%s = %q, want %q", k, v, w)
				}
			}
		})
	}
}
