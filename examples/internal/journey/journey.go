// Package journey holds what the tests that type the README's commands on
// a real scheduler share: building nodepack, reading a block of the
// README, and reading what a sweep's directory records.
package journey

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Build builds nodepack from the repository at root into a new temporary
// directory and returns the binary's path; remove its directory when done.
func Build(root string) (string, error) {
	bin, err := os.MkdirTemp("", "nodepack-bin-")
	if err != nil {
		return "", err
	}
	path := filepath.Join(bin, "nodepack")
	build := exec.Command("go", "build", "-o", path, "./cmd/nodepack")
	build.Dir, build.Stdout, build.Stderr = root, os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		os.RemoveAll(bin)
		return "", fmt.Errorf("building nodepack: %w", err)
	}
	return path, nil
}

// Block returns the commands of the first sh block of the README at path
// that holds marker, one per line, without comments.
func Block(path, marker string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	for _, block := range strings.Split(string(b), "```sh\n")[1:] {
		block, _, _ = strings.Cut(block, "```")
		if !strings.Contains(block, marker) {
			continue
		}
		var lines []string
		for _, l := range strings.Split(block, "\n") {
			if i := strings.Index(l, "   #"); i >= 0 {
				l = l[:i]
			}
			if l = strings.TrimSpace(l); l != "" {
				lines = append(lines, l)
			}
		}
		return lines, nil
	}
	return nil, fmt.Errorf("%s has no sh block with %q", path, marker)
}

