package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/nodepack/nodepack/runner/execute"
	"github.com/nodepack/nodepack/runner/ledger"
	"github.com/nodepack/nodepack/runner/schedule"
)

// ranSixRuns runs sixRuns under --prune spec, as an earlier sweep, and
// returns its output directory and command line.
func ranSixRuns(t *testing.T, spec string) (out string, args []string) {
	t.Helper()
	out, args = sixRuns(t, spec)
	if code, _, stderr := runCLI(t, args...); code != exitOK {
		t.Fatalf("the earlier sweep: exit %d\n%s", code, stderr)
	}
	return out, args
}

// withPrior is sixRuns' command line args with --prune-prior dir.
func withPrior(args []string, dir string) []string {
	n := len(args) - 3 // before "--", "bash", script
	return append(append(slices.Clone(args[:n]), "--prune-prior", dir), args[n:]...)
}

// TestPrunePriorBadInput: a --prune-prior nodepack cannot learn from
// exits 2 with one line naming the flag, the directory and the problem,
// before any run starts.
func TestPrunePriorBadInput(t *testing.T) {
	dir := t.TempDir()
	// Earlier sweeps: one that never reported loss, one judged by loss
	// the other way.
	tasks := writeFile(t, dir, "true.txt", "true\n")
	silent := filepath.Join(dir, "silent")
	if code, _, stderr := runCLI(t, "run", "-q", "-o", silent, tasks); code != exitOK {
		t.Fatalf("the earlier sweep: exit %d\n%s", code, stderr)
	}
	upside, _ := ranSixRuns(t, "loss:max,max=8,every=20ms")
	empty := filepath.Join(dir, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	file := writeFile(t, dir, "file.txt", "x\n")
	out := filepath.Join(dir, "out")
	tests := []struct {
		description string
		args        []string
		want        string
	}{
		{"an empty directory", []string{"--prune", "loss:min,max=8", "--prune-prior", empty}, "--prune-prior " + empty + ": not a sweep's output directory: it holds no ledger"},
		{"no such directory", []string{"--prune", "loss:min,max=8", "--prune-prior", filepath.Join(dir, "nothere")}, "no such file or directory"},
		{"a file", []string{"--prune", "loss:min,max=8", "--prune-prior", file}, "not a directory"},
		{"this sweep's own output", []string{"--prune", "loss:min,max=8", "--prune-prior", out}, "is this sweep's own output directory"},
		{"runs that never reported the metric", []string{"--prune", "loss:min,max=8", "--prune-prior", silent}, "--prune-prior " + silent + ": no run reported loss"},
		{"the other direction", []string{"--prune", "loss:min,max=8", "--prune-prior", upside}, "a prior of the other direction"},
		{"no --prune", []string{"--prune-prior", upside}, "--prune-prior goes with --prune"},
		{"the rank rule", []string{"--prune", "loss:min,first=2,max=8", "--prune-prior", upside}, "--prune-prior goes with --prune's forecast rule"},
		{"the curve rule", []string{"--prune", "loss:min,max=8,rule=curve", "--prune-prior", upside}, "--prune-prior goes with --prune's forecast rule"},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			ran := filepath.Join(t.TempDir(), "ran")
			tasks := writeFile(t, t.TempDir(), "tasks.txt", "touch "+ran+"\n")
			args := append(append([]string{"run", "-q"}, tc.args...), "-o", out, tasks)
			code, _, stderr := runCLI(t, args...)
			if code != exitUsage || !strings.Contains(stderr, tc.want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
				t.Errorf("%v: exit %d, %q; want exit 2 and one line saying %q", tc.args, code, stderr, tc.want)
			}
			if _, err := os.Stat(ran); err == nil {
				t.Errorf("%v: the run ran", tc.args)
			}
		})
	}
}

