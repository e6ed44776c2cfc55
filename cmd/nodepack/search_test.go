package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodepack/nodepack/runner/ledger"
	"github.com/nodepack/nodepack/runner/run"
)

// searchSweep is a sweep whose runs testdata/searcher.py proposes: n
// distinct {"x": i}, each fourth proposal one made before. Every run
// sleeps a moment under a process named token and reports loss = x.
type searchSweep struct {
	dir, out, token string
	n               int
}

func newSearchSweep(t *testing.T, n int) *searchSweep {
	t.Helper()
	dir := t.TempDir()
	return &searchSweep{dir: dir, out: filepath.Join(dir, "out"), token: tokenFor("np-search-", dir), n: n}
}

func (s *searchSweep) args(extra ...string) []string {
	searcher, err := filepath.Abs("testdata/searcher.py")
	if err != nil {
		panic(err)
	}
	args := []string{"run", "-q", "--parallel", "3", "--gpus", "none", "--grace", "2s", "-o", s.out,
		"--search", fmt.Sprintf("exec python3 %s %s %d %s", searcher, s.dir, s.n, s.token)}
	args = append(args, extra...)
	return append(args, "--", "bash", "-c",
		fmt.Sprintf(`(exec -a %s sleep 0.0$((RANDOM%%5))); echo "{{\"step\": 1, \"loss\": {x}}}" >> "$NODEPACK_METRICS"`, s.token))
}

// lifetimes reads what each searcher was told, in order: one list of
// lines per lifetime.
func (s *searchSweep) lifetimes(t *testing.T) [][]map[string]any {
	t.Helper()
	var all [][]map[string]any
	for k := 1; ; k++ {
		f, err := os.Open(filepath.Join(s.dir, fmt.Sprintf("told.%d.jsonl", k)))
		if os.IsNotExist(err) {
			return all
		}
		if err != nil {
			t.Fatal(err)
		}
		var lines []map[string]any
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Fatalf("told.%d.jsonl: %q: %v", k, sc.Text(), err)
			}
			lines = append(lines, m)
		}
		f.Close()
		all = append(all, lines)
	}
}

// ends reads the ledger: how many times each run reached an end (not an
// interruption), and the IDs of those that ended.
func (s *searchSweep) ends(t *testing.T) (ended map[string]int, log *ledger.Log) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.out, "ledger.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	ended = map[string]int{}
	for line := range strings.Lines(string(b)) {
		var rec ledger.Finished
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			continue // a torn last line of a killed nodepack: the fold skips it too
		}
		if rec.Type == ledger.TypeFinished && rec.Reason != run.Interrupted && !rec.Retry {
			ended[rec.ID]++
		}
	}
	if log, err = ledger.ReadFile(filepath.Join(s.out, "ledger.jsonl"), ledger.ReadOptions{}); err != nil {
		t.Fatalf("the ledger is not readable: %v", err)
	}
	return ended, log
}

// checkTold checks one searcher's life: hello first, then the earlier
// ends, then asks; every run's end told once (again: true for the second
// ask of a proposal made twice), and each ask answered by the proposal
// log.
func checkTold(t *testing.T, k int, lines []map[string]any) (told map[string]bool) {
	t.Helper()
	told = map[string]bool{}
	if len(lines) == 0 || lines[0]["type"] != "hello" || lines[0]["version"] != float64(1) {
		t.Fatalf("lifetime %d: first line %v, want hello version 1", k, lines[:min(len(lines), 1)])
	}
	asked := false
	for _, l := range lines[1:] {
		switch l["type"] {
		case "ask":
			asked = true
		case "ended":
			id, _ := l["id"].(string)
			if l["earlier"] == true && asked {
				t.Errorf("lifetime %d: earlier end of %s told after an ask", k, id)
			}
			if l["again"] == true {
				if !told[id] {
					t.Errorf("lifetime %d: %s told again, never told before", k, id)
				}
				continue
			}
			if told[id] {
				t.Errorf("lifetime %d: end of %s told twice without again: %v", k, id, l)
			}
			told[id] = true
		case "running":
			if asked {
				t.Errorf("lifetime %d: running told after an ask: %v", k, l)
			}
		default:
			t.Errorf("lifetime %d: unknown line %v", k, l)
		}
	}
	return told
}

