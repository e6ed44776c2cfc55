package slurm_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
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

// TestSubmitPoolNodeDies: the default pool of 3 tasks, one task's
// nodepack killed with SIGKILL mid-run; the others take its runs over
// once its lease expires, every run once, no resubmission.
func TestSubmitPoolNodeDies(t *testing.T) {
	needSlurm(t)
	journey.PoolNodeDies(t, slurmJourney())
}

// TestSubmitNodeDies: with --static, a 3-task array, one task's nodepack killed mid-way,
// status saying so, resubmit --remaining finishing exactly the rest, once.
func TestSubmitNodeDies(t *testing.T) {
	needSlurm(t)
	journey.NodeDies(t, slurmJourney())
}

// TestSubmitFromHostileDirectory: submit typed in a directory whose name
// is shell syntax (R&D, a(b), w;{touch,pwned}): the array's tasks run
// their shards there and nothing of the name runs.
func TestSubmitFromHostileDirectory(t *testing.T) {
	needSlurm(t)
	root := t.TempDir()
	dir := filepath.Join(root, "R&D(b);{touch,pwned}")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tasks.txt"), []byte("echo one\necho two\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := slurmJourney()
	out, err := s.Typed(t, dir, "nodepack submit --slurm --nodes 2 --cpus-per-node 1 -o sweep -- tasks.txt")
	if err != nil {
		t.Fatalf("submit: %v\n%s", err, out)
	}
	id, err := journey.LastJob(filepath.Join(dir, "sweep"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Cancel(id) })
	if err := wait(t, id, 120); err != nil {
		logs, _ := filepath.Glob(filepath.Join(dir, "sweep", "jobs", "*.log"))
		var text []byte
		for _, l := range logs {
			b, _ := os.ReadFile(l)
			text = append(text, b...)
		}
		t.Fatalf("array %s: %v\n%s", id, err, text)
	}
	if st, _ := s.Typed(t, dir, "nodepack status sweep"); !strings.Contains(st, "2 runs: 2 succeeded") {
		t.Errorf("status:\n%s", st)
	}
	for _, canary := range []string{"pwned", "touch"} {
		for _, where := range []string{root, dir, "/"} {
			if _, err := os.Stat(filepath.Join(where, canary)); err == nil {
				t.Errorf("%s/%s exists: the directory's name ran", where, canary)
			}
		}
	}
}

// TestSubmitInheritedCPUBind: a sweep submitted from a shell that carries
// SLURM_CPU_BIND (one inside an allocation, or a profile's), as the user
// types it: submit names the variable in one line, and on the node no run
// is rebound by it: the runs' environment leaves it out, so an srun in a
// run does not bind to CPU 0, and each run has the CPUs nodepack gave it.
func TestSubmitInheritedCPUBind(t *testing.T) {
	needSlurm(t)
	dir := t.TempDir()
	var tasks strings.Builder
	for i := range 2 {
		fmt.Fprintf(&tasks, "echo bind=${SLURM_CPU_BIND:-none}; grep Cpus_allowed_list /proc/self/status; echo cpus=$NODEPACK_CPUS; srun --overlap -n1 grep Cpus_allowed_list /proc/self/status # %d\n", i)
	}
	if err := os.WriteFile(filepath.Join(dir, "tasks.txt"), []byte(tasks.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	s := slurmJourney()
	out, err := s.Typed(t, dir, "export SLURM_CPU_BIND=map_cpu:0; nodepack submit --slurm --nodes 1 -o sweep -- tasks.txt")
	if err != nil || strings.Count(out, "SLURM_CPU_BIND=map_cpu:0 in this shell") != 1 {
		t.Fatalf("submit: %v\n%s\nwant one line naming SLURM_CPU_BIND", err, out)
	}
	id, err := journey.LastJob(filepath.Join(dir, "sweep"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Cancel(id) })
	if err := wait(t, id, 120); err != nil {
		t.Fatalf("array %s: %v", id, err)
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "sweep", "runs", "*", "stdout.log"))
	if len(logs) != 2 {
		t.Fatalf("%d run logs, want 2", len(logs))
	}
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		text := string(b)
		lines := strings.Split(strings.TrimSpace(text), "\n")
		if len(lines) != 4 || lines[0] != "bind=none" {
			t.Errorf("%s: %q: want the run's environment without SLURM_CPU_BIND", l, text)
			continue
		}
		own := strings.TrimSpace(strings.TrimPrefix(lines[1], "Cpus_allowed_list:"))
		if want := strings.TrimPrefix(lines[2], "cpus="); want != "" && !sameCPUs(own, want) {
			t.Errorf("%s: the run has CPUs %s, nodepack gave it %s", l, own, want)
		}
		if stepped := strings.TrimSpace(strings.TrimPrefix(lines[3], "Cpus_allowed_list:")); runtime.NumCPU() > 1 && stepped == "0" {
			t.Errorf("%s: an srun in the run was bound to CPU 0, by the submitting shell's SLURM_CPU_BIND", l)
		}
	}
}

// sameCPUs compares two kernel CPU lists ("0-1,3").
func sameCPUs(a, b string) bool { return fmt.Sprint(expand(a)) == fmt.Sprint(expand(b)) }

func expand(list string) []int {
	var got []int
	for part := range strings.SplitSeq(list, ",") {
		lo, hi, ok := strings.Cut(part, "-")
		if !ok {
			hi = lo
		}
		a, _ := strconv.Atoi(lo)
		b, _ := strconv.Atoi(hi)
		for c := a; c <= b; c++ {
			got = append(got, c)
		}
	}
	return got
}
