// Package slurm_test runs nodepack under a real Slurm: the example batch
// scripts, submitted with sbatch to the single-node cluster that
// scripts/slurm-local.sh starts. It is skipped unless NODEPACK_SLURM_TESTS=1
// (set by .ci/run after starting Slurm), so go test ./... needs no Slurm.
package slurm_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var (
	repoRoot  string // the repository, from this package's directory
	nodepack  string // nodepack built for these tests
	slurmWait string // scripts/slurm-local.sh, whose wait is the test oracle
)

func TestMain(m *testing.M) {
	if os.Getenv("NODEPACK_SLURM_TESTS") != "1" {
		fmt.Println("skipping the Slurm tests: set NODEPACK_SLURM_TESTS=1 after scripts/slurm-local.sh start")
		os.Exit(m.Run()) // every test skips itself
	}
	var err error
	if repoRoot, err = filepath.Abs("../.."); err != nil {
		panic(err)
	}
	slurmWait = filepath.Join(repoRoot, "scripts", "slurm-local.sh")
	if os.Getenv("SLURM_CONF") == "" {
		// slurm-local.sh env prints "export SLURM_CONF=PATH".
		out, err := exec.Command(slurmWait, "env").Output()
		if err != nil {
			panic(err)
		}
		_, conf, _ := strings.Cut(strings.TrimSpace(string(out)), "=")
		os.Setenv("SLURM_CONF", conf)
	}
	bin, err := os.MkdirTemp("", "nodepack-slurm-bin-")
	if err != nil {
		panic(err)
	}
	nodepack = filepath.Join(bin, "nodepack")
	build := exec.Command("go", "build", "-o", nodepack, "./cmd/nodepack")
	build.Dir, build.Stdout, build.Stderr = repoRoot, os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Println("building nodepack:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(bin)
	os.Exit(code)
}

func needSlurm(t *testing.T) {
	t.Helper()
	if nodepack == "" {
		t.Skip("NODEPACK_SLURM_TESTS is not 1")
	}
}

// submit runs sbatch with args in dir and returns the job id.
func submit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("sbatch", append([]string{"--parsable", "--chdir", dir,
		"--export=ALL,NODEPACK=" + nodepack}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sbatch %q: %v\n%s", args, err, out)
	}
	id, _, _ := strings.Cut(strings.TrimSpace(string(out)), ";")
	t.Cleanup(func() { exec.Command("scancel", id).Run() })
	return id
}

// wait waits for the job (all array tasks) to end and returns nil only if
// every task COMPLETED; the polling wait of slurm-local.sh is the oracle,
// not sbatch --wait (which returns 0 for cancelled jobs).
func wait(t *testing.T, id string, timeoutSeconds int) error {
	t.Helper()
	out, err := exec.Command(slurmWait, "wait", id, fmt.Sprint(timeoutSeconds)).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%v: %s", err, out)
	}
	return nil
}