// TestSearchRunsProposals: a searcher's proposals run as ordinary runs,
// each distinct one once, its end told once; status --runs shows their
// params, and a rerun of the finished sweep runs nothing and tells the
// new searcher every end as earlier.
func TestSearchRunsProposals(t *testing.T) {
	s := newSearchSweep(t, 8)
	code, _, errOut := runCLI(t, s.args()...)
	if code != exitOK {
		t.Fatalf("exit %d:\n%s", code, errOut)
	}
	ended, log := s.ends(t)
	if len(ended) != s.n || log.Len() != s.n {
		t.Fatalf("%d runs ended, %d in the ledger; want %d:\n%s", len(ended), log.Len(), s.n, errOut)
	}
	for id, n := range ended {
		if n != 1 {
			t.Errorf("run %s ended %d times", id, n)
		}
	}
	lives := s.lifetimes(t)
	if len(lives) != 1 {
		t.Fatalf("%d searcher lifetimes, want 1", len(lives))
	}
	told := checkTold(t, 1, lives[0])
	if len(told) != s.n {
		t.Errorf("the searcher was told %d ends, want %d", len(told), s.n)
	}
	again := 0
	for _, l := range lives[0] {
		if l["again"] == true {
			again++
		}
	}
	if again == 0 {
		t.Errorf("no proposal made twice was told again: %v", lives[0])
	}
	code, stdout, errOut := runCLI(t, "status", "--runs", s.out)
	if code != exitOK || !strings.HasPrefix(stdout, "id,origin,x,state") || strings.Count(stdout, ",searcher:") != s.n {
		t.Errorf("status --runs: exit %d\n%s%s", code, stdout, errOut)
	}
	page := filepath.Join(s.dir, "report.html")
	if code, _, errOut := runCLI(t, "report", "-o", page, s.out); code != exitOK {
		t.Errorf("report: exit %d: %s", code, errOut)
	} else if b, _ := os.ReadFile(page); !strings.Contains(string(b), "searcher:1") {
		t.Errorf("the report does not show the searcher's runs")
	}
	if b, err := os.ReadFile(filepath.Join(s.out, "search.log")); err != nil || !strings.Contains(string(b), "# nodepack ") {
		t.Errorf("search.log: %v %q", err, b)
	}

	code, _, errOut = runCLI(t, s.args()...)
	if code != exitOK || !strings.Contains(errOut, "nothing left to run") {
		t.Errorf("rerun: exit %d:\n%s", code, errOut)
	}
	lives = s.lifetimes(t)
	if len(lives) != 2 {
		t.Fatalf("%d lifetimes after the rerun, want 2", len(lives))
	}
	told = checkTold(t, 2, lives[1])
	if len(told) != s.n || lives[1][0]["earlier"] != float64(s.n) {
		t.Errorf("the second searcher was told %d ends (hello %v), want %d earlier", len(told), lives[1][0], s.n)
	}
	if ended2, _ := s.ends(t); len(ended2) != s.n {
		t.Errorf("the rerun ran runs: %d ended", len(ended2))
	}
}

