package slurm_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestExamplesAsWritten submits every Slurm example script as its header
// and the README say, with nothing added: sbatch SCRIPT from a directory
// holding tasks.txt, with nodepack on PATH. The one exception is
// srun.sbatch's --nodes=4, which this one-node Slurm cannot give:
// --nodes=1 on the command line overrides it, as a user trying it on one
// node would. Every run succeeds, nodepack status nodepack-JOBID finds the
// sweep, and sweep.sbatch's runs see the fake GPUs it asked for.
func TestExamplesAsWritten(t *testing.T) {
	needSlurm(t)
	scripts, _ := filepath.Glob(filepath.Join(repoRoot, "examples/slurm/*.sbatch"))
	if len(scripts) < 3 {
		t.Fatalf("found %d example scripts", len(scripts))
	}
	for _, script := range scripts {
		name := filepath.Base(script)
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeTasks(t, dir, "echo gpus=$CUDA_VISIBLE_DEVICES", "echo gpus=$CUDA_VISIBLE_DEVICES", "echo gpus=$CUDA_VISIBLE_DEVICES")
			args := []string{"--parsable"}
			if name == "srun.sbatch" {
				args = append(args, "--nodes=1")
			}
			cmd := exec.Command("sbatch", append(args, script)...)
			cmd.Dir = dir
			var env []string
			for _, kv := range os.Environ() {
				if k, _, _ := strings.Cut(kv, "="); k != "CUDA_VISIBLE_DEVICES" && k != "NODEPACK" && k != "NODEPACK_FLAGS" && k != "TASKS" && k != "PATH" {
					env = append(env, kv)
				}
			}
			cmd.Env = append(env, "PATH="+filepath.Dir(nodepack)+":"+os.Getenv("PATH"))
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("sbatch %s: %v\n%s", name, err, out)
			}
			id, _, _ := strings.Cut(strings.TrimSpace(string(out)), ";")
			t.Cleanup(func() { exec.Command("scancel", id).Run() })
			if err := wait(t, id, 180); err != nil {
				logs, _ := filepath.Glob(filepath.Join(dir, "nodepack-*.log"))
				var b strings.Builder
				for _, l := range logs {
					b.WriteString(jobLog(t, l))
				}
				t.Fatalf("job %s: %v\n%s", id, err, b.String())
			}
			status := exec.Command(nodepack, "status", "nodepack-"+id)
			status.Dir = dir
			if b, err := status.CombinedOutput(); err != nil || !strings.Contains(string(b), "3 runs: 3 succeeded") {
				t.Errorf("nodepack status nodepack-%s: %v\n%s\nwant 3 runs, 3 succeeded", id, err, b)
			}
			var seen []string
			for _, l := range runOutputs(t, outputOf(t, dir, id)) {
				seen = append(seen, strings.TrimSpace(l))
			}
			if name == "sweep.sbatch" && (len(seen) != 3 || slices.Contains(seen, "gpus=")) {
				t.Errorf("runs printed %q: sweep.sbatch asks --gres=gpu:4, and each run should see its fake GPU", seen)
			}
		})
	}
}
