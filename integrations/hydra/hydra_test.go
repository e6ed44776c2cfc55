// Package hydra_test runs the Hydra launcher plugin (hydra/launcher=nodepack)
// against the real Hydra 1.3, with Debian's /usr/bin/python3 and its
// python3-omegaconf and python3-antlr4 (NODEPACK_PYTHON names another
// interpreter). The Hydra is, in this order: the source tree
// NODEPACK_HYDRA names (a folder with hydra/__init__.py; "installed" for
// the one the interpreter imports), ../shared/vendor/hydra-core-1.3 beside
// this checkout, or one installed for the interpreter. The tests skip
// with a reason (printed once, also without -v) when there is none or the
// packages are absent, and fail instead when NODEPACK_CI=1. The
// login-node test also needs the local Slurm (NODEPACK_SLURM_TESTS=1
// after scripts/slurm-local.sh start).
package hydra_test

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

var (
	python   = cmp.Or(os.Getenv("NODEPACK_PYTHON"), "/usr/bin/python3")
	here     string // this directory: integrations/hydra
	vendor   string // the real Hydra's source tree; "" for the one installed for python
	nodepack string // built for these tests
	skipWhy  string // why the tests skip, if they do
)

// findHydra sets vendor to the Hydra the tests run, or says why there is
// none.
func findHydra() string {
	importable := func(pythonpath string) error {
		cmd := exec.Command(python, "-c", "import hydra; assert hydra.__version__.startswith('1.3'), hydra.__version__")
		cmd.Env = append(os.Environ(), "PYTHONPATH="+pythonpath)
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, bytes.TrimSpace(out))
		}
		return nil
	}
	if out, err := exec.Command(python, "-c", "import omegaconf, antlr4, packaging").CombinedOutput(); err != nil {
		return fmt.Sprintf("%s cannot import omegaconf, antlr4 and packaging (apt-get install python3-omegaconf python3-antlr4 python3-packaging): %v %s", python, err, out)
	}
	switch tree := os.Getenv("NODEPACK_HYDRA"); tree {
	case "installed":
		if err := importable(""); err != nil {
			return fmt.Sprintf("NODEPACK_HYDRA=installed, but %s imports no Hydra 1.3: %v", python, err)
		}
		return ""
	case "":
	default:
		vendor, _ = filepath.Abs(tree)
		if err := importable(vendor); err != nil {
			return fmt.Sprintf("NODEPACK_HYDRA=%s is no Hydra 1.3 source tree (a folder with hydra/__init__.py): %v", tree, err)
		}
		return ""
	}
	vendor = filepath.Join(here, "..", "..", "..", "shared", "vendor", "hydra-core-1.3")
	if _, err := os.Stat(filepath.Join(vendor, "hydra", "__init__.py")); err == nil {
		return ""
	}
	if importable("") == nil {
		vendor = ""
		return ""
	}
	return "no Hydra 1.3: not at " + vendor + ", nor installed for " + python + " (NODEPACK_HYDRA=/path/to/a/hydra/source/tree, or =installed, names one)"
}

func TestMain(m *testing.M) {
	var err error
	if here, err = filepath.Abs("."); err != nil {
		panic(err)
	}
	if skipWhy = findHydra(); skipWhy != "" {
		if os.Getenv("NODEPACK_CI") == "1" {
			fmt.Println("the Hydra tests cannot run:", skipWhy)
			os.Exit(1)
		}
		if os.Getenv("NODEPACK_HYDRA") != "" {
			// Named, and not there: a mistake to say, not a skip.
			fmt.Println("the Hydra tests cannot run:", skipWhy)
			os.Exit(1)
		}
		// Without -run, none runs, so that go test says so beside the
		// package ("[no tests to run]") instead of a plain ok; with -run
		// (or -v) each says why it skips.
		flag.Parse()
		fmt.Println("integrations/hydra: the tests skip:", skipWhy)
		if flag.Lookup("test.run").Value.String() == "" {
			flag.Set("test.run", "^$")
		}
		os.Exit(m.Run())
	}
	bin, err := os.MkdirTemp("", "nodepack-hydra-bin-")
	if err != nil {
		panic(err)
	}
	nodepack = filepath.Join(bin, "nodepack")
	build := exec.Command("go", "build", "-o", nodepack, "./cmd/nodepack")
	build.Dir, build.Stdout, build.Stderr = filepath.Join(here, "..", ".."), os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Println("building nodepack:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(bin)
	os.Exit(code)
}

func needHydra(t *testing.T) {
	t.Helper()
	if skipWhy != "" {
		t.Skip(skipWhy)
	}
}

// env is the environment the Hydra app runs in: the real Hydra, the
// plugin and the test's sweeper on PYTHONPATH, nodepack in PATH, four
// fake GPUs, and no batch job (the launcher runs packed on this node).
func env(extra ...string) []string {
	var e []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "PYTHONPATH" || k == "PATH" || k == "CUDA_VISIBLE_DEVICES" || strings.HasPrefix(k, "SLURM_") || strings.HasPrefix(k, "SGE_") || k == "JOB_ID" ||
			strings.HasPrefix(k, "PBS_") || strings.HasPrefix(k, "LSB_") {
			continue
		}
		e = append(e, kv)
	}
	return append(append(e,
		"PYTHONPATH="+strings.Join(slices.DeleteFunc([]string{vendor, here, filepath.Join(here, "testdata", "plugins")}, func(p string) bool { return p == "" }), string(os.PathListSeparator)),
		"PYTHONDONTWRITEBYTECODE=1",
		"PATH="+filepath.Dir(nodepack)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"CUDA_VISIBLE_DEVICES=0,1,2,3"), extra...)
}