// TestPrunePriorJourney: a sweep run again with --prune-prior its earlier
// output directory says what it read before it starts, records the prior
// in its ledger's header, says what the prior did at its end, and status
// says the same (runs the prior helped stop, counted from the ledger); a
// rerun with the same prior says nothing of it, one with another prior
// says that the prior changed.
func TestPrunePriorJourney(t *testing.T) {
	spec := "loss:min,max=8,every=20ms"
	earlier, _ := ranSixRuns(t, spec)
	out, args := sixRuns(t, spec)
	args = withPrior(args, earlier)
	code, _, stderr := runCLI(t, args...)
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "prune prior "+earlier+": 6 runs, ") || !strings.Contains(stderr, "nodepack: --prune-prior was ") {
		t.Errorf("want a note of what was read and a summary line of what the prior did:\n%s", stderr)
	}
	log, err := ledger.ReadFile(filepath.Join(out, ledger.FileName(0, 1)), ledger.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pp := log.Header().PrunePrior
	if len(pp) != 1 || pp[0].Dir != earlier || pp[0].Runs != 6 || pp[0].Finished == 0 || pp[0].MaxStep != 8 || pp[0].Digest == "" {
		t.Fatalf("the header's prune_prior %+v: want %s, its 6 runs, those that finished, step 8 and a digest", pp, earlier)
	}
	stopped := 0
	for _, j := range log.Judgements() {
		if j.Stop && j.Prior {
			stopped++
		}
	}
	code, text, _ := runCLI(t, "status", out)
	if code != exitOK || !strings.Contains(text, "prune prior: "+earlier+" (6 runs, ") || !strings.Contains(text, "stopped "+countWord(stopped, "run")) {
		t.Errorf("status: exit %d, want the prior and the %d runs it helped stop:\n%s", code, stopped, text)
	}
	code, js, _ := runCLI(t, "status", "--json", out)
	var doc struct {
		PrunePrior struct {
			Dirs []struct {
				Dir  string
				Runs int
			}
			Stopped int
		} `json:"prune_prior"`
	}
	if err := json.Unmarshal([]byte(js), &doc); code != exitOK || err != nil || len(doc.PrunePrior.Dirs) != 1 || doc.PrunePrior.Dirs[0].Dir != earlier || doc.PrunePrior.Stopped != stopped {
		t.Errorf("status --json: exit %d, %v, %+v; want %s and %d stopped", code, err, doc.PrunePrior, earlier, stopped)
	}
	if !strings.Contains(stderr, "it helped stop "+countWord(stopped, "run")) {
		t.Errorf("the summary does not say the %d runs the ledger counts:\n%s", stopped, stderr)
	}

	code, _, stderr = runCLI(t, args...)
	if code != exitOK || !strings.Contains(stderr, "nothing left to run") || strings.Contains(stderr, "changed") {
		t.Errorf("rerun with the same prior: exit %d\n%s", code, stderr)
	}
	other, _ := ranSixRuns(t, spec)
	for i, a := range args {
		if a == earlier {
			args[i] = other
		}
	}
	code, _, stderr = runCLI(t, args...)
	if code != exitOK || !strings.Contains(stderr, "the prune prior changed since this sweep's last session: it was "+earlier) || !strings.Contains(stderr, "now "+other) {
		t.Errorf("rerun with another prior: exit %d, want it said\n%s", code, stderr)
	}
}

// TestSummarySaysPrior: the end of a sweep with --prune-prior says whether
// the prior was in use, dropped (and why) or never used, and how many
// runs it helped stop; without one, nothing.
func TestSummarySaysPrior(t *testing.T) {
	uses := []schedule.PriorUse{{MaxStep: 40, Runs: 66, Finished: 66}}
	for _, tc := range []struct {
		prior schedule.PriorState
		want  string
	}{
		{schedule.PriorState{Uses: uses, On: true, Checked: 9, Finished: 3, Stopped: 7}, "--prune-prior was in use: it helped stop 7 runs (checked by 9 runs at the first rung, 3 finished)"},
		{schedule.PriorState{Uses: uses, Dropped: "its values at step 2 are not this sweep's scale", Stopped: 1}, "--prune-prior was dropped (its values at step 2 are not this sweep's scale); before that it helped stop 1 run"},
		{schedule.PriorState{Uses: uses, Checked: 2}, "--prune-prior was not used: this sweep's own runs had not yet shown it agrees (2 of 4 at the first rung, 0 of 2 finished where it forecast); it helped stop 0 runs"},
	} {
		var b strings.Builder
		printSummary(&b, execute.Summary{Runs: 27, Succeeded: 27, Prior: tc.prior}, "out", false)
		if !strings.Contains(b.String(), tc.want) {
			t.Errorf("summary:\n%s\nwant %q", b.String(), tc.want)
		}
	}
	var b strings.Builder
	printSummary(&b, execute.Summary{Runs: 27, Succeeded: 27}, "out", false)
	if strings.Contains(b.String(), "prior") {
		t.Errorf("a summary without a prior speaks of one:\n%s", b.String())
	}
}

