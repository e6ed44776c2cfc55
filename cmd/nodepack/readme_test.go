package main

// The README's commands and every --help example are executed here, in a
// sandbox with fake GPUs, so that none of them can rot.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// elsewhere lists the README commands this test does not run, with where
// they are run instead. Every other command in the README is run here.
var elsewhere = map[string]string{
	"go test -timeout 30m ./...": "the test suite itself (.ci/run runs it, with -race)",
	"SLURM_LOCAL_KILLWAIT=5 SLURM_LOCAL_CRED_EXPIRE=5 scripts/slurm-local.sh start":                        "needs root and a few minutes: .ci/run runs this block in its Slurm step",
	`eval "$(scripts/slurm-local.sh env)"`:                                                                 "the Slurm block, run by .ci/run",
	"NODEPACK_SLURM_TESTS=1 go test -count=1 -v -timeout 25m ./examples/slurm":                             "the Slurm block, run by .ci/run",
	"scripts/slurm-local.sh stop":                                                                          "the Slurm block, run by .ci/run",
	"nodepack submit --slurm --nodes 3 --time 4h --gpus-per-node 4 -o seeds -- --runs-per-gpu 2 tasks.txt": "needs Slurm: examples/slurm's TestReadmeSubmit types the block on the local Slurm",
	"nodepack status seeds":   "after a submission: examples/slurm's and examples/sge's TestReadmeSubmit type it",
	"nodepack resubmit seeds": "after a submission: examples/slurm's and examples/sge's TestReadmeSubmit type it",
	"nodepack submit --sge --nodes 3 --time 4h --gpus-per-node 4 -o seeds -- --runs-per-gpu 2 tasks.txt":                            "needs Grid Engine: examples/sge's TestReadmeSubmit types the block on the local cell",
	"python train.py --multirun model=convnet,transformer +iteration='range(2)' hydra/launcher=nodepack":                            "needs the real Hydra: integrations/hydra's TestReadmeHydra types it",
	"python sphere.py --multirun hydra.sweeper.n_trials=8 hydra.sweeper.n_jobs=4 hydra/launcher=nodepack hydra.launcher.mode=local": "needs the real Hydra and its Optuna sweeper: integrations/hydra's TestOptunaSweeper types it",
	"scripts/sge-local.sh start":                                           "needs root and a minute: .ci/run runs this block in its Grid Engine step",
	`eval "$(scripts/sge-local.sh env)"`:                                   "the Grid Engine block, run by .ci/run",
	"NODEPACK_SGE_TESTS=1 go test -count=1 -v -timeout 15m ./examples/sge": "the Grid Engine block, run by .ci/run",
	"scripts/sge-local.sh stop":                                            "the Grid Engine block, run by .ci/run",
}

// commandLimit is how long one README or --help command may take before
// it counts as hung (a block of the README's, twice that: it builds
// nodepack). It is for hangs, not for speed: with the race detector and
// two CPU hogs on 2 CPUs, what takes seconds idle has taken minutes.
const commandLimit = 5 * time.Minute

// sandbox is a directory with a copy of the repository (so go run and go
// install work, and nothing lands in the real one), a bin directory first
// in PATH with nodepack (this test binary) and stand-ins for python,
// squeue, scontrol and ch-run, and the fixture files the examples name.
type sandbox struct {
	dir, bin string
	env      []string
}

// needs are what a documented command needs beyond what every test
// machine has, by a word of the command: the TPE searcher needs
// Debian's python3 with Optuna. .ci/run installs each.
var needs = []struct {
	word, what string
	have       func() bool
}{
	{"tpe.py", "Debian's python3-optuna (apt-get install python3-optuna)", sync.OnceValue(func() bool {
		return exec.Command("/usr/bin/python3", "-c", "import optuna").Run() == nil
	})},
}

// lacking reports whether this machine lacks what script needs, saying
// so: where a need is missing the command is skipped with the reason, or,
// under NODEPACK_CI (which installs it), fails.
func lacking(t *testing.T, what, script string) bool {
	t.Helper()
	for _, n := range needs {
		if !strings.Contains(script, n.word) || n.have() {
			continue
		}
		if os.Getenv("NODEPACK_CI") != "" {
			t.Errorf("%s needs %s, which is missing, and CI needs it:\n%s", what, n.what, script)
		} else {
			t.Logf("%s skipped: it needs %s\n%s", what, n.what, script)
		}
		return true
	}
	return false
}