// app returns the command that runs the test app with args in dir.
func app(dir string, args ...string) *exec.Cmd {
	cmd := exec.Command(python, append([]string{filepath.Join(here, "testdata", "app", "app.py")}, args...)...)
	cmd.Dir, cmd.Env = dir, env()
	return cmd
}

// seen reads what each job wrote to its seen.txt, by job directory.
func seen(t *testing.T, sweep string) map[string]map[string]string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(sweep, "*", "seen.txt"))
	all := map[string]map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, kv := range strings.Fields(string(b)) {
			k, v, _ := strings.Cut(kv, "=")
			m[k] = v
		}
		all[filepath.Base(filepath.Dir(f))] = m
	}
	return all
}

// returned finds the launcher's line for each job: "#N : OVERRIDES:
// returned VALUE" (or failed), in the order it logged them.
func returned(out string) []string {
	var lines []string
	re := regexp.MustCompile(`\t(#\d+ : .*: (returned|failed).*)$`)
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			lines = append(lines, m[1])
		}
	}
	return lines
}

// clusterduckReturns is what the launcher says each job of clusterduck's
// example returned, in order: layers × 10 + iteration + lr.
var clusterduckReturns = []string{
	"#0 : model=convnet +iteration=0: returned 40.5",
	"#1 : model=convnet +iteration=1: returned 41.5",
	"#2 : model=transformer +iteration=0: returned 120.5",
	"#3 : model=transformer +iteration=1: returned 121.5",
}

// TestClusterduckExample is clusterduck's example with its launcher
// replaced: four jobs on four fake GPUs, each on its own GPU, each in its
// own job directory with Hydra's .hydra/ files, the return values back in
// order.
func TestClusterduckExample(t *testing.T) {
	needHydra(t)
	dir := t.TempDir()
	cmd := app(dir, "--multirun", "model=convnet,transformer", "+iteration=range(2)", "hydra/launcher=nodepack", "hydra.launcher.mode=local")
	b, err := cmd.CombinedOutput()
	out := string(b)
	if err != nil {
		t.Fatalf("multirun: %v\n%s", err, out)
	}
	sweeps, _ := filepath.Glob(filepath.Join(dir, "multirun", "*", "*"))
	if len(sweeps) != 1 {
		t.Fatalf("want one sweep directory under multirun/, got %v\n%s", sweeps, out)
	}
	jobs := seen(t, sweeps[0])
	want := map[string][2]string{"0": {"convnet", "0"}, "1": {"convnet", "1"}, "2": {"transformer", "0"}, "3": {"transformer", "1"}}
	gpus := map[string]bool{}
	for num, w := range want {
		j := jobs[num]
		if j == nil || j["model"] != w[0] || j["iteration"] != w[1] || j["num"] != num {
			t.Errorf("job %s saw %v, want model %s iteration %s num %s", num, j, w[0], w[1], num)
		}
		gpus[j["cuda"]] = true
		overrides, err := os.ReadFile(filepath.Join(sweeps[0], num, ".hydra", "overrides.yaml"))
		if wantO := fmt.Sprintf("- model=%s\n- +iteration=%s\n", w[0], w[1]); err != nil || string(overrides) != wantO {
			t.Errorf("job %s: .hydra/overrides.yaml %q, %v; want %q", num, overrides, err, wantO)
		}
		for _, f := range []string{".hydra/config.yaml", ".hydra/hydra.yaml", "app.log"} {
			if _, err := os.Stat(filepath.Join(sweeps[0], num, f)); err != nil {
				t.Errorf("job %s has no %s: %v", num, f, err)
			}
		}
	}
	if len(gpus) != 4 || gpus[""] {
		t.Errorf("the four jobs saw GPUs %v: want one each, all different", gpus)
	}
	if got := returned(out); !slices.Equal(got, clusterduckReturns) {
		t.Errorf("returns %q, want %q\n%s", got, clusterduckReturns, out)
	}
}

