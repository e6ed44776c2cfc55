package slurm_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/nodepack/nodepack/examples/internal/journey"
)

// slurmJourney is the local Slurm as the submit journeys use it.
func slurmJourney() journey.Scheduler {
	return journey.Scheduler{
		Name: "slurm", Readme: filepath.Join(repoRoot, "README.md"), ArrayLine: "#SBATCH --array=0-2", FirstTask: 0,
		Typed: func(t *testing.T, dir, line string) (string, error) {
			cmd := exec.Command("bash", "-c", line)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(nodepack)+string(os.PathListSeparator)+os.Getenv("PATH"))
			out, err := cmd.CombinedOutput()
			return string(out), err
		},
		Wait:      wait,
		Cancel:    func(id string) { exec.Command("scancel", id).Run() },
		WholeNode: "a whole node, all its CPUs and memory (--exclusive --mem=0)",
	}
}

// TestReadmeSubmit types the README's Slurm block from a login node's
// point of view: submit, status once the array ended, resubmit.
func TestReadmeSubmit(t *testing.T) {
	needSlurm(t)
	journey.ReadmeSubmit(t, slurmJourney())
}

// TestSubmitNodeDies: a 3-task array, one task's nodepack killed mid-way,
// status saying so, resubmit --remaining finishing exactly the rest, once.
func TestSubmitNodeDies(t *testing.T) {
	needSlurm(t)
	journey.NodeDies(t, slurmJourney())
}