// LastJob returns the job id of the newest submission recorded in the
// output directory out.
func LastJob(out string) (string, error) {
	b, err := os.ReadFile(filepath.Join(out, "submissions.jsonl"))
	if err != nil {
		return "", err
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	var rec struct {
		JobID string `json:"job_id"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &rec); err != nil {
		return "", err
	}
	if rec.JobID == "" {
		return "", errors.New("the newest submission has no job id")
	}
	return rec.JobID, nil
}

// Scheduler is what the submit journeys need of one batch system's tests.
type Scheduler struct {
	Name      string // slurm or sge: submit's flag and the word status uses
	Readme    string // the README's path
	ArrayLine string // the script's array directive for 3 tasks
	FirstTask int    // the id the scheduler gives an array's first task
	// Typed runs a command line as a user types it in dir, nodepack first
	// in PATH and the scheduler's commands reachable.
	Typed func(t *testing.T, dir, line string) (string, error)
	// Wait waits for job id's tasks to end; an error when one did not
	// complete.
	Wait func(t *testing.T, id string, seconds int) error
	// Cancel cancels job id (at the test's end).
	Cancel func(id string)
	// WholeNode is how submit says each task asks for a whole node.
	WholeNode string
}

// lastJob is LastJob, cancelled when the test ends.
func (s Scheduler) lastJob(t *testing.T, out string) string {
	t.Helper()
	id, err := LastJob(out)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Cancel(id) })
	return id
}

// writeTasks writes lines as dir/tasks.txt.
func writeTasks(t *testing.T, dir string, lines []string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "tasks.txt"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// ReadmeSubmit types the README's submit block for s as a user on a login
// node would: submit, status once the array ended, then resubmit, which
// finds nothing left. The job asks for whole nodes, and each task's
// nodepack has every CPU of this machine (the local cluster's one node).
// Then the same submit line without --time, on a queue without a time
// limit (the local one): the job runs its sweep, with nothing to stop
// before.
func ReadmeSubmit(t *testing.T, s Scheduler) {
	t.Helper()
	lines, err := Block(s.Readme, "nodepack submit --"+s.Name)
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 3 || !strings.HasPrefix(lines[1], "nodepack status ") || !strings.HasPrefix(lines[2], "nodepack resubmit ") {
		t.Fatalf("the README's block is no longer submit, status, resubmit: %q", lines)
	}
	if !strings.Contains(lines[0], " --time 4h ") {
		t.Fatalf("the README's submit line has no --time 4h to leave out: %q", lines[0])
	}
	for _, line := range []string{lines[0], strings.Replace(lines[0], " --time 4h ", " ", 1)} {
		dir := t.TempDir()
		var tasks []string
		for i := range 6 {
			tasks = append(tasks, fmt.Sprintf("echo run %d", i))
		}
		writeTasks(t, dir, tasks)
		out, err := s.Typed(t, dir, line)
		if err != nil || !strings.Contains(out, s.ArrayLine) || !strings.Contains(out, "3 array tasks of the sweep's shared pool") || !strings.Contains(out, s.WholeNode) {
			t.Fatalf("%s: %v\n%s\nwant the array, and each task asking for %q", line, err, out, s.WholeNode)
		}
		id := s.lastJob(t, filepath.Join(dir, "seeds"))
		if err := s.Wait(t, id, 240); err != nil {
			t.Fatalf("%s: array %s: %v\n%s", line, id, err, logs(filepath.Join(dir, "seeds", "jobs")))
		}
		out, err = s.Typed(t, dir, lines[1])
		if err != nil || !strings.Contains(out, "6 runs: 6 succeeded") || !strings.Contains(out, s.Name+": job "+id+" (pool tasks 0-2): 3 ended") {
			t.Errorf("%s, then %s: %v\n%s\n%s", line, lines[1], err, out, logs(filepath.Join(dir, "seeds", "jobs")))
		}
		checkCPUs(t, filepath.Join(dir, "seeds"))
		if !strings.Contains(line, "--time") && !strings.Contains(logs(filepath.Join(dir, "seeds", "jobs")), "nothing to stop before") {
			t.Errorf("%s: the tasks' logs do not say there is nothing to stop before:\n%s", line, logs(filepath.Join(dir, "seeds", "jobs")))
		}
		out, err = s.Typed(t, dir, lines[2])
		if err != nil || !strings.Contains(out, "nothing left") {
			t.Errorf("%s, then %s: %v\n%s", line, lines[2], err, out)
		}
	}
}

// checkCPUs checks that the nodepack of each shard in out had every CPU
// of this machine, as its ledger's header records them: the job asked for
// a whole node.
func checkCPUs(t *testing.T, out string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(out, "ledger-*.jsonl"))
	if len(files) != 3 {
		t.Errorf("%d ledgers in %s, want 3", len(files), out)
	}
	want := runtime.NumCPU()
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		first, _, _ := strings.Cut(string(b), "\n")
		var h struct {
			Node struct {
				CPUs []struct{ ID int } `json:"cpus"`
			} `json:"node"`
		}
		if err := json.Unmarshal([]byte(first), &h); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if len(h.Node.CPUs) != want {
			t.Errorf("%s: the task's nodepack had %d CPUs, this node has %d: the job did not ask for the whole node", f, len(h.Node.CPUs), want)
		}
	}
}

// logs returns the text of the job logs in dir, for a failure's message.
func logs(dir string) string {
	var b strings.Builder
	files, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	for _, f := range files {
		text, _ := os.ReadFile(f)
		fmt.Fprintf(&b, "--- %s\n%s", f, text)
	}
	return b.String()
}

// NodeDies is issue 33's scenario on s, with fixed shards (--static): a
// 3-task array over one sweep, shard 1's nodepack killed mid-way (as when its node dies: no end
// record), status saying so beside every run, and resubmit --remaining
// finishing exactly the missing runs, each once; the report and the
// results table then cover both submissions.
func NodeDies(t *testing.T, s Scheduler) {
	t.Helper()
	dir := t.TempDir()
	done, release := filepath.Join(dir, "done.txt"), filepath.Join(dir, "release")
	var tasks []string
	for i := range 9 {
		line := fmt.Sprintf("echo $NODEPACK_RUN_ID >> %s; : run %d", done, i)
		if i == 4 || i == 7 { // shard 1's second and third runs wait
			line = fmt.Sprintf("until test -e %s; do sleep 0.2; done; %s", release, line)
		}
		tasks = append(tasks, line)
	}
	writeTasks(t, dir, tasks)
	out := filepath.Join(dir, "sweep")
	if b, err := s.Typed(t, dir, "nodepack submit --"+s.Name+" --static --nodes 3 --cpus-per-node 1 --time 10m -o sweep -- tasks.txt"); err != nil {
		t.Fatalf("submit: %v\n%s", err, b)
	}
	id := s.lastJob(t, out)
	// Shard 1 runs its waiting run: kill its nodepack as a dying node
	// would, with no chance to write its end record.
	pid := 0
	for deadline := time.Now().Add(2 * time.Minute); pid == 0; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("shard 1 never ran tasks.txt:5")
		}
		b, _ := s.Typed(t, dir, "nodepack status --json sweep 2>/dev/null")
		var doc struct {
			Running []struct{ Origin string }  `json:"running"`
			Shards  []struct{ Index, PID int } `json:"shards"`
		}
		json.Unmarshal([]byte(b), &doc)
		for _, r := range doc.Running {
			for _, sh := range doc.Shards {
				if r.Origin == "tasks.txt:5" && sh.Index == 1 {
					pid = sh.PID
				}
			}
		}
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	s.Wait(t, id, 120) // one task failed: an error, as expected
	st, _ := s.Typed(t, dir, "nodepack status sweep")
	if !strings.Contains(st, "9 runs: 7 succeeded") || !strings.Contains(st, s.Name+": job "+id+" (shards 0-2): 2 ended, 1 died") ||
		!strings.Contains(st, fmt.Sprintf("shard 1: job %s task %d died", id, s.FirstTask+1)) || !strings.Contains(st, "nodepack resubmit sweep submits what is left") {
		t.Errorf("status after the kill:\n%s", st)
	}
	os.WriteFile(release, nil, 0o644)
	if b, err := s.Typed(t, dir, "nodepack resubmit --remaining sweep"); err != nil || !strings.Contains(b, "1 array task of 3 shards") {
		t.Fatalf("resubmit: %v\n%s", err, b)
	}
	id2 := s.lastJob(t, out)
	if id2 == id {
		t.Fatal("resubmit recorded no new job")
	}
	if err := s.Wait(t, id2, 120); err != nil {
		t.Fatalf("resubmission %s: %v", id2, err)
	}
	onceEach(t, done, 9, filepath.Join(out, "jobs"))
	st, _ = s.Typed(t, dir, "nodepack status sweep")
	if !strings.Contains(st, "9 runs: 9 succeeded") || !strings.Contains(st, "job "+id+" (shards 0-2): 2 ended, 1 resubmitted; job "+id2+" (shard 1): 1 ended") {
		t.Errorf("status after the resubmission:\n%s", st)
	}
	if b, err := s.Typed(t, dir, "nodepack report sweep"); err != nil || !strings.Contains(b, "9 runs") {
		t.Errorf("nodepack report: %v\n%s", err, b)
	}
	if b, err := s.Typed(t, dir, "nodepack status --runs sweep"); err != nil || strings.Count(b, "\n") != 10 {
		t.Errorf("results table: %v\n%s\nwant a header and 9 rows", err, b)
	}
}

// record is the part of a ledger record PoolNodeDies reads.
type record struct {
	Type   string    `json:"type"`
	Time   time.Time `json:"time"`
	PID    int       `json:"pid"`
	ID     string    `json:"id"`
	Index  int       `json:"index"`
	Origin string    `json:"origin"`
	Reason string    `json:"reason"`
}

// records reads a ledger's records.
func records(t *testing.T, path string) []record {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var recs []record
	for line := range strings.Lines(string(b)) {
		var r record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		recs = append(recs, r)
	}
	return recs
}

// PoolNodeDies is issue 55's scenario on s: a 3-task array that is one
// pool (the default), each task one CPU (so one run at a time) and one
// fake GPU (of its own, on Slurm), the tasks running at once on the one
// node, and one
// task's nodepack killed with SIGKILL mid-run (its node "dies": no end
// record, its runs killed with it). No resubmission: the two others take
// the dead task's claims over once its lease (10 s here) expires and run
// what it did not finish. Every run completes exactly once, the run it
// was running is gone before another task starts it (never on two tasks
// at once), and status, folding the three ledgers, counts every run once.
// It logs how long after the death the dead task's runs had all ended.
func PoolNodeDies(t *testing.T, s Scheduler) {
	t.Helper()
	dir := t.TempDir()
	done, release := filepath.Join(dir, "done.txt"), filepath.Join(dir, "release")
	var tasks []string
	for i := range 12 {
		tasks = append(tasks, fmt.Sprintf("until test -e %s; do sleep 0.2; done; echo $NODEPACK_RUN_ID >> %s; : run-%03d", release, done, i))
	}
	writeTasks(t, dir, tasks)
	out := filepath.Join(dir, "sweep")
	if b, err := s.Typed(t, dir, "nodepack submit --"+s.Name+" --nodes 3 --cpus-per-node 1 --gpus-per-node 1 --time 10m -o sweep -- --lease 10s --grace 1s tasks.txt"); err != nil || !strings.Contains(b, "3 array tasks of the sweep's shared pool") {
		t.Fatalf("submit: %v\n%s", err, b)
	}
	id := s.lastJob(t, out)
	// The first task and another run a run of their claims: kill the
	// first task's nodepack as a dying node would.
	first := fmt.Sprintf("ledger-pool-%s_%d.jsonl", id, s.FirstTask)
	var pid int
	var victim record           // the run it runs
	gpus := map[string]string{} // each running task's one fake GPU, by its ledger
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the first task and another never ran a run each:\n%s", logs(filepath.Join(out, "jobs")))
		}
		running := 0
		pid = 0
		for k := range 3 {
			path := filepath.Join(out, fmt.Sprintf("ledger-pool-%s_%d.jsonl", id, s.FirstTask+k))
			if _, err := os.Stat(path); err != nil {
				break
			}
			started := map[string]record{}
			var header record
			for _, r := range records(t, path) {
				switch r.Type {
				case "header":
					header = r
				case "started":
					started[r.ID] = r
				case "finished":
					delete(started, r.ID)
				}
			}
			if len(started) > 0 {
				running++
				gpus[filepath.Base(path)] = taskGPU(t, path)
			}
			if filepath.Base(path) == first {
				for _, r := range started {
					pid, victim = header.PID, r
				}
			}
		}
		if running >= 2 && pid != 0 { // a node of 2 CPUs runs 2 tasks at once
			break
		}
	}
	// Each task had one GPU; Slurm gives the tasks running at once GPUs
	// of their own (the local Grid Engine cell's stand-in numbers a job's
	// N GPUs 0 to N-1, as no site's prolog would).
	seen := map[string]bool{}
	for ledger, gpu := range gpus {
		if gpu == "" || s.Name == "slurm" && seen[gpu] {
			t.Errorf("the tasks running at once do not each have a GPU of their own: %v (%s)", gpus, ledger)
		}
		seen[gpu] = true
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	// Its run's processes die with it (nodepack's supervisor).
	marker := fmt.Sprintf(": run-%03d", victim.Index)
	var gone time.Time
	for deadline := time.Now().Add(30 * time.Second); gone.IsZero(); time.Sleep(20 * time.Millisecond) {
		if !processWith(marker, release) {
			gone = time.Now()
		} else if time.Now().After(deadline) {
			t.Fatalf("the dead task's run %s still runs 30 s after its nodepack was killed", victim.Origin)
		}
	}
	os.WriteFile(release, nil, 0o644)
	s.Wait(t, id, 180) // one task failed: an error, as expected
	onceEach(t, done, 12, filepath.Join(out, "jobs"))
	st, _ := s.Typed(t, dir, "nodepack status sweep")
	if !strings.Contains(st, "12 runs: 12 succeeded, 0 failed, 0 interrupted, 0 running, 0 pending") || !strings.Contains(st, s.Name+": job "+id+" (pool tasks 0-2): 2 ended, 1 died") {
		t.Errorf("status after the kill:\n%s", st)
	}
	// The runs of the dead task's claims, as the tasks that took them
	// over ran them: the victim started there only after it was gone.
	taken := map[int]bool{}
	claims, _ := os.ReadDir(filepath.Join(out, "claims"))
	for _, c := range claims {
		from, gen, ok := strings.Cut(c.Name(), ".")
		if !ok || gen == "" || from == "" {
			continue
		}
		var rec struct{ To int }
		text, _ := os.ReadFile(filepath.Join(out, "claims", c.Name()))
		json.Unmarshal(text, &rec)
		var f int
		fmt.Sscan(from, &f)
		for i := f; i < rec.To; i++ {
			taken[i] = true
		}
	}
	if !taken[victim.Index] {
		t.Errorf("no task took over the claim of the run the dead task ran (%s)", victim.Origin)
	}
	var last time.Time
	for k := 1; k < 3; k++ {
		for _, r := range records(t, filepath.Join(out, fmt.Sprintf("ledger-pool-%s_%d.jsonl", id, s.FirstTask+k))) {
			switch {
			case r.Type == "started" && r.ID == victim.ID && r.Time.Before(gone):
				t.Errorf("%s started on another task at %v, before the dead task's run was gone (%v)", victim.Origin, r.Time, gone)
			case r.Type == "finished" && taken[r.Index] && r.Time.After(last):
				last = r.Time
			}
		}
	}
	t.Logf("%s: task %d's nodepack killed with SIGKILL; its run gone after %v; the runs of its %d claimed runs that it left all ended %v after its death (lease 10s)",
		s.Name, s.FirstTask, gone.Sub(killed).Round(time.Millisecond), len(taken), last.Sub(killed).Round(time.Millisecond))
}

// onceEach checks that the file done lists n runs, each once (the job
// logs in jobs go with a failure).
func onceEach(t *testing.T, done string, n int, jobs string) {
	t.Helper()
	b, _ := os.ReadFile(done)
	ids := strings.Fields(string(b))
	once := map[string]bool{}
	for _, id := range ids {
		if once[id] {
			t.Errorf("run %s completed twice", id)
		}
		once[id] = true
	}
	if len(ids) != n {
		t.Errorf("%d runs completed, want %d:\n%s", len(ids), n, logs(jobs))
	}
}

// taskGPU is the one GPU a task's nodepack had, by its ledger's header;
// "" unless it had exactly one.
func taskGPU(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	var h struct {
		Node struct {
			GPUs []struct{ UUID string } `json:"gpus"`
		} `json:"node"`
	}
	if err := json.Unmarshal([]byte(first), &h); err != nil || len(h.Node.GPUs) != 1 {
		return ""
	}
	return h.Node.GPUs[0].UUID
}

// processWith reports whether a process's command line holds both texts.
func processWith(a, b string) bool {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(cmdline), a) && strings.Contains(string(cmdline), b) && !strings.Contains(string(cmdline), "nodepack") {
			return true
		}
	}
	return false
}