// TestSweeperGetsReturnValues: a sweeper that picks its next parameters
// from the jobs' return values gets each job's value, in order, over two
// launches.
func TestSweeperGetsReturnValues(t *testing.T) {
	needHydra(t)
	dir := t.TempDir()
	b, err := app(dir, "--multirun", "model=convnet", "hydra/sweeper=pick", "hydra/launcher=nodepack", "hydra.launcher.mode=local", "hydra.sweep.dir=sweep").CombinedOutput()
	if err != nil {
		t.Fatalf("multirun: %v\n%s", err, b)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "sweep", "picks.json"))
	if err != nil {
		t.Fatalf("the sweeper wrote no picks: %v\n%s", err, b)
	}
	var doc struct {
		Picks []struct {
			Overrides []string `json:"overrides"`
			Value     float64  `json:"value"`
		} `json:"picks"`
		Best []float64 `json:"best"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	lrs := []string{"0.1", "0.3", "0.9", "0.45", "1.8"} // the second round around the best of the first
	if len(doc.Picks) != len(lrs) {
		t.Fatalf("%d picks, want %d: %s", len(doc.Picks), len(lrs), raw)
	}
	for i, p := range doc.Picks {
		var lr float64
		fmt.Sscan(lrs[i], &lr)
		if !slices.Equal(p.Overrides, []string{"model=convnet", "lr=" + lrs[i]}) || p.Value != 40+lr {
			t.Errorf("pick %d: %v returned %v; want lr=%s returning %v", i, p.Overrides, p.Value, lrs[i], 40+lr)
		}
	}
	if len(doc.Best) != 2 || doc.Best[0] != 1.8 {
		t.Errorf("best %v, want lr 1.8", doc.Best)
	}
}

// TestFailedJob: a job that raises is a failed JobReturn: the multirun
// fails as with the basic launcher, saying which job, its failure class,
// its error and its log; the other jobs ran and returned.
func TestFailedJob(t *testing.T) {
	needHydra(t)
	dir := t.TempDir()
	b, err := app(dir, "--multirun", "model=convnet", "+iteration=range(3)", "fail=1", "hydra/launcher=nodepack", "hydra.launcher.mode=local", "hydra.sweep.dir=sweep").CombinedOutput()
	out := string(b)
	if err == nil {
		t.Fatalf("a multirun with a failed job exited 0:\n%s", out)
	}
	re := regexp.MustCompile(`job #1 \(model=convnet \+iteration=1 fail=1\) failed: class exit, exit 1, ValueError: iteration 1 fails on purpose, log (\S+stderr\.log)`)
	m := re.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("the error does not say which job failed, why and where its log is:\n%s", out)
	}
	if log, err := os.ReadFile(m[1]); err != nil || !strings.Contains(string(log), "fails on purpose") {
		t.Errorf("the log it names: %v\n%s", err, log)
	}
	got := returned(out)
	if len(got) != 3 || got[0] != "#0 : model=convnet +iteration=0 fail=1: returned 40.5" || !strings.HasPrefix(got[1], "#1 : model=convnet +iteration=1 fail=1: failed: ") ||
		got[2] != "#2 : model=convnet +iteration=2 fail=1: returned 42.5" {
		t.Errorf("returns %q", got)
	}
}

// TestStaleReturnIsNotTaken: a job that returned once and, run again
// (--restart), dies without a word is a failed job: the value its first
// attempt left in its directory is not returned for it.
func TestStaleReturnIsNotTaken(t *testing.T) {
	needHydra(t)
	dir := t.TempDir()
	die := filepath.Join(dir, "die")
	args := []string{"--multirun", "model=convnet", "+iteration=range(2)", "die_if=" + die, "hydra/launcher=nodepack", "hydra.launcher.mode=local",
		"hydra.launcher.run_args=['--restart']", "hydra.sweep.dir=sweep"}
	if b, err := app(dir, args...).CombinedOutput(); err != nil {
		t.Fatalf("the first multirun: %v\n%s", err, b)
	}
	os.WriteFile(die, nil, 0o644)
	b, err := app(dir, args...).CombinedOutput()
	if err == nil {
		t.Fatalf("jobs that died were returned as completed:\n%s", b)
	}
	if !strings.Contains(string(b), "failed: class exit, exit 3") {
		t.Errorf("the error does not say the job failed with exit 3:\n%s", b)
	}
	for _, r := range returned(string(b)) {
		if strings.Contains(r, "returned") {
			t.Errorf("a stale value was returned: %s", r)
		}
	}
}