func newSandbox(t *testing.T) *sandbox {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	sb := &sandbox{dir: dir, bin: filepath.Join(dir, "bin")}
	copyCmd := exec.Command("bash", "-c", `git ls-files -z | xargs -0 cp --parents -t "$1"`, "copy", dir)
	copyCmd.Dir = root
	if out, err := copyCmd.CombinedOutput(); err != nil {
		t.Fatalf("copying the repository: %v\n%s", err, out)
	}
	exe := journeyBinary(t)
	os.MkdirAll(sb.bin, 0o755)
	script := func(name, body string) {
		if err := os.WriteFile(filepath.Join(sb.bin, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	script("nodepack", "exec "+exe+` "$@"`)
	script("python", `exec python3 "$@"`)
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		// A user's python3 on Debian, with the packages .ci/run installs
		// (python3-optuna for the search examples).
		script("python3", `exec /usr/bin/python3 "$@"`)
	}
	// squeue answers the queue query of status and resubmit (no job is
	// queued), and nothing else; sbatch takes a job and runs nothing.
	script("squeue", `case "$*" in *'%F|%K|%T|%N'*) exit 0;; esac; echo "squeue: no Slurm in this sandbox" >&2; exit 1`)
	script("sbatch", `echo 4242`)
	script("ch-run", `exec "$(dirname "$0")/../examples/sweeps/ch-run-standin.sh" "$@"`) // Charliecloud's, as the sweeps README uses it
	script("scontrol", `echo "scontrol: no Slurm in this sandbox" >&2; exit 1`)
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		// No CGO_CFLAGS exported and a Go settings file of the sandbox's
		// own: the README's go env -w line must make builds quiet itself.
		if k == "PATH" || k == "GOPATH" || k == "CUDA_VISIBLE_DEVICES" || strings.HasPrefix(k, "SLURM_") || strings.HasPrefix(k, "SGE_") ||
			strings.HasPrefix(k, "PBS_") || strings.HasPrefix(k, "LSB_") || k == "JOB_ID" || k == "NODEPACK_TEST_AS_MAIN" || k == "CGO_CFLAGS" || k == "GOENV" {
			continue
		}
		sb.env = append(sb.env, kv)
	}
	modcache, _ := exec.Command("go", "env", "GOMODCACHE").Output()
	gocache, _ := exec.Command("go", "env", "GOCACHE").Output()
	// A home of the sandbox's own: examples that install a completion
	// script or the manual page write under ~. Go keeps its build cache.
	home := filepath.Join(dir, "home")
	os.Mkdir(home, 0o755)
	sb.env = append(sb.env, "HOME="+home, "GOCACHE="+strings.TrimSpace(string(gocache)),
		"PATH="+sb.bin+string(os.PathListSeparator)+filepath.Join(dir, "gopath", "bin")+string(os.PathListSeparator)+os.Getenv("PATH"),
		"GOPATH="+filepath.Join(dir, "gopath"), "GOMODCACHE="+strings.TrimSpace(string(modcache)), "GOFLAGS=-mod=mod", "GOENV="+filepath.Join(dir, "goenv"))
	if out, _ := sb.shell("nodepack detect --json", time.Minute, 0); strings.Contains(out, `"gpu_source": "nvml"`) {
		t.Skip("an NVIDIA driver is present: the examples are checked with fake GPUs")
	}
	return sb
}

// journey holds the nodepack the sandboxes run: built once per test
// process, as a user builds it (go build, no race detector: the journeys
// check what a user types, the race detector checks the library's own
// tests), so that a suite under -race on a loaded machine spends its
// time on the journeys, not on instrumenting them.
var journey struct {
	once sync.Once
	path string
	err  error
	out  []byte
}

// journeyBinary returns the nodepack the sandboxes run.
func journeyBinary(t *testing.T) string {
	t.Helper()
	journey.once.Do(func() {
		dir, err := os.MkdirTemp("", "nodepack-journey-")
		if err != nil {
			journey.err = err
			return
		}
		journey.path = filepath.Join(dir, "nodepack")
		cmd := exec.Command("go", "build", "-o", journey.path, "./cmd/nodepack")
		cmd.Dir = filepath.Join("..", "..")
		cmd.Env = append(os.Environ(), "CGO_CFLAGS=-O2 -g -Wno-deprecated-declarations")
		journey.out, journey.err = cmd.CombinedOutput()
	})
	if journey.err != nil {
		t.Fatalf("go build ./cmd/nodepack: %v\n%s", journey.err, journey.out)
	}
	return journey.path
}

// shell runs script with bash in the sandbox; with stopAfter it sends
// SIGINT after that long, for commands that run until interrupted.
func (sb *sandbox) shell(script string, limit, stopAfter time.Duration) (string, error) {
	return sb.shellIn("", script, limit, stopAfter)
}

// shellIn is shell in a directory of the sandbox.
func (sb *sandbox) shellIn(dir, script string, limit, stopAfter time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-o", "pipefail", "-c", script)
	cmd.Dir, cmd.Env = filepath.Join(sb.dir, dir), sb.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out syncBuilder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return "", err
	}
	if stopAfter > 0 {
		go func() {
			time.Sleep(stopAfter)
			syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
		}()
	}
	err := cmd.Wait()
	if stopAfter > 0 {
		var exit *exec.ExitError
		if errors.As(err, &exit) && exit.ProcessState.Sys().(syscall.WaitStatus).Signal() == syscall.SIGINT {
			err = nil // stopped as planned
		}
	}
	return out.String(), err
}

