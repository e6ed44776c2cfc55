package sge_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/nodepack/nodepack/examples/internal/journey"
)

// sgeJourney is the local Grid Engine cell as the submit journeys use it:
// commands typed in a login shell of the cell.
func sgeJourney() journey.Scheduler {
	return journey.Scheduler{
		Name: "sge", Readme: filepath.Join(repoRoot, "README.md"), ArrayLine: "#$ -t 1-3", FirstTask: 1,
		Typed: func(t *testing.T, dir, line string) (string, error) {
			cmd := exec.Command("bash", "-c", line)
			cmd.Dir = dir
			env := append(cleanEnv(), sgeEnv...)
			for i, kv := range env {
				if p, ok := strings.CutPrefix(kv, "PATH="); ok {
					env[i] = "PATH=" + filepath.Dir(nodepack) + string(os.PathListSeparator) + p
				}
			}
			cmd.Env = env
			out, err := cmd.CombinedOutput()
			return string(out), err
		},
		Wait: wait,
		Cancel: func(id string) {
			cmd := exec.Command("qdel", id)
			cmd.Env = append(cleanEnv(), sgeEnv...)
			cmd.Run()
		},
		// Grid Engine has no whole-node request: the smallest host's CPUs,
		// this machine's here.
		WholeNode: fmt.Sprintf("%d CPUs, cores of its own (-pe smp %[1]d -binding linear:%[1]d)", runtime.NumCPU()),
	}
}

// TestReadmeSubmit types the README's Grid Engine block: submit, status
// once the array ended, resubmit.
func TestReadmeSubmit(t *testing.T) {
	needSGE(t)
	journey.ReadmeSubmit(t, sgeJourney())
}

// TestSubmitPoolNodeDies: the default pool of 3 tasks, one task's
// nodepack killed with SIGKILL mid-run; the others take its runs over
// once its lease expires, every run once, no resubmission.
func TestSubmitPoolNodeDies(t *testing.T) {
	needSGE(t)
	journey.PoolNodeDies(t, sgeJourney())
}

// TestSubmitNodeDies: with --static, a task's nodepack killed mid-way (no end record),
// status naming it, resubmit --remaining finishing exactly the rest, once.
func TestSubmitNodeDies(t *testing.T) {
	needSGE(t)
	journey.NodeDies(t, sgeJourney())
}