// TestKilledMultirunResumes: a multirun interrupted with Ctrl-C while
// two jobs run, then run again as it was typed: the finished jobs do not
// run again and still return their values, the interrupted ones run.
func TestKilledMultirunResumes(t *testing.T) {
	needHydra(t)
	dir := t.TempDir()
	ran, release := filepath.Join(dir, "ran.txt"), filepath.Join(dir, "release")
	args := []string{"--multirun", "model=convnet,transformer", "+iteration=range(2)", "log=" + ran, "wait_for=" + release,
		"hydra/launcher=nodepack", "hydra.launcher.mode=local", "hydra.sweep.dir=sweep"}
	cmd := app(dir, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // a terminal's process group
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The convnet jobs finish (nodepack recorded them); the transformer
	// ones wait for release.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		b, _ := os.ReadFile(ran)
		st, _ := exec.Command(nodepack, "status", "--json", filepath.Join(dir, "sweep", ".nodepack", "launch-0")).Output()
		var doc struct {
			Counts map[string]int `json:"counts"`
		}
		json.Unmarshal(st, &doc)
		if len(strings.Fields(string(b))) == 4 && doc.Counts["succeeded"] == 2 && doc.Counts["running"] == 2 {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("the jobs did not all start: ran %q\n%s", b, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	syscall.Kill(-cmd.Process.Pid, syscall.SIGINT) // Ctrl-C
	if err := cmd.Wait(); err == nil {
		t.Fatalf("the interrupted multirun exited 0:\n%s", out.String())
	}
	os.WriteFile(release, nil, 0o644)
	b, err := app(dir, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("the rerun: %v\n%s", err, b)
	}
	r, _ := os.ReadFile(ran)
	counts := map[string]int{}
	for _, num := range strings.Fields(string(r)) {
		counts[num]++
	}
	if counts["0"] != 1 || counts["1"] != 1 || counts["2"] != 2 || counts["3"] != 2 {
		t.Errorf("jobs ran %v times: want the convnet ones (0, 1) once, the interrupted ones (2, 3) again", counts)
	}
	got := returned(string(b))
	if len(got) != 4 || !strings.HasSuffix(got[0], "returned 40.5") || !strings.HasSuffix(got[3], "returned 121.5") {
		t.Errorf("the rerun returned %q", got)
	}
}

// TestRequestsPerJob: a job whose config asks for 2 GPUs runs beside
// quarter-GPU jobs: it sees two GPUs, each of them one.
func TestRequestsPerJob(t *testing.T) {
	needHydra(t)
	dir := t.TempDir()
	b, err := app(dir, "--multirun", "model=convnet,big", "+iteration=range(4)", "hydra/launcher=nodepack", "hydra.launcher.mode=local",
		"hydra.launcher.gpus_per_run=0.25", "hydra.sweep.dir=sweep").CombinedOutput()
	if err != nil {
		t.Fatalf("multirun: %v\n%s", err, b)
	}
	jobs := seen(t, filepath.Join(dir, "sweep"))
	if len(jobs) != 8 {
		t.Fatalf("%d jobs ran, want 8\n%s", len(jobs), b)
	}
	for num, j := range jobs {
		want := 1
		if j["model"] == "big" {
			want = 2
		}
		if got := len(strings.Split(j["cuda"], ",")); got != want || j["cuda"] == "" {
			t.Errorf("job %s (%s) saw CUDA_VISIBLE_DEVICES=%q, want %d GPUs", num, j["model"], j["cuda"], want)
		}
	}
	task, _ := os.ReadFile(filepath.Join(dir, "sweep", ".nodepack", "launch-0.txt"))
	if !strings.Contains(string(task), "#nodepack gpus=2\n") {
		t.Errorf("the task file has no request for the big jobs:\n%s", task)
	}
}

// TestLoginNodeSlurm: on a login node the launcher submits the jobs
// through nodepack submit to the local Slurm, waits for the array, and
// returns every job's value.
func TestLoginNodeSlurm(t *testing.T) {
	needHydra(t)
	if os.Getenv("NODEPACK_SLURM_TESTS") != "1" {
		t.Skip("needs the local Slurm: NODEPACK_SLURM_TESTS=1 after scripts/slurm-local.sh start")
	}
	dir := t.TempDir()
	conf := os.Getenv("SLURM_CONF")
	if conf == "" {
		out, err := exec.Command(filepath.Join(here, "..", "..", "scripts", "slurm-local.sh"), "env").Output()
		if err != nil {
			t.Fatal(err)
		}
		_, conf, _ = strings.Cut(strings.TrimSpace(string(out)), "=")
	}
	// No hydra.launcher.time: the local queue has no limit, and the jobs
	// run; auto mode finds that Slurm answers.
	args := []string{"--multirun", "model=convnet,transformer", "+iteration=range(2)", "hydra/launcher=nodepack",
		"hydra.launcher.nodes=2", "hydra.launcher.cpus_per_node=1", "hydra.sweep.dir=sweep"}
	cmd := app(dir, args...)
	cmd.Env = append(cmd.Env, "SLURM_CONF="+conf)
	b, err := cmd.CombinedOutput()
	out := string(b)
	if err != nil {
		t.Fatalf("multirun: %v\n%s", err, out)
	}
	if !strings.Contains(out, "with nodepack (submit)") || !strings.Contains(out, "2 array tasks of the sweep's shared pool") {
		t.Errorf("the launcher did not submit an array of 2:\n%s", out)
	}
	if got := returned(out); !slices.Equal(got, clusterduckReturns) {
		t.Errorf("returns %q, want %q\n%s", got, clusterduckReturns, out)
	}
	if jobs := seen(t, filepath.Join(dir, "sweep")); len(jobs) != 4 {
		t.Errorf("%d job directories, want 4", len(jobs))
	}
	// Run again, as the advice after an interruption says: the sweep was
	// submitted before, so the launcher resubmits what is left (nothing)
	// and returns the same values, where submit would refuse.
	cmd = app(dir, args...)
	cmd.Env = append(cmd.Env, "SLURM_CONF="+conf)
	b, err = cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(b), "nodepack resubmit") || !strings.Contains(string(b), "nothing left") || !slices.Equal(returned(string(b)), clusterduckReturns) {
		t.Errorf("the multirun run again: %v\n%s", err, b)
	}
}

// TestRetryFailedAsAdvised: a job that failed says how to run it again;
// run again as it says (after the cause is gone), it runs and returns.
// A plain rerun skips it, as nodepack skips a failed run.
func TestRetryFailedAsAdvised(t *testing.T) {
	needHydra(t)
	dir := t.TempDir()
	die := filepath.Join(dir, "die")
	os.WriteFile(die, nil, 0o644)
	args := []string{"--multirun", "model=convnet", "+iteration=range(2)", "die_if=" + die, "hydra/launcher=nodepack", "hydra.launcher.mode=local", "hydra.sweep.dir=sweep"}
	b, err := app(dir, args...).CombinedOutput()
	const advice = "once fixed, run the same multirun again with hydra.launcher.retry_failed=true to run it again"
	if err == nil || !strings.Contains(string(b), "failed: class exit, exit 3") || !strings.Contains(string(b), advice) {
		t.Fatalf("the failed multirun: %v, want the failure and the advice:\n%s", err, b)
	}
	os.Remove(die)
	if b, err := app(dir, args...).CombinedOutput(); err == nil || !strings.Contains(string(b), "failed (skipped)") {
		t.Errorf("a plain rerun ran the failed jobs again: %v\n%s", err, b)
	}
	b, err = app(dir, append(args, "hydra.launcher.retry_failed=true")...).CombinedOutput()
	if got := returned(string(b)); err != nil || len(got) != 2 || !strings.HasSuffix(got[0], "returned 40.5") || !strings.HasSuffix(got[1], "returned 41.5") {
		t.Errorf("run again as advised: %v, returns %q\n%s", err, got, b)
	}
}

// readmeHydra returns the README's Hydra block and a directory with the
// user's app in it as the block names it (python is their Python, train.py
// their app: here the test app with its conf/), and a bin directory for
// the commands the user has.
func readmeHydra(t *testing.T) (block, dir, bin string) {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join(here, "..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(readme), "## With Hydra\n")
	_, block, _ = strings.Cut(section, "```sh\n")
	block, _, _ = strings.Cut(block, "```")
	if !strings.Contains(block, "hydra/launcher=nodepack") {
		t.Fatalf("the README's Hydra section has no block with hydra/launcher=nodepack:\n%s", block)
	}
	dir = t.TempDir()
	if out, err := exec.Command("cp", "-r", filepath.Join(here, "testdata", "app", "conf"), filepath.Join(here, "testdata", "app", "app.py"), dir).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	os.Rename(filepath.Join(dir, "app.py"), filepath.Join(dir, "train.py"))
	bin = filepath.Join(dir, "bin")
	os.Mkdir(bin, 0o755)
	os.Symlink(python, filepath.Join(bin, "python"))
	return block, dir, bin
}

// TestReadmeHydra types the README's Hydra block as a user inside an
// allocation would: the launcher runs the jobs packed here.
func TestReadmeHydra(t *testing.T) {
	needHydra(t)
	block, dir, bin := readmeHydra(t)
	cmd := exec.Command("bash", "-e", "-c", block)
	cmd.Dir = dir
	cmd.Env = append(env("SLURM_JOB_ID=4242"), "PATH="+bin+string(os.PathListSeparator)+filepath.Dir(nodepack)+string(os.PathListSeparator)+os.Getenv("PATH"))
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", block, err, b)
	}
	if got := returned(string(b)); len(got) != 4 || !strings.Contains(string(b), "with nodepack (local)") {
		t.Errorf("%s: returns %q\n%s", block, got, b)
	}
}

// TestPipInstall: the plugin installs with pip (Debian's setuptools, no
// network: --no-deps, --no-build-isolation), and Hydra finds it there.
func TestPipInstall(t *testing.T) {
	needHydra(t)
	if err := exec.Command(python, "-m", "pip", "--version").Run(); err != nil {
		if os.Getenv("NODEPACK_CI") == "1" {
			t.Fatalf("%s has no pip (apt-get install python3-pip)", python)
		}
		t.Skip("no pip for " + python)
	}
	target := t.TempDir()
	build := t.TempDir()
	if out, err := exec.Command("cp", "-r", here+"/.", build).CombinedOutput(); err != nil { // pip builds in the source tree: not in this checkout
		t.Fatalf("%v %s", err, out)
	}
	cmd := exec.Command(python, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--no-index", "--target", target, build)
	cmd.Env = append(env(), "PIP_DISABLE_PIP_VERSION_CHECK=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pip install: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(target, "hydra_plugins", "nodepack_launcher", "launcher.py")); err != nil {
		t.Fatalf("pip installed no launcher: %v", err)
	}
	check := exec.Command(python, "-c", `from hydra.core.plugins import Plugins
from hydra.plugins.launcher import Launcher
names = [p.__name__ for p in Plugins.instance().discover(Launcher)]
assert "NodepackLauncher" in names, names
import hydra_plugins.nodepack_launcher.launcher as l
print(l.__file__)`)
	check.Dir, check.Env = t.TempDir(), append(env(), "PYTHONPATH="+strings.Join(slices.DeleteFunc([]string{vendor, target}, func(p string) bool { return p == "" }), string(os.PathListSeparator)))
	if out, err := check.CombinedOutput(); err != nil || !strings.HasPrefix(string(out), target) {
		t.Errorf("Hydra does not find the installed plugin: %v\n%s", err, out)
	}
}

// TestResultsAndReportRankJobs: a Hydra multirun's launch directory is a
// sweep like any: the results table has each job's overrides as
// parameters and its returned number as the metric "return", sorted by
// it, and the report ranks the jobs by it, each row named by its own
// file:line however long the sweep's path. A returned dict's numbers are
// metrics by their keys, beside the per-step metrics the job reported
// itself.
func TestResultsAndReportRankJobs(t *testing.T) {
	needHydra(t)
	dir := t.TempDir()
	sweep := filepath.Join(dir, "outputs", "a-long-project-name", "multirun", "2026-11-27", "10-00-00")
	b, err := app(dir, "--multirun", "model=convnet,transformer", "+iteration=range(2)", "lr=0.1,0.2", "hydra/launcher=nodepack",
		"hydra.launcher.mode=local", "hydra.sweep.dir="+sweep).CombinedOutput()
	if err != nil {
		t.Fatalf("multirun: %v\n%s", err, b)
	}
	launch := filepath.Join(sweep, ".nodepack", "launch-0")
	csv, err := exec.Command(nodepack, "status", "--runs", "--sort", "return", launch).Output()
	if err != nil {
		t.Fatalf("status --runs: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(csv)), "\n")
	header := strings.Split(lines[0], ",")
	col := func(name string) int { return slices.Index(header, name) }
	if len(lines) != 9 || col("model") < 0 || col("iteration") < 0 || col("lr") < 0 || col("return") < 0 {
		t.Fatalf("the results table has no model, iteration, lr and return columns, or not 8 rows:\n%s", csv)
	}
	best := strings.Split(lines[1], ",")
	if best[col("model")] != "transformer" || best[col("iteration")] != "1" || best[col("lr")] != "0.2" || best[col("return")] != "121.2" {
		t.Errorf("the best job by return is %q, want transformer, iteration 1, lr 0.2, 121.2:\n%s", lines[1], csv)
	}
	page := filepath.Join(dir, "report.html")
	if out, err := exec.Command(nodepack, "report", "-o", page, launch).CombinedOutput(); err != nil {
		t.Fatalf("report: %v\n%s", err, out)
	}
	html, _ := os.ReadFile(page)
	_, data, _ := strings.Cut(string(html), `<script type="application/json" id="data">`)
	data, _, _ = strings.Cut(data, "</script>")
	var doc struct {
		Cols []string `json:"cols"`
		Rank struct {
			Metric string `json:"metric"`
		} `json:"rank"`
	}
	if err := json.Unmarshal([]byte(data), &doc); err != nil {
		t.Fatalf("the report's data: %v", err)
	}
	if doc.Rank.Metric != "return" || !slices.Contains(doc.Cols, "model") || !slices.Contains(doc.Cols, "lr") {
		t.Errorf("the report ranks by %q with columns %q: want return, with the overrides", doc.Rank.Metric, doc.Cols)
	}
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("NODEPACK_CI") == "1" {
			t.Fatal("chromium is not installed, and CI needs this test")
		}
		t.Skip("chromium is not installed (apt-get install chromium)")
	}
	dom, err := exec.Command(chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
		"--host-resolver-rules=MAP * ~NOTFOUND", "--dump-dom", "file://"+page).Output()
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	names := map[string]bool{}
	for _, m := range regexp.MustCompile(`<tr class="run" data-row="\d+"><td[^>]*>([^<]*)</td>`).FindAllStringSubmatch(string(dom), -1) {
		names[m[1]] = true
	}
	if len(names) != 8 || !names["launch-0.txt:3"] {
		t.Errorf("the runs table names its rows %q: want 8 different, as launch-0.txt:LINE", slices.Sorted(maps.Keys(names)))
	}
	if m := regexp.MustCompile(`id="bestnote">([^<]*)<`).FindStringSubmatch(string(dom)); m == nil || !strings.Contains(m[1], "runs that report return") {
		t.Errorf("the note under the best runs is %q: want it to rank the runs that report return", m)
	}
}

// TestReturnedDictIsMetrics: a job that returns a dict has each of its
// numbers as a metric, by key, beside the per-step metric it reported to
// $NODEPACK_METRICS itself.
func TestReturnedDictIsMetrics(t *testing.T) {
	needHydra(t)
	dir := t.TempDir()
	b, err := app(dir, "--multirun", "model=convnet", "+iteration=range(2)", "+as_dict=true", "hydra/launcher=nodepack",
		"hydra.launcher.mode=local", "hydra.sweep.dir=sweep").CombinedOutput()
	if err != nil {
		t.Fatalf("multirun: %v\n%s", err, b)
	}
	csv, err := exec.Command(nodepack, "status", "--runs", "--sort", "score:min", filepath.Join(dir, "sweep", ".nodepack", "launch-0")).Output()
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(csv)), "\n")
	header := strings.Split(lines[0], ",")
	for _, name := range []string{"score", "extra.layers", "loss"} {
		if !slices.Contains(header, name) {
			t.Errorf("no %s column:\n%s", name, csv)
		}
	}
	if slices.Contains(header, "return") || slices.Contains(header, "name") {
		t.Errorf("a dict's keys are its metrics, and only its numbers:\n%s", csv)
	}
	if first := strings.Split(lines[1], ","); len(lines) != 3 || first[slices.Index(header, "score")] != "40.5" {
		t.Errorf("sorted by score: %q", lines)
	}
}

// TestAutoModeWithASchedulerThatDoesNotAnswer: the README's Hydra line
// typed on a workstation where sbatch is installed but no Slurm answers
// (slurm-client installed, or the local Slurm tried and stopped): the
// launcher launches nothing and says, in one line, to add
// hydra.launcher.mode=local; no job ran. The line with that added runs
// every job here.
func TestAutoModeWithASchedulerThatDoesNotAnswer(t *testing.T) {
	needHydra(t)
	block, dir, bin := readmeHydra(t)
	for name, body := range map[string]string{
		"sbatch": "echo 'sbatch: error: Could not establish a configuration source' >&2; exit 1",
		"squeue": "printf 'squeue: error: Could not establish a configuration source\\nit says more\\n' >&2; exit 1",
	} {
		os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755)
	}
	typed := func(line string) (string, error) {
		cmd := exec.Command("bash", "-e", "-c", line)
		cmd.Dir = dir
		cmd.Env = append(env(), "PATH="+bin+string(os.PathListSeparator)+filepath.Dir(nodepack)+string(os.PathListSeparator)+os.Getenv("PATH"))
		b, err := cmd.CombinedOutput()
		return string(b), err
	}
	out, err := typed(block)
	if err == nil {
		t.Fatalf("the multirun exited 0 with a Slurm that does not answer:\n%s", out)
	}
	var said []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "hydra.launcher.mode=local") {
			said = append(said, l)
		}
	}
	if len(said) != 1 || !strings.Contains(said[0], "launched nothing") || !strings.Contains(said[0], "Could not establish a configuration source; it says more") {
		t.Errorf("want one line naming hydra.launcher.mode=local and why, got %q:\n%s", said, out)
	}
	// That line, and Hydra's own hint that follows every error it prints:
	// no traceback, no escaped newline.
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.TrimSpace(l) != "" && !strings.HasPrefix(l, "Set the environment variable HYDRA_FULL_ERROR=1") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 || strings.Contains(out, "Traceback") || strings.Contains(out, `\x0a`) {
		t.Errorf("want that one line, got %d:\n%s", len(lines), out)
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, "multirun")); len(entries) != 0 {
		t.Errorf("the launch that launched nothing left %s: %v", filepath.Join(dir, "multirun"), entries)
	}
	// The same line, as the error says to type it.
	if out, err := typed(strings.TrimSpace(block) + " hydra.launcher.mode=local"); err != nil || !slices.Equal(returned(out), clusterduckReturns) {
		t.Errorf("with hydra.launcher.mode=local: %v\n%s", err, out)
	}
}