func jobLog(t *testing.T, path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

func writeTasks(t *testing.T, dir string, lines ...string) string {
	t.Helper()
	path := filepath.Join(dir, "tasks.txt")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// runOutputs returns the stdout.log of every run under out/runs.
func runOutputs(t *testing.T, out string) map[string]string {
	t.Helper()
	logs, _ := filepath.Glob(filepath.Join(out, "runs", "*", "stdout.log"))
	m := map[string]string{}
	for _, l := range logs {
		m[filepath.Base(filepath.Dir(l))] = jobLog(t, l)
	}
	return m
}

// TestFakeGPUs is scenario 1: the example script with --gres=gpu:4 (fake
// GPUs, no driver): nodepack takes the 4 GPUs from CUDA_VISIBLE_DEVICES,
// packs 8 runs at 2 per GPU, each run's environment names only its GPU,
// and every run is pinned to the CPUs its slot was given.
func TestFakeGPUs(t *testing.T) {
	needSlurm(t)
	dir := t.TempDir()
	var lines []string
	for i := range 8 {
		lines = append(lines, fmt.Sprintf(
			"echo %d $CUDA_VISIBLE_DEVICES $NODEPACK_CPUS $(grep Cpus_allowed_list /proc/self/status | cut -f2); sleep 1", i))
	}
	tasks := writeTasks(t, dir, lines...)
	id := submit(t, dir, "--export=ALL,NODEPACK="+nodepack+",TASKS="+tasks, filepath.Join(repoRoot, "examples/slurm/sweep.sbatch"))
	if err := wait(t, id, 120); err != nil {
		t.Fatalf("job %s: %v\n%s", id, err, jobLog(t, filepath.Join(dir, "nodepack-"+id+".log")))
	}
	outputs := runOutputs(t, filepath.Join(dir, "nodepack-"+id))
	if len(outputs) != 8 {
		t.Fatalf("%d run logs, want 8:\n%s", len(outputs), jobLog(t, filepath.Join(dir, "nodepack-"+id+".log")))
	}
	runsPerGPU := map[string]int{}
	runsPerCPU := map[string]int{}
	for run, out := range outputs {
		f := strings.Fields(out)
		if len(f) != 4 {
			t.Fatalf("run %s printed %q", run, out)
		}
		gpu, said, pinned := f[1], f[2], f[3]
		if !slices.Contains([]string{"0", "1", "2", "3"}, gpu) {
			t.Errorf("run %s: CUDA_VISIBLE_DEVICES=%q, want exactly one of the job's GPUs", run, gpu)
		}
		if said != pinned {
			t.Errorf("run %s: NODEPACK_CPUS=%s but pinned to %s", run, said, pinned)
		}
		runsPerGPU[gpu]++
		runsPerCPU[pinned]++
	}
	for gpu, n := range runsPerGPU {
		if n != 2 {
			t.Errorf("GPU %s ran %d runs, want 2 (--runs-per-gpu 2)", gpu, n)
		}
	}
	// 8 runs at once on this 2-CPU node must share CPUs: evenly, one CPU each.
	for cpu, n := range runsPerCPU {
		if strings.ContainsAny(cpu, ",-") || n != 4 {
			t.Errorf("CPU %q had %d runs; want single CPUs with 4 runs each: %v", cpu, n, runsPerCPU)
		}
	}
}

// TestTorchThreads is scenario 5: the PyTorch example under 2 concurrent
// runs on the 2-CPU node: each sees OMP_NUM_THREADS=1,
// torch.get_num_threads() == 1 and its own CPU.
func TestTorchThreads(t *testing.T) {
	needSlurm(t)
	python := "/usr/bin/python3"
	if exec.Command(python, "-c", "import torch").Run() != nil {
		t.Skip("Debian's python3-torch is not installed")
	}
	dir := t.TempDir()
	train := filepath.Join(repoRoot, "examples/train/train.py")
	tasks := writeTasks(t, dir,
		python+" "+train+" --epochs 2 --seed 1 --epoch-seconds 1",
		python+" "+train+" --epochs 2 --seed 2 --epoch-seconds 1")
	id := submit(t, dir, "--exclusive", "--output", filepath.Join(dir, "job.log"),
		"--wrap", "exec $NODEPACK run --parallel 2 --gpus none --output out "+tasks)
	if err := wait(t, id, 120); err != nil {
		t.Fatalf("job %s: %v\n%s", id, err, jobLog(t, filepath.Join(dir, "job.log")))
	}
	outputs := runOutputs(t, filepath.Join(dir, "out"))
	if len(outputs) != 2 {
		t.Fatalf("%d runs, want 2:\n%s", len(outputs), jobLog(t, filepath.Join(dir, "job.log")))
	}
	var cpus []int
	for run, out := range outputs {
		var start struct {
			Backend      string `json:"backend"`
			Affinity     []int  `json:"affinity"`
			TorchThreads int    `json:"torch_threads"`
			OMP          string `json:"omp_num_threads"`
		}
		first, _, _ := strings.Cut(out, "\n")
		if err := json.Unmarshal([]byte(first), &start); err != nil {
			t.Fatalf("run %s: %v: %q", run, err, out)
		}
		if !strings.HasPrefix(start.Backend, "torch") || start.TorchThreads != 1 || start.OMP != "1" || len(start.Affinity) != 1 {
			t.Errorf("run %s: %+v; want torch with 1 thread, OMP_NUM_THREADS=1, one CPU", run, start)
		}
		cpus = append(cpus, start.Affinity...)
		if !strings.Contains(out, `"event": "done"`) {
			t.Errorf("run %s did not finish training:\n%s", run, out)
		}
	}
	slices.Sort(cpus)
	if !slices.Equal(cpus, []int{0, 1}) {
		t.Errorf("runs on CPUs %v, want one each on 0 and 1", cpus)
	}
}

var _ = bufio.NewScanner // used by the scenarios that read ledgers