// readmeCommands returns the commands of the README's sh blocks, one
// string per block (backslash continuations joined), the inline code
// spans that are whole nodepack commands, and those that name an output
// directory by a placeholder (DIR, nodepack-JOBID): filled, they are run
// too (see readmeFills).
func readmeCommands(t *testing.T, readme string) (blocks, inline, named []string) {
	t.Helper()
	f, err := os.Open(filepath.Join("../..", readme))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var block []string
	inBlock, shell := false, false
	span := regexp.MustCompile("`((?:taskset -c [0-9,-]+ )?nodepack [^`]+)`")
	placeholder := regexp.MustCompile(`\b[A-Z]{3,}\b|\[|…`)
	synopsis := regexp.MustCompile(`\[|…|FILE|TASKFILE`)
	outputDir := regexp.MustCompile(`\bDIR\b|nodepack-[A-Z]+ID\b`)
	var paragraph []string
	spans := func() {
		table := len(paragraph) > 0 && strings.HasPrefix(paragraph[0], "|")
		// A span may break over lines: look for them in the paragraph.
		for _, m := range span.FindAllStringSubmatch(strings.Join(paragraph, " "), -1) {
			cmd := strings.Join(strings.Fields(m[1]), " ")
			if table {
				cmd = strings.ReplaceAll(cmd, `\|`, "|") // a table cell's code shows \| as |
			}
			switch {
			case outputDir.MatchString(cmd) && !synopsis.MatchString(cmd):
				named = append(named, cmd)
			case placeholder.MatchString(cmd), cmd == "nodepack run", cmd == "nodepack status", cmd == "nodepack submit":
				// Not a whole command: something to fill in, or only the
				// name of a command that needs arguments.
			default:
				inline = append(inline, cmd)
			}
		}
		paragraph = nil
	}
	for sc := bufio.NewScanner(f); sc.Scan(); {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "```") && !inBlock:
			spans()
			inBlock, shell = true, line == "```sh"
			block = nil
		case strings.HasPrefix(line, "```"):
			if shell && len(block) > 0 {
				blocks = append(blocks, strings.Join(block, "\n"))
			}
			inBlock = false
		case inBlock && shell:
			block = append(block, line)
		case !inBlock && strings.TrimSpace(line) == "":
			spans()
		case !inBlock:
			paragraph = append(paragraph, line)
		}
	}
	spans()
	return blocks, inline, named
}

// readmeFillSetup makes what readmeFills' commands read, in a directory
// fill/ of the sandbox: a sweep that ran in Slurm job 600 (one run
// failed), and one sharded over Slurm array 700.
const readmeFillSetup = `mkdir -p fill && cd fill
seq 12 | sed 's/^/echo line /; 5s/$/; test -e fixed/' > tasks.txt
SLURM_JOB_ID=600 nodepack run -q tasks.txt || test $? = 1
touch fixed
for i in 0 1 2; do
  SLURM_JOB_ID=70$i SLURM_ARRAY_JOB_ID=700 SLURM_ARRAY_TASK_ID=$i SLURM_ARRAY_TASK_MIN=0 SLURM_ARRAY_TASK_MAX=2 SLURM_ARRAY_TASK_COUNT=3 nodepack run -q tasks.txt
done`

// readmeFills runs, in fill/ after readmeFillSetup, each README command
// that names an output directory by a placeholder, filled in as a user
// would type it after the job the placeholder names: a test fails when
// the README gains such a command without an entry here.
var readmeFills = map[string]string{
	"nodepack status nodepack-ARRAYID": "nodepack status nodepack-700 | grep -c '(shard ' | grep -qx 3",
	"nodepack status DIR":              "(nodepack status nodepack-600 || test $? = 1) | grep '^nodepack-600-tasks-.*: 12 runs: '",
	"nodepack status --runs DIR":       "nodepack status --runs 600 | grep -c , | grep -qx 13",
	// Under the sandbox's pipefail: status's own 1 (a run failed), the
	// first line printed, never 141.
	"nodepack status DIR | head -1": "{ nodepack status nodepack-600 | head -1 > first.out || test $? = 1; } && grep -q '^nodepack-600-tasks-.*: 12 runs: ' first.out",
	// tail follows the running runs until they end: one that runs until
	// it is let go, in job 800.
	"nodepack tail DIR": `echo 'echo started; until test -e release; do sleep 0.1; done; echo released' > slow.txt
SLURM_JOB_ID=800 nodepack run -q slow.txt & sweep=$!
until nodepack status 800 2>/dev/null | grep -q ' 1 running'; do sleep 0.1; done
nodepack tail nodepack-800 > tail.out & tail=$!
until grep -q started tail.out; do sleep 0.1; done
touch release; wait $sweep $tail
grep -F '[slow.txt:1] released' tail.out`,
	"nodepack tail DIR tasks.txt:12": "nodepack tail nodepack-600 tasks.txt:12 | grep -F '[tasks.txt:12] line 12'",
	"nodepack report DIR":            "nodepack report nodepack-600 && test -s nodepack-600-tasks-*/report.html",
	"nodepack retry DIR":             "nodepack retry 600 && nodepack status 600 | grep '12 succeeded'",
	"nodepack status --failed DIR":   "(nodepack status --failed 600 || test $? = 1) | grep -F 'exit (exit 1)  1 attempt  tasks.txt:5'",
	// job 600's one failure is of class exit: a class no run failed of
	// retries nothing and says which classes there are.
	"nodepack retry --class cuda-oom DIR": "nodepack retry --class cuda-oom 600 2>&1 | grep -F 'of class cuda-oom (failed: 1 exit)'",
}

