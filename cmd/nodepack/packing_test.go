package main

// End-to-end tests of per-run requests: runs asking for 2 GPUs, one GPU, a
// quarter of one or GPU memory, packed on four fake GPUs.

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/resources"
	"github.com/nodepack/nodepack/runner/ledger"
)

// fakeGPUMemory is what each fake GPU of fourGPUNode has.
const fakeGPUMemory = 40 << 30

// fourGPUNode writes the inventory of this machine with four fake GPUs
// (CUDA_VISIBLE_DEVICES=0,1,2,3 and no driver), GPUs 0 and 1 on NUMA node
// 0 and GPUs 2 and 3 on NUMA node 1, 40 GiB each, and returns its path.
// run accepts it with --inventory: its CPUs and GPUs are this node's.
func fourGPUNode(t *testing.T) string {
	t.Helper()
	t.Setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
	code, stdout, stderr := runCLI(t, "detect", "--json")
	if code != exitOK {
		t.Fatalf("detect: exit %d: %s", code, stderr)
	}
	var node resources.Node
	if err := json.Unmarshal([]byte(stdout), &node); err != nil {
		t.Fatal(err)
	}
	if node.GPUSource != "env" || len(node.GPUs) != 4 {
		t.Skipf("GPUs from %s here: the packing tests run on fake GPUs", node.GPUSource)
	}
	for i := range node.GPUs {
		node.GPUs[i].NUMA, node.GPUs[i].MemoryBytes = i/2, fakeGPUMemory
	}
	b, err := json.Marshal(node)
	if err != nil {
		t.Fatal(err)
	}
	return writeFile(t, t.TempDir(), "node.json", string(b))
}

// mixedTasks is a task file of 2-GPU, 1-GPU, quarter-GPU and 12 GiB runs,
// each printing the GPUs it was given; want maps each line's origin to
// the request it must run with.
func mixedTasks(t *testing.T, dir string) (path string, want map[string]string) {
	var b strings.Builder
	want = map[string]string{}
	line := 0
	add := func(text string) {
		line++
		b.WriteString(text + "\n")
	}
	for _, group := range []struct {
		directive string
		runs      int
		sleep     string
	}{
		{"gpus=2 cpus=0", 3, "0.3"},
		{"gpus=0.25 cpus=0", 6, "0.1"},
		{"gpus=1 cpus=0", 4, "0.2"},
		{"gpu_mem=12GiB cpus=0", 4, "0.2"},
		{"gpus=0.5 cpus=0", 3, "0.1"},
		{"gpus=2 cpus=0", 2, "0.1"},
	} {
		add("#nodepack " + group.directive)
		for i := range group.runs {
			add(fmt.Sprintf(`sleep %s; echo "$CUDA_VISIBLE_DEVICES" # %s %d`, group.sleep, group.directive, i))
			want[fmt.Sprintf("tasks.txt:%d", line)] = group.directive
		}
	}
	return writeFile(t, dir, "tasks.txt", b.String()), want
}

