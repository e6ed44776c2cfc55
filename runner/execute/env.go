package execute

import (
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/runner/metrics"
	"github.com/nodepack/nodepack/runner/proc"
	"github.com/nodepack/nodepack/runner/run"
)

// staleVars are inherited variables that would contradict a run's placement:
// other vendors' device lists that Slurm sets for the whole job, OpenMP
// affinity lists naming absolute CPUs (pytorch/pytorch#49971), and Slurm's
// CPU binding, which a shell submitting from inside an allocation passes
// on to the job (sbatch exports it), and which would bind every srun in
// every run to the same CPUs.
var staleVars = []string{
	"GPU_DEVICE_ORDINAL", "ROCR_VISIBLE_DEVICES", "ZE_AFFINITY_MASK",
	"GOMP_CPU_AFFINITY", "KMP_AFFINITY",
	"SLURM_CPU_BIND", "SLURM_CPU_BIND_TYPE", "SLURM_CPU_BIND_LIST", "SLURM_CPU_BIND_VERBOSE",
}

// threadVars are set to the run's CPU count. Many runtimes size their pools
// from the whole host, not from the affinity mask (PyTorch before Aug 2026).
// OMP_THREAD_LIMIT and GOMAXPROCS are deliberately absent.
var threadVars = []string{
	"OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
	"BLIS_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS",
	"NUMEXPR_MAX_THREADS", "NUMBA_NUM_THREADS", "TF_NUM_INTRAOP_THREADS",
	"JULIA_NUM_THREADS", "RAYON_NUM_THREADS", "PYTHON_CPU_COUNT",
}

// interopVar sizes TensorFlow's pool of concurrent ops, which wants to be small.
const interopVar = "TF_NUM_INTEROP_THREADS"

var renderVars = []string{"EGL_DEVICE_ID", "MUJOCO_EGL_DEVICE_ID", "PYGLET_HEADLESS_DEVICE"}

// envBuilder builds each attempt's environment from one snapshot of the
// caller's environment.
type envBuilder struct {
	base    []string        // caller's environment without staleVars
	userSet map[string]bool // keys set in the caller's environment or Options.Env
	session string          // proc.SessionVar's value
	opts    *Options
}

// newEnvBuilder snapshots environ; token is this process's session token
// (see proc.SessionVar), "" for none.
func newEnvBuilder(environ []string, token string, opts *Options) *envBuilder {
	b := &envBuilder{userSet: make(map[string]bool), opts: opts}
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if slices.Contains(staleVars, k) {
			continue
		}
		b.base = append(b.base, kv)
		b.userSet[k] = true
		if k == proc.SessionVar {
			b.session = kv[len(k)+1:]
		}
	}
	if token != "" {
		b.session = strings.TrimPrefix(b.session+":"+token, ":")
	}
	for _, kv := range opts.Env {
		k, _, _ := strings.Cut(kv, "=")
		b.userSet[k] = true
	}
	return b
}

// attemptEnv holds what varies per attempt.
type attemptEnv struct {
	run     run.Run
	lane    int
	place   pack.Assignment
	attempt int
	runDir  string   // "" without OutputDir
	tmpDir  string   // "" if none
	mps     []string // an MPS client's variables, when it is one
}

// build returns the environment in order of increasing precedence; os/exec
// keeps the last value of a repeated key.
func (b *envBuilder) build(a attemptEnv) []string {
	env := slices.Grow(slices.Clip(b.base), 40+len(b.opts.Env)+len(a.run.Env))
	set := func(k, v string) { env = append(env, k+"="+v) }

	gpus := a.place.GPUs
	ids := make([]string, len(gpus))
	indices := make([]string, len(gpus))
	for i, g := range gpus {
		indices[i] = strconv.Itoa(g.Index)
		ids[i] = g.UUID
		if b.opts.GPUIDs == GPUIndices && !g.MIG {
			ids[i] = indices[i]
		}
	}
	set("CUDA_VISIBLE_DEVICES", strings.Join(ids, ","))
	set("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
	if b.opts.Render && len(gpus) > 0 {
		for _, k := range renderVars {
			set(k, indices[0])
		}
	}

	if n := len(a.place.CPUs); n > 0 && !b.opts.NoThreadCaps {
		count := strconv.Itoa(n)
		for _, k := range threadVars {
			if !b.setByUser(k, a.run) {
				set(k, count)
			}
		}
		if !b.setByUser(interopVar, a.run) {
			set(interopVar, strconv.Itoa(min(n, 2)))
		}
	}

	if a.tmpDir != "" {
		set("TMPDIR", a.tmpDir)
		set("TMP", a.tmpDir)
		set("TEMP", a.tmpDir)
	}
	if b.session != "" {
		set(proc.SessionVar, b.session)
	}
	set("NODEPACK_RUN_ID", a.run.ID)
	set("NODEPACK_RUN_INDEX", strconv.Itoa(a.run.Index))
	set("NODEPACK_SLOT", strconv.Itoa(a.lane))
	set("NODEPACK_ATTEMPT", strconv.Itoa(a.attempt))
	if a.runDir != "" {
		set("NODEPACK_RUN_DIR", a.runDir)
		set(metrics.EnvVar, filepath.Join(a.runDir, metrics.FileName))
		set(CheckpointEnv, filepath.Join(a.runDir, CheckpointDir))
	}
	set("NODEPACK_GPUS", strings.Join(indices, ","))
	var uuids []string
	for _, g := range gpus {
		uuids = append(uuids, g.UUID)
	}
	set("NODEPACK_GPU_UUIDS", strings.Join(uuids, ","))
	set("NODEPACK_CPUS", pack.FormatCPUList(a.place.CPUs))
	env = append(env, a.mps...)

	for _, kv := range b.opts.Env {
		if strings.IndexByte(kv, '{') >= 0 {
			kv = b.fillIn(kv, a)
		}
		env = append(env, kv)
	}
	env = append(env, a.run.Env...)
	return env
}

// fillIn replaces the attempt placeholders in an Options.Env entry.
func (b *envBuilder) fillIn(kv string, a attemptEnv) string {
	return strings.NewReplacer(
		"{run_id}", a.run.ID,
		"{run_dir}", a.runDir,
		"{index}", strconv.Itoa(a.run.Index),
		"{rep}", strconv.Itoa(a.run.Rep),
		"{attempt}", strconv.Itoa(a.attempt),
	).Replace(kv)
}

func (b *envBuilder) setByUser(key string, run run.Run) bool {
	if b.userSet[key] {
		return true
	}
	for _, kv := range run.Env {
		if k, _, _ := strings.Cut(kv, "="); k == key {
			return true
		}
	}
	return false
}