// TestRefusedReturnSaysWhy: a job that exits 0 but leaves in place of its
// return file something hostile (a link, a FIFO, a directory, a document
// nested 100,000 deep, one over 64 MiB) is a failed job whose error says
// why: no hang, no crash of the multirun, the other job returned.
func TestRefusedReturnSaysWhy(t *testing.T) {
	needHydra(t)
	for kind, why := range map[string]string{
		"link": "a symbolic link, not followed",
		"fifo": "not a regular file",
		"dir":  "not a regular file",
		"deep": "nested too deep",
		"big":  "larger than 67108864 bytes",
	} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			b, err := app(dir, "--multirun", "model=convnet", "+iteration=range(2)", "+hostile_return="+kind, "hydra/launcher=nodepack",
				"hydra.launcher.mode=local", "hydra.sweep.dir=sweep").CombinedOutput()
			if err == nil {
				t.Fatalf("a job whose return file is a %s returned:\n%s", kind, b)
			}
			if !strings.Contains(string(b), "job #1 (model=convnet +iteration=1 +hostile_return="+kind+") succeeded: exit 0, but its return value was refused: ") ||
				!strings.Contains(string(b), why) || strings.Contains(string(b), "RecursionError") || strings.Contains(string(b), "IsADirectoryError") {
				t.Errorf("the error does not say why the value was refused (%s), or the launcher crashed on it:\n%s", why, b)
			}
			if got := returned(string(b)); len(got) != 2 || !strings.HasSuffix(got[0], "returned 40.5") {
				t.Errorf("returns %q: want job 0's value and job 1 failed", got)
			}
		})
	}
}