// TestSearchKill9AtRandomMoments is the target: nodepack killed by
// SIGKILL at a random moment, 20 times over one output directory, then
// resumed to the end. No process of the sweep is left after each kill (the
// searcher and every run's tree), each run reached an end at most once by
// the ledger, each searcher was told each end at most once (again aside),
// and the last, which saw the sweep to its end, every end exactly once.
func TestSearchKill9AtRandomMoments(t *testing.T) {
	cycles := 20
	if testing.Short() {
		cycles = 4
	}
	s := newSearchSweep(t, 30)
	t.Cleanup(func() {
		for _, pid := range processesWith(s.token) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
	for cycle := range cycles {
		cmd := nodepackCommand(t, nil, s.args()...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// A random moment, not a synchronisation: from before the
		// searcher starts to well into the sweep.
		time.Sleep(time.Duration(rng.IntN(400)) * time.Millisecond)
		cmd.Process.Kill()
		cmd.Wait()
		waitGone(t, s.token, 5*time.Second)
		if t.Failed() {
			t.Fatalf("cycle %d", cycle)
		}
	}
	if code, _, errOut := runCLI(t, s.args()...); code != exitOK {
		t.Fatalf("last run: exit %d:\n%s", code, errOut)
	}
	waitGone(t, s.token, 5*time.Second)
	ended, log := s.ends(t)
	for id, n := range ended {
		if n != 1 {
			t.Errorf("run %s reached an end %d times by the ledger", id, n)
		}
	}
	if len(ended) != s.n || log.Count()[ledger.StateSucceeded] != s.n {
		t.Errorf("%d runs ended (%v), want %d", len(ended), log.Count(), s.n)
	}
	lives := s.lifetimes(t)
	for k, lines := range lives {
		if len(lines) == 0 {
			continue // killed before it read its hello
		}
		told := checkTold(t, k+1, lines)
		if k == len(lives)-1 && len(told) != s.n {
			t.Errorf("the last searcher was told %d ends, want all %d", len(told), s.n)
		}
	}
	t.Logf("%d searcher lifetimes, %d runs", len(lives), len(ended))
}

// TestSearchHostile: a searcher that crashes, hangs, writes garbage or
// floods, or proposes what can never run, is stopped with one line that
// names the problem; the runs it started finish and are recorded; nodepack
// exits 2 when nothing ran, else 1; the ledger stays readable.
func TestSearchHostile(t *testing.T) {
	const greet = `read hello; read ask; `
	tests := []struct {
		name, searcher string
		extra          []string
		code           int
		want           string // in stderr
		runs           int    // runs in the ledger
	}{
		{"crash", greet + `echo 'Traceback: boom' >&2; exit 3`, nil, exitUsage, "searcher: exited with status 3 before answering ask 1: Traceback: boom", 0},
		{"crash after a run started", greet + `echo '{"x": 1}'; read ask; echo dying >&2; exit 4`, nil, exitFailed, "exited with status 4 before answering ask 2: dying", 1},
		{"hang", greet + `exec sleep 600`, []string{"--search-timeout", "300ms"}, exitUsage, "searcher: no reply to ask 1 in 300ms (--search-timeout): stopped it", 0},
		{"garbage", greet + `echo 'lr=0.1'`, nil, exitUsage, "searcher:1:1: ", 0},
		{"unknown word", greet + `echo '{"nodepack": "later"}'`, nil, exitUsage, `searcher:1:13: unknown word "later"`, 0},
		{"never fits", greet + `echo '{"x": 1, "nodepack": {"gpus": 4}}'; exec sleep 600`, nil, exitUsage, "searcher: ask 1: searcher:1: ", 0},
		{"a line of 2 MiB", greet + `head -c 2097152 /dev/zero | tr '\0' a; echo`, nil, exitUsage, "searcher:1", 0},
		{"flood of one proposal", `yes '{"x": 1}'`, nil, exitFailed, "1000 proposals in a row of runs that ran or run already: stopped it", 1},
		{"flood of stderr", `head -c 20000000 /dev/zero >&2; ` + greet + `echo '{"nodepack": "done"}'; cat >/dev/null`, nil, exitOK, "", 0},
		{"wait with nothing running", greet + `echo '{"nodepack": "wait"}'; cat >/dev/null`, nil, exitOK, "said wait at ask 1 with no run running", 0},
		{"ignores the end", `trap '' TERM; ` + greet + `echo '{"x": 1}'; read ask; echo '{"nodepack": "done"}'; exec sleep 600`, []string{"--grace", "500ms"}, exitOK, "still running 500ms after its input closed: killed", 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "out")
			args := append([]string{"run", "-q", "--gpus", "none", "-o", out, "--search", tc.searcher}, tc.extra...)
			args = append(args, "--", "sh", "-c", "echo ran {x}")
			code, _, errOut := runCLI(t, args...)
			if code != tc.code || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit %d, want %d with %q:\n%s", code, tc.code, tc.want, errOut)
			}
			if tc.code != exitOK && strings.Count(errOut, "searcher") > 2 {
				t.Errorf("more than one line about the searcher:\n%s", errOut)
			}
			log, err := ledger.ReadFile(filepath.Join(out, "ledger.jsonl"), ledger.ReadOptions{})
			if err != nil {
				t.Fatalf("ledger: %v", err)
			}
			if c := log.Count(); log.Len() != tc.runs || c[ledger.StateRunning] != 0 || c[ledger.StateInterrupted] != 0 {
				t.Errorf("ledger: %d runs %v, want %d, all ended", log.Len(), c, tc.runs)
			}
			if st, err := os.Stat(filepath.Join(out, "search.log")); err != nil || st.Size() > 17<<20 {
				t.Errorf("search.log: %v, %v", st, err)
			}
		})
	}
}