// TestMixedRequestsEndToEnd: a task file mixing 2-GPU, 1-GPU, quarter-GPU,
// half-GPU and GPU-memory runs on four fake GPUs. From the ledger: every
// run got what its directive asked for and saw exactly its GPUs in
// CUDA_VISIBLE_DEVICES (runs sharing a GPU see the same value); at no
// instant is a GPU over-committed (a run with GPUs of its own has them
// alone, shares add up to at most one GPU, gpu_mem requests to at most its
// memory less the headroom); and 2-GPU runs get both GPUs on one NUMA node.
func TestMixedRequestsEndToEnd(t *testing.T) {
	node := fourGPUNode(t)
	dir := t.TempDir()
	tasks, want := mixedTasks(t, dir)
	out := filepath.Join(dir, "out")
	code, _, stderr := runCLI(t, "run", "--inventory", node, "--parallel", "32", "--sample-interval", "0", "--settle-timeout", "50ms", "-q", "-o", out, tasks)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	// --parallel caps the runs at once; more than the default's runs fit
	// is no error when runs ask for less.
	if !strings.Contains(stderr, "--parallel 32: 4 runs asking for 1 GPU") {
		t.Errorf("no warning that 4 runs of the default request fit at once:\n%s", stderr)
	}
	log, err := ledger.ReadFile(filepath.Join(out, "ledger.jsonl"), ledger.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if log.Len() != len(want) {
		t.Fatalf("%d runs in the ledger, want %d", log.Len(), len(want))
	}
	type change struct {
		at       time.Time
		gpu      string
		whole    int // runs with the GPU as one of their own: +1 at the start, -1 at the end
		share    int // thousandths of a GPU
		mem      int64
		id       string
		starting bool
	}
	var changes []change
	err = log.LastAll(func(i int, started *ledger.Started, finished *ledger.Finished) error {
		id, state := log.At(i).ID, log.At(i).State
		if state != ledger.StateSucceeded || started == nil || finished == nil {
			t.Fatalf("%s: %s", id, state)
		}
		asked, err := pack.ParseRequest(want[filepath.Base(started.Origin)], pack.Request{}, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := pack.ParseRequest(started.Request, pack.Request{}, 0); err != nil || got != asked {
			t.Errorf("%s (%s) ran with %q, its directive asks for %v", id, started.Origin, started.Request, asked)
		}
		if printed := strings.TrimSpace(readRunFile(t, out, started.Stdout)); printed != strings.Join(started.GPUs, ",") {
			t.Errorf("%s saw CUDA_VISIBLE_DEVICES=%q, was given %q", id, printed, started.GPUs)
		}
		if len(started.GPUs) != max(asked.GPUs, 1) {
			t.Errorf("%s asked for %v and got GPUs %q", id, asked, started.GPUs)
		}
		if asked.GPUs == 2 && !slices.Equal(started.GPUs, []string{"0", "1"}) && !slices.Equal(started.GPUs, []string{"2", "3"}) {
			t.Errorf("%s: 2 GPUs %q, not both on one NUMA node", id, started.GPUs)
		}
		for _, g := range started.GPUs {
			c := change{gpu: g, share: asked.GPUShare, mem: int64(asked.GPUMem), id: id}
			if asked.GPUs > 0 {
				c.whole = 1
			}
			begin, end := c, c
			begin.at, begin.starting = started.Time, true
			end.at, end.whole, end.share, end.mem = finished.Time, -c.whole, -c.share, -c.mem
			changes = append(changes, begin, end)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Ends before starts at the same instant: what ended was given back
	// before it was handed out again.
	slices.SortStableFunc(changes, func(a, b change) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		if a.starting != b.starting {
			if a.starting {
				return 1
			}
			return -1
		}
		return 0
	})
	type claim struct {
		whole, runs, share int
		mem                int64
	}
	claims := map[string]*claim{}
	for _, c := range changes {
		g := claims[c.gpu]
		if g == nil {
			g = &claim{}
			claims[c.gpu] = g
		}
		g.whole += c.whole
		g.share += c.share
		g.mem += c.mem
		if c.starting {
			g.runs++
		} else {
			g.runs--
		}
		if g.whole > 0 && g.runs > 1 || g.share > pack.GPUWhole || g.mem > fakeGPUMemory-int64(pack.GPUMemHeadroom(fakeGPUMemory)) {
			t.Fatalf("when %s %s, GPU %s had %d runs of which %d own it, shares %d/1000, gpu_mem %s",
				c.id, map[bool]string{true: "started", false: "ended"}[c.starting], c.gpu, g.runs, g.whole, g.share, pack.FormatSize(uint64(max(g.mem, 0))))
		}
	}
}

// readRunFile reads a file the ledger names relative to the output
// directory.
func readRunFile(t *testing.T, out, name string) string {
	t.Helper()
	if !filepath.IsAbs(name) {
		name = filepath.Join(out, name)
	}
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRequestsFromTheCommandLine: every source gives runs their requests
// from the command line — a params line's "nodepack" object, --request
// rules on a sweep, a grid and a params file, and the --*-per-run flags
// for the rest — as dry-run shows them and plan tallies them.
func TestRequestsFromTheCommandLine(t *testing.T) {
	node := fourGPUNode(t)
	dir := t.TempDir()
	params := writeFile(t, dir, "runs.jsonl", `{"lr": 0.1}`+"\n"+`{"lr": 0.2, "nodepack": {"gpus": 2}}`+"\n")
	grid := writeFile(t, dir, "grid.yml", "model: [small, big]\n")
	tests := []struct {
		description string
		args        []string
		want        map[string]string // the run's last argument → its request
		tally       string            // in plan's output
	}{
		{"uniform flags", []string{"--gpus-per-run", "0.5", "--cpus-per-run", "1", "--sweep", "--", "train", "seed=1,2"},
			map[string]string{"seed=1": "gpus=0.5 cpus=1", "seed=2": "gpus=0.5 cpus=1"}, "2  gpus=0.5 cpus=1  (0.5 GPU)"},
		{"--runs-per-gpu is a share", []string{"--runs-per-gpu", "4", "--cpus-per-run", "0", "--sweep", "--", "train", "seed=1,2"},
			map[string]string{"seed=1": "gpus=0.25 cpus=0", "seed=2": "gpus=0.25 cpus=0"}, "2  gpus=0.25 cpus=0  (0.25 GPU)"},
		{"params: the nodepack key", []string{"--cpus-per-run", "0", "--params", params, "--", "train"},
			map[string]string{"--lr=0.1": "gpus=1 cpus=0", "--lr=0.2": "gpus=2 cpus=0"}, "1  gpus=2 cpus=0  (2 GPUs)"},
		{"sweep: a rule on a swept value", []string{"--gpus-per-run", "0.25", "--cpus-per-run", "0", "--sweep", "--request", "model=big: gpus=2", "--", "train", "model=small,big"},
			map[string]string{"model=small": "gpus=0.25 cpus=0", "model=big": "gpus=2 cpus=0"}, "1  gpus=0.25 cpus=0  (0.25 GPU)"},
		{"grid: gpu memory by rule", []string{"--cpus-per-run", "0", "--grid", grid, "--request", "model=small: gpu_mem=6GiB", "--", "train"},
			map[string]string{"--model=small": "gpu_mem=6GiB cpus=0", "--model=big": "gpus=1 cpus=0"}, "1  gpu_mem=6GiB cpus=0  (6GiB of a GPU)"},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, append([]string{"run", "--dry-run", "--json", "--inventory", node}, tc.args...)...)
			var doc runsDocument
			if err := json.Unmarshal([]byte(stdout), &doc); code != exitOK || err != nil {
				t.Fatalf("dry run: exit %d, %v: %s", code, err, stderr)
			}
			got := map[string]string{}
			for _, r := range doc.Runs {
				got[r.Argv[len(r.Argv)-1]] = r.Request
			}
			if !maps.Equal(got, tc.want) {
				t.Errorf("requests %v, want %v", got, tc.want)
			}
			code, stdout, stderr = runCLI(t, append([]string{"plan", "--inventory", node}, tc.args...)...)
			if code != exitOK || !strings.Contains(stdout, tc.tally) {
				t.Errorf("plan: exit %d, stdout %q, stderr %q; want the tally %q", code, stdout, stderr, tc.tally)
			}
		})
	}
}

// TestRequestThatNeverFits: a run asking for more than the node has is
// found before anything starts: exit 2, one line naming file and line,
// for run, --dry-run and plan alike.
func TestRequestThatNeverFits(t *testing.T) {
	node := fourGPUNode(t)
	dir := t.TempDir()
	for _, tc := range []struct{ directive, want string }{
		{"gpus=8", "tasks.txt:3: gpus=8 "},
		{"gpu_mem=48GiB", "tasks.txt:3: gpu_mem=48GiB "},
		{"gpus=1 mem=900TiB", "tasks.txt:3: gpus=1 "},
	} {
		t.Run(tc.directive, func(t *testing.T) {
			tasks := writeFile(t, dir, "tasks.txt", "echo fits\n#nodepack "+tc.directive+"\necho never\n")
			out := filepath.Join(t.TempDir(), "out")
			for _, args := range [][]string{
				{"run", "--inventory", node, "-o", out, tasks},
				{"run", "--inventory", node, "--dry-run", "-o", out, tasks},
				{"plan", "--inventory", node, tasks},
			} {
				code, _, stderr := runCLI(t, args...)
				if code != exitUsage || !strings.Contains(stderr, tc.want) || !strings.Contains(stderr, "never fits") || strings.Count(stderr, "\n") != 1 {
					t.Errorf("%s: exit %d, stderr %q; want 2 and one line naming %q", args[0], code, stderr, tc.want)
				}
			}
			if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("output directory created although nothing should start")
			}
		})
	}
}

// TestDefaultsPack: with default flags, as many runs run at once as their
// requests fit, not one per GPU: eight quarter-GPU runs on four GPUs all
// run together. Each run waits to be let go once all eight have started;
// with a cap of one run per GPU the rest would never start, and the test
// would fail at its deadline. The runs share CPUs (cpus=0), so that the
// GPUs bound them on any machine, 2 CPUs or 64.
func TestDefaultsPack(t *testing.T) {
	node := fourGPUNode(t)
	dir := t.TempDir()
	var lines []string
	for i := range 8 {
		lines = append(lines, fmt.Sprintf("touch %s/started.%d; until test -e %s/go; do sleep 0.05; done", dir, i, dir))
	}
	tasks := writeFile(t, dir, "tasks.txt", "#nodepack gpus=0.25 cpus=0\n"+strings.Join(lines, "\n")+"\n")
	cmd := nodepackCommand(t, nil, "run", "--inventory", node, "--sample-interval", "0", "-q", "-o", filepath.Join(dir, "out"), tasks)
	var out syncBuilder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		started, _ := filepath.Glob(filepath.Join(dir, "started.*"))
		if len(started) == 8 {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("%d of 8 quarter-GPU runs started together on four GPUs with default flags, want 8\n%s", len(started), out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	writeFile(t, dir, "go", "")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("nodepack run: %v\n%s", err, out.String())
	}
	if strings.Contains(out.String(), "--parallel") {
		t.Errorf("output names --parallel, which was not given:\n%s", out.String())
	}
}