// TestRunsPerGPUAutoFromHydra: hydra.launcher.runs_per_gpu takes a number
// or auto, passed on to nodepack run as --runs-per-gpu.
func TestRunsPerGPUAutoFromHydra(t *testing.T) {
	needHydra(t)
	for _, v := range []string{"auto", "2"} {
		dir := t.TempDir()
		b, err := app(dir, "--multirun", "+iteration=range(3)", "hydra/launcher=nodepack", "hydra.launcher.mode=local",
			"hydra.launcher.runs_per_gpu="+v, "hydra.sweep.dir=sweep").CombinedOutput()
		if err != nil {
			t.Fatalf("runs_per_gpu=%s: %v\n%s", v, err, b)
		}
		if jobs := seen(t, filepath.Join(dir, "sweep")); len(jobs) != 3 {
			t.Fatalf("runs_per_gpu=%s: %d jobs ran, want 3\n%s", v, len(jobs), b)
		}
		ledgers, _ := filepath.Glob(filepath.Join(dir, "sweep", ".nodepack", "*", "ledger.jsonl"))
		more, _ := filepath.Glob(filepath.Join(dir, "sweep", ".nodepack", "ledger.jsonl"))
		ledgers = append(ledgers, more...)
		found := false
		for _, l := range ledgers {
			if text, _ := os.ReadFile(l); strings.Contains(string(text), `"--runs-per-gpu","`+v+`"`) {
				found = true
			}
		}
		if !found {
			t.Errorf("runs_per_gpu=%s: no ledger under sweep/.nodepack records nodepack run --runs-per-gpu %s (%q)", v, v, ledgers)
		}
	}
}