// commandLines splits a block into its commands, without comments.
func commandLines(block string) []string {
	var lines []string
	for _, l := range strings.Split(strings.ReplaceAll(block, "\\\n", " "), "\n") {
		if i := strings.Index(l, "   #"); i >= 0 {
			l = l[:i]
		}
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	return lines
}

// readmes are the READMEs whose commands are run, each in its directory,
// and the pages of docs/, whose commands run from the repository's root
// as a user types them there.
func readmes(t *testing.T) []string {
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil || len(docs) == 0 {
		t.Fatalf("no docs/*.md: %v", err)
	}
	list := []string{"README.md", "examples/sweeps/README.md", "examples/search/README.md"}
	for _, d := range docs {
		list = append(list, filepath.Join("docs", filepath.Base(d)))
	}
	return list
}

// TestReadmeCommands runs every command of the READMEs: each sh block as
// one script (its commands depend on each other), and every inline
// nodepack command, in a sandbox.
func TestReadmeCommands(t *testing.T) {
	t.Parallel() // its commands run in processes of their own: beside the other such tests
	if testing.Short() {
		t.Skip("copies the repository and builds nodepack")
	}
	sb := newSandbox(t)
	listed := map[string]bool{}
	if out, err := sb.shell(readmeFillSetup, commandLimit, 0); err != nil {
		t.Fatalf("setup of the commands that name an output directory: %v\n%s", err, out)
	}
	filled := map[string]bool{}
	for _, readme := range readmes(t) {
		dir := filepath.Dir(readme)
		if dir == "docs" {
			dir = "."
		}
		blocks, inline, named := readmeCommands(t, readme)
		for _, cmd := range named {
			script, ok := readmeFills[cmd]
			if !ok {
				t.Errorf("%s: %q names an output directory, and readmeFills does not fill it in: add how a user types it", readme, cmd)
				continue
			}
			filled[cmd] = true
			t.Logf("%s: %s as %s", readme, cmd, script)
			if out, err := sb.shellIn("fill", script, commandLimit, 0); err != nil {
				t.Errorf("%s: %q, typed as %q, failed: %v\n%s", readme, cmd, script, err, out)
			}
		}
		if len(blocks)+len(inline) < 3 && !strings.HasPrefix(readme, "docs/") {
			t.Fatalf("found %d blocks and %d inline commands in %s: the parser is broken", len(blocks), len(inline), readme)
		}
		for _, block := range blocks {
			var run []string
			for _, cmd := range commandLines(block) {
				if _, ok := elsewhere[cmd]; ok {
					listed[cmd] = true
					continue
				}
				run = append(run, cmd)
			}
			if len(run) == 0 {
				continue
			}
			script := strings.Join(run, "\n")
			if lacking(t, readme+" block", script) {
				continue
			}
			out, err := sb.shellIn(dir, script, 2*commandLimit, 0)
			if err != nil {
				t.Errorf("%s block failed: %v\n%s\n--- output:\n%s", readme, err, script, out)
				continue
			}
			if strings.Contains(out, "warning:") && strings.Contains(script, "go run") {
				t.Errorf("the fresh-machine block prints compiler warnings:\n%s", out)
			}
		}
		for _, cmd := range inline {
			t.Logf("%s: %s", readme, cmd)
			if out, err := sb.shellIn(dir, cmd, commandLimit, 0); err != nil {
				t.Errorf("%s inline command %q failed: %v\n%s", readme, cmd, err, out)
			}
		}
	}
	for cmd := range readmeFills {
		if !filled[cmd] {
			t.Errorf("readmeFills fills %q, which the READMEs no longer have", cmd)
		}
	}
	for cmd := range elsewhere {
		if !listed[cmd] {
			t.Errorf("elsewhere lists %q, which the README no longer has", cmd)
		}
	}
}

// TestReadmeFreshMachine: the README's first block, as typed on a fresh
// machine (a build cache of its own: go-nvml's cgo compiled), prints no
// compiler warning, and neither does a build in a second terminal later
// (nothing exported there, a build cache of its own again). It needs
// NODEPACK_FRESH_BUILD=1, as CI gives: each build takes a minute or two
// on 2 CPUs.
func TestReadmeFreshMachine(t *testing.T) {
	if os.Getenv("NODEPACK_FRESH_BUILD") != "1" {
		t.Skip("NODEPACK_FRESH_BUILD=1 builds nodepack on a fresh build cache, as CI does")
	}
	t.Parallel() // two builds of minutes: beside the other tests
	sb := newSandbox(t)
	// As on a fresh machine: nothing built yet, so the README's install
	// line compiles go-nvml's cgo, whose warnings it must silence.
	sb.env = append(sb.env, "GOCACHE="+filepath.Join(sb.dir, "gocache"))
	blocks, _, _ := readmeCommands(t, "README.md")
	if len(blocks) == 0 {
		t.Fatal("the README has no command block")
	}
	var run []string
	for _, cmd := range commandLines(blocks[0]) {
		if _, ok := elsewhere[cmd]; !ok {
			run = append(run, cmd)
		}
	}
	script := strings.Join(run, "\n")
	if !strings.Contains(script, "go run") {
		t.Fatalf("the README's first block builds nothing:\n%s", script)
	}
	out, err := sb.shell(script, 2*commandLimit, 0)
	if err != nil || strings.Contains(out, "warning:") {
		t.Errorf("the fresh-machine block: %v\n%s\n--- output:\n%s", err, script, out)
	}
	out, err = sb.shell(`GOCACHE="$(mktemp -d)" go build -o /dev/null ./cmd/nodepack`, 2*commandLimit, 0)
	if err != nil || strings.Contains(out, "warning:") {
		t.Errorf("a build in another shell after the fresh-machine block: %v\n%s", err, out)
	}
}

// helpExampleSetup prepares what some --help examples expect: the output
// directories status looks at.
const helpExampleSetup = `SLURM_JOB_ID=123456 nodepack run -q tasks.txt
nodepack run -q -o nodepack-out tasks.txt
echo "test -e ran-once || { touch ran-once; echo 'CUDA error: out of memory' >&2; exit 1; }" > flaky.txt
nodepack run -q -o flaky flaky.txt || test $? = 1
nodepack run -q -o results --params examples/sweeps/runs.jsonl -- python3 examples/sweeps/report_metrics.py
nodepack submit --slurm --nodes 2 -o swept -- tasks.txt >/dev/null`

// helpExampleEnv is extra environment for the examples that say where
// they belong ("in sbatch").
var helpExampleEnv = map[string]string{
	"nodepack run --stop-before 10m -o sweep1 sweep.txt": "SLURM_JOB_ID=123456 SLURM_JOB_END_TIME=$(( $(date +%s) + 3600 ))",
}

// helpExamplesRunning lists the examples that run until interrupted.
var helpExamplesRunning = map[string]bool{
	"nodepack status --watch 10s nodepack-out": true,
}

// helpExampleFiles are the files of a user's own that the --help
// examples name as a pattern (train.py, params.yml, …): the README's and
// docs' commands run as typed in a clean checkout, these in a project of
// the user's, on a node with eight GPUs (fake: no driver here).
var helpExampleFiles = map[string]string{
	"train.py":       "import sys\nprint(sys.argv[1:])\n",
	"train_mnist.py": "import sys\nprint(sys.argv[1:])\n",
	"tasks.txt":      "echo one\necho two\n",
	"sweep.txt":      "python train.py --seed=1\npython train.py --seed=2\n",
	"params.yml":     "lr: [0.1, 0.01]\nbatch: 32\n",
	"runs.jsonl":     "{\"lr\": 0.1}\n{\"lr\": 0.01}\n",
}

// TestHelpExamples runs every example of every command's --help in the
// sandbox, with the user's files they name (helpExampleFiles): each must
// exit 0.
func TestHelpExamples(t *testing.T) {
	t.Parallel() // its commands run in processes of their own: beside the other such tests
	if testing.Short() {
		t.Skip("copies the repository")
	}
	sb := newSandbox(t)
	for name, body := range helpExampleFiles {
		writeFile(t, sb.dir, name, body)
	}
	inv, err := os.ReadFile(filepath.Join(sb.dir, "examples/inventories/dgx-a100.json"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, sb.dir, "dgx.json", string(inv))
	sb.env = append(sb.env, "CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7")
	if out, err := sb.shell(helpExampleSetup, commandLimit, 0); err != nil {
		t.Fatalf("setup: %v\n%s", err, out)
	}
	n := 0
	var helps []string
	for _, c := range commands() {
		code, usage, _ := runCLI(t, c.name, "--help")
		if code != exitOK {
			t.Fatalf("%s --help: exit %d", c.name, code)
		}
		helps = append(helps, usage)
		_, examples, ok := strings.Cut(usage, "Examples:\n")
		if !ok {
			_, examples, ok = strings.Cut(usage, "Example:\n")
		}
		if !ok {
			t.Errorf("%s --help has no example", c.name)
			continue
		}
		examples, _, _ = strings.Cut(examples, "\nFlags:\n")
		examples, _, _ = strings.Cut(examples, "\n\n")
		// A group of flags may have examples of its own: "    e.g. nodepack …".
		for _, line := range strings.Split(usage, "\n") {
			if e, ok := strings.CutPrefix(line, "    e.g. "); ok {
				examples += "\n" + e
			}
		}
		for _, line := range strings.Split(examples, "\n") {
			cmd := strings.TrimSpace(line)
			if cmd == "" {
				continue
			}
			if i := strings.Index(cmd, "   #"); i >= 0 {
				cmd = strings.TrimSpace(cmd[:i])
			}
			script := cmd
			if env, ok := helpExampleEnv[cmd]; ok {
				script = "export " + env + "; " + cmd
			}
			if lacking(t, c.name+" --help example", script) {
				continue
			}
			stop := time.Duration(0)
			if helpExamplesRunning[cmd] {
				stop = 2 * time.Second
			}
			out, err := sb.shell(script, commandLimit, stop)
			if err != nil {
				t.Errorf("%s --help example %q: %v\n%s", c.name, cmd, err, out)
			}
			if stop > 0 && !strings.Contains(out, "succeeded") {
				t.Errorf("%s --help example %q printed nothing before it was stopped:\n%s", c.name, cmd, out)
			}
			n++
		}
	}
	for cmd := range helpExampleEnv {
		if !slices.ContainsFunc(helps, func(u string) bool { return strings.Contains(u, cmd) }) {
			t.Errorf("helpExampleEnv names %q, which no --help shows", cmd)
		}
	}
	if n < 15 {
		t.Errorf("ran %d examples: the parser is broken", n)
	}
	t.Logf("ran %d --help examples", n)
}

// layers reads the ranks of docs/architecture.md's drawing: package →
// rank.
func layers(t *testing.T, page string) map[string]int {
	_, drawing, _ := strings.Cut(page, "## Layers")
	_, drawing, _ = strings.Cut(drawing, "```\nrank  packages\n")
	drawing, _, _ = strings.Cut(drawing, "```")
	ranks := map[string]int{}
	for line := range strings.Lines(drawing) {
		f := strings.Fields(line)
		rank, err := strconv.Atoi(f[0])
		if err != nil || len(f) < 2 {
			t.Fatalf("docs/architecture.md's drawing: %q is no rank and packages", line)
		}
		for _, pkg := range f[1:] {
			ranks[pkg] = rank
		}
	}
	if len(ranks) < 20 {
		t.Fatalf("docs/architecture.md's drawing ranks %d packages: the parser is broken", len(ranks))
	}
	return ranks
}

// ourPackage names a package of this module as the Architecture table
// does: its path in the module, "nodepack" for the root; other paths are
// returned as they are.
func ourPackage(path string) string {
	const module = "github.com/nodepack/nodepack"
	if path == module {
		return "nodepack"
	}
	if rest, ok := strings.CutPrefix(path, module+"/"); ok {
		return rest
	}
	return path
}

// TestArchitecture keeps docs/architecture.md true: every package is in
// its drawing and its table, imports point down the drawing's ranks, and
// pack and runner/schedule touch no files, processes or network.
func TestArchitecture(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "../../...").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	page, err := os.ReadFile("../../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, _ := strings.Cut(string(page), "## Packages")
	ranks := layers(t, string(page))
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		pkg := ourPackage(fields[0])
		if strings.HasPrefix(pkg, "examples/") {
			continue
		}
		rank, ok := ranks[pkg]
		if !ok {
			t.Errorf("package %s is not in docs/architecture.md's drawing", pkg)
			continue
		}
		if !strings.Contains(table, "| `"+pkg+"` |") {
			t.Errorf("package %s is not in docs/architecture.md's table", pkg)
		}
		pure := pkg == "pack" || strings.HasPrefix(pkg, "pack/") || pkg == "runner/schedule"
		for _, imp := range fields[1:] {
			dep := ourPackage(imp)
			if dep != imp && ranks[dep] >= rank {
				t.Errorf("%s imports %s: imports must point down", pkg, dep)
			}
			if pure && slices.Contains([]string{"os", "os/exec", "io/fs", "syscall", "net", "path/filepath"}, imp) {
				t.Errorf("%s imports %s: pack and the scheduler are pure (plain data in, decisions out)", pkg, imp)
			}
		}
	}
}

// TestReadmeListsEveryCommand: the README's command table has a row for
// every command nodepack has, and none for a command it does not have.
func TestReadmeListsEveryCommand(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, _ := strings.Cut(string(readme), "## Commands")
	table, _, _ = strings.Cut(strings.TrimLeft(table, "\n"), "\n\n")
	rows := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `nodepack ([a-z]+)").FindAllStringSubmatch(table, -1) {
		rows[m[1]] = true
	}
	for _, c := range commands() {
		if !rows[c.name] {
			t.Errorf("the README's command table has no row for %s", c.name)
		}
		delete(rows, c.name)
	}
	for name := range rows {
		t.Errorf("the README's command table lists %s, which nodepack does not have", name)
	}
}

// TestReadmePythonRuns: every line of the README's python blocks is a
// line of an example that the README's commands run, so the one line a
// training script needs is run as written.
func TestReadmePythonRuns(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile("../../examples/sweeps/report_metrics.py")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```python\n(.*?)```").FindAllSubmatch(readme, -1)
	if len(blocks) == 0 {
		t.Fatal("the README has no python block")
	}
	for _, b := range blocks {
		for line := range strings.Lines(string(b[1])) {
			if !strings.Contains(string(example), strings.TrimSpace(line)) {
				t.Errorf("README's python line %q is in no example the tests run", strings.TrimSpace(line))
			}
		}
	}
}

// TestReadmeGoBuilds: every line of the README's go blocks is a line of
// examples/embed, which the tests build and run, so the library's example
// compiles as written.
func TestReadmeGoBuilds(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile("../../examples/embed/main.go")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllSubmatch(readme, -1)
	if len(blocks) == 0 {
		t.Fatal("the README has no go block")
	}
	for _, b := range blocks {
		for line := range strings.Lines(string(b[1])) {
			if l := strings.TrimSpace(line); l != "" && !strings.Contains(string(example), l) {
				t.Errorf("README's go line %q is not in examples/embed/main.go", l)
			}
		}
	}
}

// TestPromisesAreTested: every test docs/promises.md names exists.
func TestPromisesAreTested(t *testing.T) {
	page, err := os.ReadFile("../../docs/promises.md")
	if err != nil {
		t.Fatal(err)
	}
	names := regexp.MustCompile("`((?:Test|Fuzz)[A-Za-z0-9]+)`").FindAllStringSubmatch(string(page), -1)
	if len(names) < 30 {
		t.Fatalf("docs/promises.md names %d tests: the parser is broken", len(names))
	}
	var sources strings.Builder
	filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, "_test.go") {
			b, _ := os.ReadFile(path)
			sources.Write(b)
		}
		return nil
	})
	for _, m := range names {
		if !strings.Contains(sources.String(), "func "+m[1]+"(") {
			t.Errorf("docs/promises.md names %s, which no test file has", m[1])
		}
	}
}

// TestHelpGroupsCoverEveryFlag: a command whose --help groups its flags
// puts every flag in exactly one group, so none is left out of --help.
func TestHelpGroupsCoverEveryFlag(t *testing.T) {
	for name, h := range helpGroups {
		fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
		switch name {
		case "run":
			var o runOptions
			o.AddFlags(fs)
		default:
			t.Fatalf("no flags known for %s", name)
		}
		seen := map[string]string{}
		for _, g := range h.groups {
			for _, f := range g.Flags {
				if fs.Lookup(f) == nil {
					t.Errorf("%s --help group %q names --%s, which %s does not have", name, g.Title, f, name)
				}
				if other, twice := seen[f]; twice {
					t.Errorf("%s --help has --%s in %q and %q", name, f, other, g.Title)
				}
				seen[f] = g.Title
			}
		}
		fs.VisitAll(func(f *pflag.Flag) {
			if _, ok := seen[f.Name]; !ok {
				t.Errorf("%s --help leaves --%s out of every group", name, f.Name)
			}
		})
	}
	code, out, _ := runCLI(t, "run", "--help")
	first, _, _ := strings.Cut(out, "\nWhat each run gets")
	if code != exitOK || strings.Count(first, "\n") > 40 || !strings.Contains(first, "Flags most runs need:") {
		t.Errorf("run --help: the usage, examples and the flags most runs need take %d lines, want at most 40 (a screen)", strings.Count(first, "\n"))
	}
}

// TestReadmePruneExample types the README's early-stopping block and
// checks that it shows what it is there to show: runs pruned, the best
// one run to its end, and no note that the metric might be misspelt (every
// run reports loss). Under load the runs' steps are timed by sleeps, so
// the reads keep up.
func TestReadmePruneExample(t *testing.T) {
	t.Parallel() // its commands run in processes of their own: beside the other such tests
	if testing.Short() {
		t.Skip("copies the repository")
	}
	out := readmeBlock(t, "-o pruned ")
	if !strings.Contains(out, "3 runs: 1 succeeded, 2 pruned, 0 failed") || strings.Contains(out, "misspelt") {
		t.Errorf("the README's prune example does not prune 2 of 3 runs, or says the metric may be misspelt:\n%s", out)
	}
}

// TestReadmeForecastExample types the README's block of the default rule
// (the forecast rule, max alone): two of three runs pruned, the third, in
// the cautious cohort, not at step 3 but at step 9.
func TestReadmeForecastExample(t *testing.T) {
	t.Parallel() // its commands run in processes of their own: beside the other such tests
	if testing.Short() {
		t.Skip("copies the repository")
	}
	var sb *sandbox
	out := readmeBlockIn(t, "-o forecast ", func(s *sandbox) { sb = s })
	if !strings.Contains(out, "3 runs: 1 succeeded, 2 pruned, 0 failed") {
		t.Errorf("the README's forecast example does not prune 2 of 3 runs:\n%s", out)
	}
	stops, err := sb.shell(`grep '"pruned":true' forecast/ledger.jsonl | grep -o '"rung_step":[0-9]*' | sort | tr '\n' ' '`, commandLimit, 0)
	if err != nil || strings.TrimSpace(stops) != `"rung_step":1 "rung_step":9` {
		t.Errorf("the pruned runs' rungs: %q, %v; want one at step 1, the cautious one at step 9", stops, err)
	}
}

// TestReadmePauseExample types the README's pause block: the slow
// starter, judged out at step 3, is paused, promoted once the three runs
// after it make it one of the rung's best, and runs to its end from its
// checkpoint; the three worse runs stay paused.
func TestReadmePauseExample(t *testing.T) {
	t.Parallel() // its commands run in processes of their own: beside the other such tests
	if testing.Short() {
		t.Skip("copies the repository")
	}
	var sb *sandbox
	out := readmeBlockIn(t, "-o paused ", func(s *sandbox) { sb = s })
	if !strings.Contains(out, "5 runs: 2 succeeded, 3 paused, 0 failed") || !strings.Contains(out, "3 paused (1 promotion)") {
		t.Errorf("the README's pause example does not promote the slow starter, or leaves the others otherwise than paused:\n%s", out)
	}
	// Ranked by loss, the paused runs are said to be paused, not pruned.
	if out, err := sb.shell("nodepack status --runs --sort loss paused", commandLimit, 0); err != nil || !strings.Contains(out, "3 paused runs ranked by their loss when they were stopped") {
		t.Errorf("status --runs --sort loss: %v\n%s", err, out)
	}
}

// TestReadmeFirstSweep types the README's first-sweep block: status
// says what its comment says it does (the counts by state and the
// throughput, of a sweep that has ended too), and the rerun resumes with
// nothing to run.
func TestReadmeFirstSweep(t *testing.T) {
	t.Parallel() // its commands run in processes of their own: beside the other such tests
	if testing.Short() {
		t.Skip("copies the repository")
	}
	out := readmeBlock(t, "-o hello ")
	if !strings.Contains(out, "hello: 100 runs: 100 succeeded, 0 failed") || !strings.Contains(out, "throughput ") || !strings.Contains(out, "100 runs in ") {
		t.Errorf("the README's first sweep: status shows no counts or no throughput:\n%s", out)
	}
}

// TestReadmeCheckpointExample types the README's checkpoint block as it
// is and with Python ten times slower to start and to step (a python3
// first in PATH that waits a second before it starts the real one, whose
// time.sleep takes ten times as long): either way the run succeeds in
// two attempts, the timed-out first one having saved its last step when
// asked (it lost none), the retry going on from there. The example's
// first attempt hangs, as a stuck run does, so its timeout does not race
// the run's speed.
func TestReadmeCheckpointExample(t *testing.T) {
	t.Parallel() // its commands run in processes of their own: beside the other such tests
	if testing.Short() {
		t.Skip("copies the repository")
	}
	for _, slow := range []bool{false, true} {
		t.Run(map[bool]string{false: "as it is", true: "Python ten times slower"}[slow], func(t *testing.T) {
			var sb *sandbox
			out := readmeBlockIn(t, "-o ckpt ", func(s *sandbox) {
				sb = s
				if slow {
					slowPython(t, s)
				}
			})
			if !strings.Contains(out, "ckpt: 1 run: 1 succeeded") {
				t.Errorf("the README's checkpoint example does not succeed:\n%s", out)
			}
			b, err := os.ReadFile(filepath.Join(sb.dir, "ckpt", "ledger.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			type steps struct{ First, Last, Checkpoint, Lost float64 }
			var attempts []struct {
				Type, Reason string
				Attempt      int
				Steps        *steps
			}
			for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
				var rec struct {
					Type, Reason string
					Attempt      int
					Steps        *steps
				}
				if json.Unmarshal([]byte(line), &rec) == nil && rec.Type == "finished" {
					attempts = append(attempts, rec)
				}
			}
			if len(attempts) != 2 || attempts[0].Reason != "timeout" || attempts[1].Reason != "ok" || attempts[0].Steps == nil || attempts[1].Steps == nil ||
				attempts[0].Steps.Lost != 0 || attempts[0].Steps.Checkpoint != attempts[0].Steps.Last || attempts[1].Steps.First != attempts[0].Steps.Last+1 {
				t.Errorf("attempts %+v; want a timeout that saved its last step, then a retry from the step after it\n%s", attempts, b)
			}
		})
	}
}

// slowPython puts a python3 first in the sandbox's PATH that starts the
// real one a second late, with every time.sleep ten times as long.
func slowPython(t *testing.T, sb *sandbox) {
	t.Helper()
	real, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	site := filepath.Join(sb.dir, "slow-site")
	os.Mkdir(site, 0o755)
	writeFile(t, site, "sitecustomize.py", "import time\n_sleep = time.sleep\ntime.sleep = lambda s: _sleep(10 * s)\n")
	writeFile(t, sb.bin, "python3", "#!/bin/sh\nsleep 1\nPYTHONPATH="+site+" exec "+real+` "$@"`+"\n")
	os.Chmod(filepath.Join(sb.bin, "python3"), 0o755)
}

// readmeBlock types the README's sh block that holds marker in a sandbox
// and returns what it printed.
func readmeBlock(t *testing.T, marker string) string {
	t.Helper()
	return readmeBlockIn(t, marker, nil)
}

// readmeBlockIn is readmeBlock in a sandbox that prepare, when not nil,
// changes first.
func readmeBlockIn(t *testing.T, marker string, prepare func(*sandbox)) string {
	t.Helper()
	blocks, _, _ := readmeCommands(t, "README.md")
	var block string
	for _, b := range blocks {
		if strings.Contains(b, marker) {
			block = strings.Join(commandLines(b), "\n")
		}
	}
	if block == "" {
		t.Fatalf("the README has no sh block with %q", marker)
	}
	sb := newSandbox(t)
	if prepare != nil {
		prepare(sb)
	}
	out, err := sb.shell(block, commandLimit, 0)
	if err != nil {
		t.Fatalf("%s: %v\n%s", block, err, out)
	}
	return out
}

// TestExampleOutputsAreIgnored: every output directory the README's
// commands and the --help examples name (-o DIR, relative) is ignored by
// git, so that typing them in a checkout leaves it clean.
func TestExampleOutputsAreIgnored(t *testing.T) {
	root, _ := filepath.Abs("../..")
	if err := exec.Command("git", "-C", root, "rev-parse", "--git-dir").Run(); err != nil {
		t.Skip("not a git checkout")
	}
	var text []string
	for _, readme := range readmes(t) {
		b, err := os.ReadFile(filepath.Join(root, readme))
		if err != nil {
			t.Fatal(err)
		}
		text = append(text, string(b))
	}
	for _, c := range commands() {
		_, usage, _ := runCLI(t, c.name, "--help")
		text = append(text, usage)
	}
	dirs := map[string]bool{}
	re := regexp.MustCompile(`(?m)nodepack (?:run|submit|report)\b[^\n]*? (?:-o|--output) ([A-Za-z0-9_.-]+)\b`)
	for _, t := range text {
		for _, m := range re.FindAllStringSubmatch(t, -1) {
			dirs[m[1]] = true
		}
	}
	if len(dirs) < 3 {
		t.Fatalf("found %d output directories in the examples: the pattern is broken", len(dirs))
	}
	for dir := range dirs {
		if err := exec.Command("git", "-C", root, "check-ignore", "-q", "--no-index", dir+"/").Run(); err != nil {
			t.Errorf("the examples write %s/ in the checkout, and git does not ignore it (.gitignore)", dir)
		}
	}
}