// TestSubmitPrunePrior: submit hands --prune-prior to every task of the
// sweep's pool, a pool task records it and status says it, and submit
// refuses a prior the tasks could not learn from with one line, before
// anything is submitted.
func TestSubmitPrunePrior(t *testing.T) {
	earlier, args := ranSixRuns(t, "loss:min,max=8,every=20ms")
	dir := t.TempDir()
	t.Chdir(dir)
	fakeScheduler(t, dir)
	params, script := args[len(args)-4], args[len(args)-1]
	code, stdout, stderr := runCLI(t, "submit", "--slurm", "--nodes", "2", "-o", "sweep", "--", "--prune", "loss:min,max=8", "--prune-prior", earlier, "--params", params, "--", "bash", script)
	if code != exitOK || !strings.Contains(stdout, "--prune-prior "+earlier) {
		t.Fatalf("submit = %d, want the script to pass --prune-prior %s to each task:\n%s\n%s", code, earlier, stdout, stderr)
	}
	// Task 0 of job 100, as the array task runs it: the pool's ledger
	// records the prior, and status says it.
	code, _, stderr = runCLI(t, "run", "-q", "--pool", "100_0", "--lease", "3s", "--grace", "300ms", "-o", "sweep", "--prune", "loss:min,max=8", "--prune-prior", earlier, "--params", params, "--", "bash", script)
	if code != exitOK || !strings.Contains(stderr, "prune prior "+earlier+": 6 runs") {
		t.Fatalf("pool task 100_0: exit %d\n%s", code, stderr)
	}
	if code, text, _ := runCLI(t, "status", "sweep"); code != exitOK || strings.Count(text, "prune prior: "+earlier+" (6 runs, ") != 1 {
		t.Errorf("status of the pool: exit %d, want the prior once:\n%s", code, text)
	}
	empty := filepath.Join(dir, "empty")
	os.Mkdir(empty, 0o755)
	code, stdout, stderr = runCLI(t, "submit", "--slurm", "--nodes", "2", "-o", "other", "--", "--prune", "loss:min,max=8", "--prune-prior", empty, "--params", params, "--", "bash", script)
	if code != exitUsage || !strings.Contains(stderr, "--prune-prior "+empty+": not a sweep's output directory") || strings.Count(stderr, "\n") != 1 || stdout != "" {
		t.Errorf("submit with a prior that is no sweep = %d, %q, %q; want exit 2 and one line", code, stdout, stderr)
	}
	if log, err := os.ReadFile(filepath.Join(dir, "bin", "sbatch.log")); err != nil || strings.Count(string(log), "\n") != 1 {
		t.Errorf("sbatch ran %q (%v): want once, for the good prior", log, err)
	}
}