// TestPrunePriorFromHydra: hydra.launcher.prune and prune_prior reach
// nodepack run as --prune and --prune-prior: a second multirun given the
// first's launch directory (relative to where Hydra started) records it
// as its prior; one given a directory that is no sweep launches nothing
// and says so.
func TestPrunePriorFromHydra(t *testing.T) {
	needHydra(t)
	dir := t.TempDir()
	b, err := app(dir, "--multirun", "model=convnet", "+iteration=range(3)", "+as_dict=true", "hydra/launcher=nodepack",
		"hydra.launcher.mode=local", "hydra.launcher.prune='loss:min,max=2'", "hydra.sweep.dir=first").CombinedOutput()
	if err != nil {
		t.Fatalf("the first multirun: %v\n%s", err, b)
	}
	b, err = app(dir, "--multirun", "model=convnet", "+iteration=range(3)", "+as_dict=true", "hydra/launcher=nodepack",
		"hydra.launcher.mode=local", "hydra.launcher.prune='loss:min,max=2'", "hydra.launcher.prune_prior=[first/.nodepack/launch-0]", "hydra.sweep.dir=second").CombinedOutput()
	if err != nil {
		t.Fatalf("the second multirun: %v\n%s", err, b)
	}
	js, err := exec.Command(nodepack, "status", "--json", filepath.Join(dir, "second", ".nodepack", "launch-0")).Output()
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		PrunePrior struct {
			Dirs []struct {
				Dir  string
				Runs int
			}
		} `json:"prune_prior"`
	}
	want := filepath.Join(dir, "first", ".nodepack", "launch-0")
	if err := json.Unmarshal(js, &doc); err != nil || len(doc.PrunePrior.Dirs) != 1 || doc.PrunePrior.Dirs[0].Dir != want || doc.PrunePrior.Dirs[0].Runs != 3 {
		t.Errorf("the second launch's prune prior %+v (%v): want %s and its 3 runs\n%s", doc.PrunePrior, err, want, b)
	}
	os.Mkdir(filepath.Join(dir, "empty"), 0o755)
	b, err = app(dir, "--multirun", "model=convnet", "+iteration=range(3)", "+as_dict=true", "hydra/launcher=nodepack",
		"hydra.launcher.mode=local", "hydra.launcher.prune='loss:min,max=2'", "hydra.launcher.prune_prior=[empty]", "hydra.sweep.dir=third").CombinedOutput()
	if err == nil || !strings.Contains(string(b), "--prune-prior "+filepath.Join(dir, "empty")+": not a sweep's output directory") {
		t.Errorf("a prior that is no sweep: %v, want the multirun to fail saying so\n%s", err, b)
	}
	if jobs := seen(t, filepath.Join(dir, "third")); len(jobs) != 0 {
		t.Errorf("%d jobs ran with a prior that is no sweep", len(jobs))
	}
}