// TestSearchUsage: what --search goes without is refused in one line,
// exit 2, before anything starts.
func TestSearchUsage(t *testing.T) {
	dir := t.TempDir()
	search := []string{"--search", "exit 0", "--", "echo", "{x}"}
	for _, tc := range []struct {
		args []string
		env  []string
		want string
	}{
		{append([]string{"run", "--dry-run"}, search...), nil, "--dry-run lists the runs before anything starts"},
		{append([]string{"run", "--pool", "auto"}, search...), nil, "--search runs its searcher on one node: it goes without --pool"},
		{append([]string{"run", "--reps", "2"}, search...), nil, "a searcher proposes every run"},
		{[]string{"run", "--search", "exit 0"}, nil, "--search needs the command after --"},
		{append([]string{"run", "--search-timeout", "0"}, search...), nil, "--search-timeout 0s: must be more than 0"},
		{append([]string{"run", "-o", filepath.Join(dir, "array")}, search...), []string{"SLURM_JOB_ID=7", "SLURM_ARRAY_JOB_ID=7", "SLURM_ARRAY_TASK_ID=1", "SLURM_ARRAY_TASK_COUNT=4"}, "in an array job with shard none"},
		{append([]string{"submit", "--slurm", "--nodes", "2", "--dry-run", "--"}, search...), nil, "run's --search: a searcher's sweep runs in one nodepack run"},
	} {
		for _, kv := range tc.env {
			k, v, _ := strings.Cut(kv, "=")
			t.Setenv(k, v)
		}
		code, _, errOut := runCLI(t, tc.args...)
		if code != exitUsage || !strings.Contains(errOut, tc.want) || strings.Count(errOut, "\n") > 1 {
			t.Errorf("%q: exit %d, want 2 with one line %q:\n%s", tc.args, code, tc.want, errOut)
		}
		for _, kv := range tc.env {
			k, _, _ := strings.Cut(kv, "=")
			os.Unsetenv(k)
		}
	}
}

// TestSearchStopWhileAsking: SIGTERM while the searcher takes its time
// over an ask (here: forever) stops nodepack at once, as any stop does,
// not after --search-timeout: the run is interrupted, the searcher gone,
// the ledger readable. The proposal that waited to start (one lane, one
// run) was never recorded: the resume, with another searcher (the
// searcher's command does not define the sweep), runs the interrupted run
// again, tells it so first, and never runs the forgotten one.
func TestSearchStopWhileAsking(t *testing.T) {
	dir := t.TempDir()
	token := tokenFor("np-search-stop-", dir)
	out := filepath.Join(dir, "out")
	searcher := writeFile(t, dir, "searcher.sh", fmt.Sprintf("read hello; read ask; echo '{\"x\": 1}'; read ask; echo '{\"x\": 2}'; read ask; exec -a %s sleep 600\n", token))
	run := []string{"--", "bash", "-c", fmt.Sprintf("test -e %s/release || exec -a %s sleep 600 # {x}", dir, token)}
	args := []string{"run", "-q", "--gpus", "none", "--parallel", "1", "--grace", "1s", "-o", out}
	cmd, stderr := startNodepack(t, token, append(append(args, "--search", "exec bash "+searcher), run...)...)
	deadline := time.Now().Add(time.Minute)
	for len(processesWith(token)) < 2 { // run x=1, and the searcher at ask 3: x=2 waits to start
		if time.Now().After(deadline) {
			t.Fatalf("the run and the searcher did not start:\n%s", stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(time.Minute): // a hang, not a speed: the stop is due within --grace
		t.Fatalf("nodepack did not stop on SIGTERM while its searcher was asked:\n%s", stderr.String())
	}
	if code := cmd.ProcessState.ExitCode(); code != 143 {
		t.Errorf("exit %d, want 143:\n%s", code, stderr.String())
	}
	waitGone(t, token, 5*time.Second)
	log, err := ledger.ReadFile(filepath.Join(out, "ledger.jsonl"), ledger.ReadOptions{})
	if err != nil || log.Len() != 1 || log.Count()[ledger.StateInterrupted] != 1 {
		t.Fatalf("ledger: %v %v, want the one run that started, interrupted", err, log.Count())
	}

	writeFile(t, dir, "release", "")
	told := filepath.Join(dir, "told2")
	second := writeFile(t, dir, "second.sh", fmt.Sprintf(`while read -r l; do echo "$l" >> %s; case $l in *'"ask"'*) echo '{"nodepack": "done"}';; esac; done`+"\n", told))
	code, _, errOut := runCLI(t, append(append(args, "--search", "exec bash "+second), run...)...)
	if code != exitOK || !strings.Contains(errOut, "1 interrupted (run again)") {
		t.Fatalf("resume: exit %d:\n%s", code, errOut)
	}
	b, _ := os.ReadFile(told)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) < 4 || !strings.Contains(lines[0], `"earlier":0,`) || !strings.Contains(lines[0], `"running":1,`) || !strings.Contains(lines[1], `"type":"running"`) ||
		!strings.Contains(lines[1], `"params":{"x":1}`) || !strings.Contains(lines[2], `"type":"ask"`) {
		t.Errorf("the second searcher was told:\n%s", b)
	}
	if log, err = ledger.ReadFile(filepath.Join(out, "ledger.jsonl"), ledger.ReadOptions{}); err != nil || log.Len() != 1 || log.Count()[ledger.StateSucceeded] != 1 {
		t.Errorf("ledger after the resume: %v %v, want x=1 succeeded and x=2 never run", err, log.Count())
	}
}