// TestPrunePriorDropped: a prior from an easier task (every run of it
// far better at every step) is dropped once this sweep's own runs show
// it: said once on stderr, recorded with the judgement in the ledger,
// shown by status, and not said again by a rerun.
func TestPrunePriorDropped(t *testing.T) {
	dir := t.TempDir()
	easy := map[string]float64{"a": 0.01, "b": 0.02, "c": 0.03, "d": 0.04, "e": 0.05, "f": 0.06}
	params, script := pruneSweep(t, dir, easy, []string{"a", "b", "c", "d", "e", "f"})
	earlier := filepath.Join(dir, "earlier")
	if code, _, stderr := runCLI(t, "run", "-q", "--gpus", "none", "-j", "1", "-o", earlier, "--params", params, "--", "bash", script); code != exitOK {
		t.Fatalf("the earlier sweep: exit %d\n%s", code, stderr)
	}
	out, args := sixRuns(t, "loss:min,max=8,every=20ms")
	args = withPrior(args, earlier)
	code, _, stderr := runCLI(t, args...)
	if code != exitOK || strings.Count(stderr, "the prune prior is dropped: ") != 1 || !strings.Contains(stderr, "nodepack: --prune-prior was dropped (") {
		t.Fatalf("exit %d, want the drop said once and in the summary:\n%s", code, stderr)
	}
	log, err := ledger.ReadFile(filepath.Join(out, ledger.FileName(0, 1)), ledger.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var why []string
	for _, j := range log.Judgements() {
		if j.PriorDropped != "" {
			why = append(why, j.PriorDropped)
		}
		if j.Stop && j.Prior {
			t.Errorf("%s was stopped by a forecast that learnt from the easier prior: %+v", j.Run, j)
		}
	}
	if len(why) != 1 || !strings.Contains(stderr, why[0]) {
		t.Fatalf("the ledger records the drop %q: want once, as said\n%s", why, stderr)
	}
	if code, text, _ := runCLI(t, "status", out); code != exitOK || !strings.Contains(text, "; dropped: "+why[0]) {
		t.Errorf("status: exit %d, want the drop:\n%s", code, text)
	}
	if code, _, stderr := runCLI(t, args...); code != exitOK || strings.Contains(stderr, "is dropped") {
		t.Errorf("rerun: exit %d, the drop said again:\n%s", code, stderr)
	}
	t.Run("the report says it", func(t *testing.T) {
		chromium := needChromium(t)
		if code, _, stderr := runCLI(t, "report", out); code != exitOK {
			t.Fatalf("report: exit %d\n%s", code, stderr)
		}
		note := regexp.MustCompile(`id="rungsnote">([^<]*)<`).FindStringSubmatch(reportDOM(t, chromium, out))
		if note == nil || !strings.Contains(note[1], ". The prune prior (earlier sweeps): "+earlier+"; forecasts that learnt from it stopped 0 runs; dropped: ") {
			t.Errorf("the note of the runs by rung is %q: want the prior, the runs it stopped and why it was dropped", note)
		}
	})
}

// TestPrunePriorUntrusted: what an earlier sweep's runs left behind is
// read as any run's leavings are: a metrics file that is a link or a FIFO
// is not read (nothing hangs, nothing outside the directory is read), and
// the runs whose metrics are readable make the prior.
func TestPrunePriorUntrusted(t *testing.T) {
	earlier, args := ranSixRuns(t, "loss:min,max=8,every=20ms")
	files, _ := filepath.Glob(filepath.Join(earlier, "runs", "*", "metrics.jsonl"))
	if len(files) != 6 {
		t.Fatalf("%d metrics files in the earlier sweep, want 6", len(files))
	}
	outside := writeFile(t, t.TempDir(), "elsewhere.jsonl", `{"step": 1, "loss": 0.001}`+"\n")
	os.Remove(files[0])
	if err := os.Symlink(outside, files[0]); err != nil {
		t.Fatal(err)
	}
	os.Remove(files[1])
	if err := syscall.Mkfifo(files[1], 0o644); err != nil {
		t.Fatal(err)
	}
	out, args := sixRuns(t, "loss:min,max=8,every=20ms")
	args = withPrior(args, earlier)
	code, _, stderr := runCLI(t, args...)
	if code != exitOK || !strings.Contains(stderr, "prune prior "+earlier+": 4 runs, ") {
		t.Fatalf("exit %d, want the 4 runs whose metrics are files of their own read:\n%s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(out, "ledger.jsonl")); err != nil {
		t.Error(err)
	}
}