// TestOptunaSweeper types docs/hydra.md's block with Hydra's own Optuna
// sweeper (its v1.3.5 plugin from ../shared/vendor, its example app,
// Debian's Optuna): 8 trials in two nodepack launches of 4, each trial's
// value returned to the sweeper, and the best of them found.
func TestOptunaSweeper(t *testing.T) {
	needHydra(t)
	sweeper := filepath.Join(here, "..", "..", "..", "shared", "vendor", "hydra-optuna-sweeper-1.3")
	why := ""
	if _, err := os.Stat(filepath.Join(sweeper, "hydra_plugins", "hydra_optuna_sweeper")); err != nil {
		why = "no Hydra Optuna sweeper at " + sweeper
	} else if out, err := exec.Command(python, "-c", "import optuna").CombinedOutput(); err != nil {
		why = fmt.Sprintf("%s cannot import optuna (apt-get install python3-optuna): %v %s", python, err, out)
	}
	if why != "" {
		if os.Getenv("NODEPACK_CI") == "1" {
			t.Fatal(why)
		}
		t.Skip(why)
	}
	doc, err := os.ReadFile(filepath.Join(here, "..", "..", "docs", "hydra.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(doc), "## Hydra's Optuna sweeper\n")
	_, block, _ := strings.Cut(section, "```sh\n")
	block, _, _ = strings.Cut(block, "```")
	if !strings.Contains(block, "hydra/launcher=nodepack") {
		t.Fatalf("docs/hydra.md's Optuna section has no block with hydra/launcher=nodepack:\n%s", block)
	}
	// The example as a user has it: its app and config in a folder of
	// theirs (a copy in a temporary directory, not in this tree).
	dir := t.TempDir()
	if out, err := exec.Command("cp", "-r", filepath.Join(sweeper, "example", "sphere.py"), filepath.Join(sweeper, "example", "conf"), dir).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	bin := filepath.Join(dir, "bin")
	os.Mkdir(bin, 0o755)
	os.Symlink(python, filepath.Join(bin, "python"))
	cmd := exec.Command("bash", "-e", "-c", block)
	cmd.Dir = dir
	e := env()
	for i, kv := range e {
		if strings.HasPrefix(kv, "PYTHONPATH=") {
			e[i] = kv + string(os.PathListSeparator) + sweeper
		}
	}
	cmd.Env = append(e, "PATH="+bin+string(os.PathListSeparator)+filepath.Dir(nodepack)+string(os.PathListSeparator)+os.Getenv("PATH"))
	b, err := cmd.CombinedOutput()
	out := string(b)
	if err != nil {
		t.Fatalf("%s: %v\n%s", block, err, out)
	}
	got := returned(out)
	if len(got) != 8 {
		t.Fatalf("%d trials returned, want 8:\n%s", len(got), out)
	}
	best := ""
	bestValue := 0.0
	for i, r := range got {
		_, v, _ := strings.Cut(r, ": returned ")
		var value float64
		if _, err := fmt.Sscan(v, &value); err != nil {
			t.Fatalf("trial %d: %q", i, r)
		}
		if best == "" || value < bestValue {
			best, bestValue = r, value
		}
	}
	if n := strings.Count(out, "Launching 4 jobs with nodepack (local)"); n != 2 {
		t.Errorf("%d launches of 4 jobs, want 2:\n%s", n, out)
	}
	if want := fmt.Sprintf("Best value: %v", bestValue); !strings.Contains(out, want) {
		t.Errorf("the sweeper does not say %q (the best returned: %s):\n%s", want, best, out)
	}
	launches, _ := filepath.Glob(filepath.Join(dir, "multirun", "*", "*", ".nodepack", "launch-*", "ledger.jsonl"))
	if len(launches) != 2 {
		t.Errorf("ledgers %v, want two launches", launches)
	}
}
