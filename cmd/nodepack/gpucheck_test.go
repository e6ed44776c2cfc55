package main

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestGPUCheckScript runs scripts/gpu-check.sh as a user on a GPU node
// types it, with this binary as nodepack. Where it cannot run (no
// nvidia-smi, no GPU, no PyTorch that sees one: CI) it must say so in one
// line and exit 2, never pass silently; on a GPU node with PyTorch every
// check must pass.
func TestGPUCheckScript(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "../../scripts/gpu-check.sh", exe)
	cmd.Env = append(os.Environ(), "NODEPACK_TEST_AS_MAIN=1", "OUT="+t.TempDir())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatal(err)
	}
	switch code := cmd.ProcessState.ExitCode(); code {
	case 0:
		if !strings.Contains(stdout.String(), " passed, 0 failed") {
			t.Errorf("exit 0 without its tally:\n%s", stdout.String())
		}
		t.Logf("on this GPU node:\n%s", stdout.String())
	case 2:
		line := strings.TrimSpace(stderr.String())
		if !strings.HasPrefix(line, "gpu-check.sh: ") || strings.Contains(line, "\n") || stdout.Len() > 0 {
			t.Errorf("exit 2 should say why in one line and check nothing; stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
		}
		t.Logf("not a GPU node with PyTorch: %s", line)
	default:
		t.Errorf("exit %d:\n%s\n%s", code, stdout.String(), stderr.String())
	}
}
