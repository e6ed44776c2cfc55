package sge_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestExamplesAsWritten submits every Grid Engine example script as its
// header and the README say, with nothing added: qsub SCRIPT from a
// directory holding tasks.txt, with nodepack on PATH, on the cell of
// scripts/sge-local.sh (16 slots for -pe smp 16, four fake GPUs for -l
// gpu=4). Every run succeeds; sweep.qsub's runs see fake GPUs.
func TestExamplesAsWritten(t *testing.T) {
	needSGE(t)
	scripts, _ := filepath.Glob(filepath.Join(repoRoot, "examples/sge/*.qsub"))
	if len(scripts) < 2 {
		t.Fatalf("found %d example scripts", len(scripts))
	}
	for _, script := range scripts {
		t.Run(filepath.Base(script), func(t *testing.T) {
			dir := t.TempDir()
			writeTasks(t, dir, "echo gpus=$CUDA_VISIBLE_DEVICES", "echo gpus=$CUDA_VISIBLE_DEVICES", "echo gpus=$CUDA_VISIBLE_DEVICES")
			cmd := exec.Command("qsub", "-terse", script)
			cmd.Dir = dir
			var env []string
			for _, kv := range append(cleanEnv(), sgeEnv...) {
				if k, _, _ := strings.Cut(kv, "="); k != "CUDA_VISIBLE_DEVICES" && k != "NODEPACK" && k != "NODEPACK_FLAGS" && k != "TASKS" {
					env = append(env, kv)
				}
			}
			path := filepath.Dir(nodepack)
			for _, kv := range env {
				if v, ok := strings.CutPrefix(kv, "PATH="); ok {
					path += ":" + v
				}
			}
			cmd.Env = append(env, "PATH="+path) // the last PATH is the one
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("qsub %s: %v\n%s", script, err, out)
			}
			id, _, _ := strings.Cut(strings.TrimSpace(string(out)), ".")
			t.Cleanup(func() { sge(t, "qdel", id).Run() })
			if err := wait(t, id, 180); err != nil {
				t.Fatalf("job %s: %v\n%s", id, err, logs(dir))
			}
			got := succeeded(t, filepath.Join(dir, "nodepack-"+id))
			if got != 3 {
				t.Errorf("%d runs succeeded, want 3\n%s", got, logs(dir))
			}
			var seen []string
			outs, _ := filepath.Glob(filepath.Join(dir, "nodepack-"+id, "runs", "*", "stdout.log"))
			for _, o := range outs {
				b, _ := os.ReadFile(o)
				seen = append(seen, strings.TrimSpace(string(b)))
			}
			if filepath.Base(script) == "sweep.qsub" && slices.Contains(seen, "gpus=") {
				t.Errorf("runs saw %q: sweep.qsub asks -l gpu=4, and each run should see its fake GPU", seen)
			}
		})
	}
}
