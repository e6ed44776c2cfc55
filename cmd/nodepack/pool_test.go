package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodepack/nodepack/runner/ledger"
	"github.com/nodepack/nodepack/runner/results"
)

// poolSweep is a task file of n runs that block, in a process named
// TOKEN-<run id>, until the file GATE exists, then append their id to
// DONE; tasks of a pool run it with --pool.
type poolSweep struct {
	dir, file, out, token string
	n                     int
}

func newPoolSweep(t *testing.T, n int) *poolSweep {
	t.Helper()
	dir := t.TempDir()
	s := &poolSweep{dir: dir, out: filepath.Join(dir, "out"), token: tokenFor("np-pool-", dir), n: n}
	var tasks strings.Builder
	for i := range n {
		fmt.Fprintf(&tasks, "[ -e %[1]s/GATE ] || (exec -a %[2]s-$NODEPACK_RUN_ID bash -c 'until [ -e %[1]s/GATE ]; do sleep 0.05; done'); echo $NODEPACK_RUN_ID >> %[1]s/DONE # %[3]d\n", dir, s.token, i)
	}
	s.file = writeFile(t, dir, "tasks.txt", tasks.String())
	return s
}

// start starts task name of the pool as a process of its own.
func (s *poolSweep) start(t *testing.T, name string, extra ...string) (*exec.Cmd, *syncBuilder) {
	t.Helper()
	args := append([]string{"run", "--pool", name, "--lease", "3s", "--grace", "300ms", "--parallel", "2", "--gpus", "none", "-o", s.out}, extra...)
	cmd := nodepackCommand(t, nil, append(args, s.file)...)
	var stderr syncBuilder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		for _, pid := range processesWith(s.token) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return cmd, &stderr
}

// running waits until task name's ledger says n runs are running.
func (s *poolSweep) running(t *testing.T, name string, n int, stderr *syncBuilder) *ledger.Log {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		log, err := ledger.ReadFile(filepath.Join(s.out, ledger.PoolFileName(name)), ledger.ReadOptions{})
		if err == nil && log.Count()[ledger.StateRunning] == n {
			return log
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s: %d runs did not start:\n%s", name, n, stderr.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// done counts the completions in DONE by run id.
func (s *poolSweep) done(t *testing.T) map[string]int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.dir, "DONE"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, id := range strings.Fields(string(b)) {
		counts[id]++
	}
	return counts
}

// once checks that every run completed exactly once, and returns the
// completions.
func (s *poolSweep) once(t *testing.T) map[string]int {
	t.Helper()
	done := s.done(t)
	if len(done) != s.n {
		t.Errorf("%d runs completed, want %d", len(done), s.n)
	}
	for id, n := range done {
		if n != 1 {
			t.Errorf("run %s completed %d times", id, n)
		}
	}
	return done
}

// status is nodepack status --json of the pool's directory.
func (s *poolSweep) status(t *testing.T) results.Status {
	t.Helper()
	code, stdout, stderr := runCLI(t, "status", "--json", s.out)
	if code != exitOK {
		t.Fatalf("status: exit %d: %s", code, stderr)
	}
	var doc results.Status
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatalf("status --json: %v\n%s", err, stdout)
	}
	return doc
}

// TestPoolKill9: three tasks of a pool share one sweep; one is killed
// with SIGKILL (its node "dies") while it runs two runs of its claims.
// Its runs' processes die with it; the two others take its claims over
// once its lease expires and run what it did not finish; in the end every
// run completed exactly once, and status, folding the three ledgers,
// counts every run once: all succeeded, none pending, none running.
func TestPoolKill9(t *testing.T) {
	s := newPoolSweep(t, 30)
	type task struct {
		cmd    *exec.Cmd
		stderr *syncBuilder
	}
	tasks := map[string]task{}
	for _, name := range []string{"a", "b", "c"} {
		cmd, stderr := s.start(t, name)
		tasks[name] = task{cmd, stderr}
	}
	var killed []string // the runs b ran when it died
	for _, name := range []string{"a", "b", "c"} {
		log := s.running(t, name, 2, tasks[name].stderr)
		if name == "b" {
			for i := range log.Len() {
				if log.At(i).State == ledger.StateRunning {
					killed = append(killed, log.At(i).ID)
				}
			}
		}
	}
	b := tasks["b"].cmd
	if err := b.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	b.Wait()
	for _, id := range killed {
		waitGone(t, s.token+"-"+id, 10*time.Second) // no run of b's left running
	}
	writeFile(t, s.dir, "GATE", "")
	took := ""
	for _, name := range []string{"a", "c"} {
		if err := tasks[name].cmd.Wait(); err != nil {
			t.Fatalf("task %s: %v\n%s", name, err, tasks[name].stderr)
		}
		if strings.Contains(tasks[name].stderr.String(), "pool: took over") {
			took += name
		}
	}
	if took == "" {
		t.Errorf("no task said it took b's claims over:\n%s\n%s", tasks["a"].stderr, tasks["c"].stderr)
	}
	done := s.once(t)
	for _, id := range killed {
		if done[id] != 1 {
			t.Errorf("run %s, which b ran when it died, completed %d times", id, done[id])
		}
	}
	doc := s.status(t)
	if want := (results.Counts{Succeeded: s.n}); doc.Counts != want || doc.Total == nil || *doc.Total != s.n {
		t.Errorf("status counts %+v of %v, want %+v of %d", doc.Counts, doc.Total, want, s.n)
	}
	if len(doc.Shards) != 3 {
		t.Errorf("status shows %d ledgers, want the 3 tasks'", len(doc.Shards))
	}
}

// TestPoolLateTaskLeaves: a task that starts once every run of the sweep
// is claimed leaves at once, with a note and exit 0, and runs nothing; a
// task of the same name run again (a requeue) finds its runs done.
func TestPoolLateTaskLeaves(t *testing.T) {
	s := newPoolSweep(t, 4)
	writeFile(t, s.dir, "GATE", "")
	code, _, errOut := runCLI(t, "run", "-q", "--pool", "a", "--lease", "3s", "--grace", "300ms", "--parallel", "2", "--gpus", "none", "-o", s.out, s.file)
	if code != exitOK {
		t.Fatalf("task a: exit %d:\n%s", code, errOut)
	}
	code, _, errOut = runCLI(t, "run", "--pool", "late", "--lease", "3s", "--grace", "300ms", "--parallel", "2", "--gpus", "none", "-o", s.out, s.file)
	if code != exitOK || !strings.Contains(errOut, "every run of the sweep's 4 is claimed by other tasks: nothing for this task") {
		t.Errorf("a late task: exit %d:\n%s", code, errOut)
	}
	code, _, errOut = runCLI(t, "run", "--pool", "a", "--lease", "3s", "--grace", "300ms", "--parallel", "2", "--gpus", "none", "-o", s.out, s.file)
	if code != exitOK || !strings.Contains(errOut, "4 succeeded") {
		t.Errorf("task a again: exit %d:\n%s", code, errOut)
	}
	if done := s.done(t); len(done) != 4 {
		t.Errorf("runs completed: %v", done)
	}
	if doc := s.status(t); doc.Counts != (results.Counts{Succeeded: 4}) {
		t.Errorf("status %+v", doc.Counts)
	}
}

// TestPoolBadInput: a pool task of another sweep in the directory is
// refused in one line before anything starts (exit 2); so is --pool with
// a static --shard, a task name that is not a file name, and a lease too
// short for the runs' grace. A claim that
// is a symbolic link is never followed: the task stops, naming it, and
// nothing runs; a lease file that is a link stops the task, naming it.
func TestPoolBadInput(t *testing.T) {
	s := newPoolSweep(t, 4)
	writeFile(t, s.dir, "GATE", "")
	base := []string{"run", "-q", "--lease", "3s", "--grace", "300ms", "--gpus", "none", "-o", s.out}
	if code, _, errOut := runCLI(t, append(base, "--pool", "a", s.file)...); code != exitOK {
		t.Fatalf("task a: exit %d:\n%s", code, errOut)
	}
	other := writeFile(t, s.dir, "other.txt", "true\n")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{append(base, "--pool", "b", other), "holds another sweep"},
		{append(base, "--pool", "b", "--shard", "1/2", s.file), "--pool claims runs from the whole sweep: it goes without --shard"},
		{append(base, "--pool", "../b", s.file), `pool task "../b"`},
		// A lease too short for the runs' stop: a task that cannot renew
		// it could not stop them in time.
		{[]string{"run", "-q", "--lease", "3s", "--gpus", "none", "-o", s.out, "--pool", "a", s.file}, "a lease of 3s leaves a task that cannot renew it 500ms to stop its runs, less than their 10s"},
		{[]string{"run", "-q", "--lease", "1m", "--checkpoint-signal", "USR1", "--gpus", "none", "-o", s.out, "--pool", "a", s.file}, "less than their 20s (a grace, two with a checkpoint signal): a lease of at least 2m0s"},
	} {
		code, _, errOut := runCLI(t, tc.args...)
		if code != exitUsage || !strings.Contains(errOut, tc.want) || strings.Count(strings.TrimSpace(errOut), "\n") > 1 {
			t.Errorf("%v: exit %d, want %d and %q:\n%s", tc.args, code, exitUsage, tc.want, errOut)
		}
	}

	// A claims folder whose first claim is a link.
	s = newPoolSweep(t, 4)
	os.MkdirAll(filepath.Join(s.out, "claims"), 0o755)
	target := writeFile(t, s.dir, "planted", `{"task":"x","to":4,"sweep":"y"}`)
	os.Symlink(target, filepath.Join(s.out, "claims", "0"))
	code, _, errOut := runCLI(t, append(base[:len(base)-1], s.out, "--pool", "a", s.file)...)
	if code == exitOK || !strings.Contains(errOut, filepath.Join("claims", "0")) {
		t.Errorf("a claim that is a link: exit %d:\n%s", code, errOut)
	}
	if done := s.done(t); len(done) != 0 {
		t.Errorf("runs ran on a planted claim: %v", done)
	}

	// A lease file that is a link: the task stops, naming it, rather than
	// watch leases it cannot read (and never leave).
	s = newPoolSweep(t, 4)
	writeFile(t, s.dir, "GATE", "")
	os.MkdirAll(filepath.Join(s.out, "claims", "tasks"), 0o755)
	os.Symlink(target, filepath.Join(s.out, "claims", "tasks", "x"))
	code, _, errOut = runCLI(t, append(base[:len(base)-1], s.out, "--pool", "a", s.file)...)
	if code == exitOK || !strings.Contains(errOut, filepath.Join("claims", "tasks", "x")) {
		t.Errorf("a lease that is a link: exit %d:\n%s", code, errOut)
	}
}

// TestPoolFullClaimsDisk: the claims folder's file system fills up under a
// running pool task (a small tmpfs, which needs root to mount). The task
// starts no run it could not claim, lets the runs it claimed finish,
// blames the disk, not the runs (none failed), and a rerun once there is
// room runs the rest, every run once.
func TestPoolFullClaimsDisk(t *testing.T) {
	s := newPoolSweep(t, 20)
	claims := filepath.Join(s.out, "claims")
	os.MkdirAll(claims, 0o755)
	if err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64k", "nodepack-test", claims).Run(); err != nil {
		t.Skipf("cannot mount a tmpfs here (needs root): %v", err)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", claims).Run() })
	cmd, stderr := s.start(t, "a")
	s.running(t, "a", 2, stderr)
	// Fill the claims' file system.
	filler, err := os.Create(filepath.Join(claims, ".filler"))
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 1024)
	for {
		if _, err := filler.Write(chunk); err != nil {
			break
		}
	}
	filler.Close()
	writeFile(t, s.dir, "GATE", "")
	err = cmd.Wait()
	if err == nil || !strings.Contains(stderr.String(), "no space left on device") {
		t.Fatalf("a task whose claims cannot be written: %v\n%s", err, stderr)
	}
	doc := s.status(t)
	if doc.Counts.Failed != 0 || doc.Counts.Succeeded == 0 || doc.Counts.Succeeded == s.n || doc.Counts.Pending == 0 {
		t.Errorf("status after the full disk: %+v", doc.Counts)
	}
	os.Remove(filepath.Join(claims, ".filler"))
	code, _, errOut := runCLI(t, "run", "-q", "--pool", "a", "--lease", "3s", "--grace", "300ms", "--parallel", "2", "--gpus", "none", "-o", s.out, s.file)
	if code != exitOK {
		t.Fatalf("the rerun: exit %d:\n%s", code, errOut)
	}
	s.once(t)
}

// TestPoolResubmitAfterDeath: the only task of a pool is stopped mid-sweep,
// by SIGKILL (it dies) or by SIGTERM (scancel: its runs interrupted, no
// requeue); a task started once its lease has expired (by the file
// system's clock: a resubmission) does not leave for want of runs to
// claim: it takes the stopped task's claims over and runs what that one
// did not finish, every run once.
func TestPoolResubmitAfterDeath(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) { poolResubmit(t, sig) })
	}
}

func poolResubmit(t *testing.T, sig syscall.Signal) {
	// Under SIGTERM, a sweep of the two runs it runs: all it claimed
	// ended (interrupted), and yet they are left for the others.
	n := 12
	if sig == syscall.SIGTERM {
		n = 2
	}
	s := newPoolSweep(t, n)
	a, stderr := s.start(t, "a")
	log := s.running(t, "a", 2, stderr)
	var stopped []string
	for i := range log.Len() {
		if log.At(i).State == ledger.StateRunning {
			stopped = append(stopped, log.At(i).ID)
		}
	}
	a.Process.Signal(sig)
	a.Wait()
	for _, id := range stopped {
		waitGone(t, s.token+"-"+id, 10*time.Second)
	}
	// Until a's lease file is a lease older than a file written now, by
	// the file system's own clock.
	beat := filepath.Join(s.out, "claims", "tasks", "a")
	deadline := time.Now().Add(30 * time.Second)
	for {
		probe := writeFile(t, s.dir, "probe", "")
		p, err1 := os.Stat(probe)
		b, err2 := os.Stat(beat)
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if p.ModTime().Sub(b.ModTime()) >= 3*time.Second { // the lease
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a's lease file keeps moving after its death")
		}
		time.Sleep(50 * time.Millisecond)
	}
	writeFile(t, s.dir, "GATE", "")
	code, _, errOut := runCLI(t, "run", "--pool", "b", "--lease", "3s", "--grace", "300ms", "--parallel", "2", "--gpus", "none", "-o", s.out, s.file)
	if code != exitOK || !strings.Contains(errOut, "pool: took over") {
		t.Fatalf("the new task: exit %d:\n%s", code, errOut)
	}
	s.once(t)
	if doc := s.status(t); doc.Counts != (results.Counts{Succeeded: s.n}) {
		t.Errorf("status %+v", doc.Counts)
	}
}

// TestPoolRequeuedTaskResumes: a pool task stopped mid-sweep (SIGTERM:
// its runs interrupted) and started again under the same name, as a
// requeued array task is, takes up its own claims at once: no lease to
// wait for, no takeover, every run once.
func TestPoolRequeuedTaskResumes(t *testing.T) {
	s := newPoolSweep(t, 6)
	a, stderr := s.start(t, "a")
	s.running(t, "a", 2, stderr)
	a.Process.Signal(syscall.SIGTERM)
	a.Wait()
	writeFile(t, s.dir, "GATE", "")
	code, _, errOut := runCLI(t, "run", "--pool", "a", "--lease", "1h", "--parallel", "2", "--gpus", "none", "-o", s.out, s.file)
	if code != exitOK || strings.Contains(errOut, "took over") {
		t.Fatalf("task a again: exit %d:\n%s", code, errOut)
	}
	s.once(t)
	if doc := s.status(t); doc.Counts != (results.Counts{Succeeded: s.n}) {
		t.Errorf("status %+v", doc.Counts)
	}
}

// stamps reads the runs' own start and end stamps (STAMPS lines "ID
// start|end NANOS", and "ID ckpt NANOS" for a checkpoint signal) into
// each run's intervals.
func stamps(t *testing.T, path string) (spans map[string][][2]int64, ckpts map[string]int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	spans, ckpts = map[string][][2]int64{}, map[string]int{}
	open := map[string]int64{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var id, what string
		var at int64
		if _, err := fmt.Sscanf(line, "%s %s %d", &id, &what, &at); err != nil {
			t.Fatalf("%s: %q: %v", path, line, err)
		}
		switch what {
		case "start":
			if _, ok := open[id]; ok {
				// A second start before the first ended: on two at once.
				spans[id] = append(spans[id], [2]int64{open[id], at}, [2]int64{at, at})
			}
			open[id] = at
		case "end":
			from, ok := open[id]
			if last := len(spans[id]) - 1; !ok && last >= 0 {
				// A second end of one start: endKilled stamped a run
				// as killed while its shell, its sleep gone, still
				// wrote its own end. It ran until the later one.
				spans[id][last][1] = max(spans[id][last][1], at)
				continue
			}
			spans[id] = append(spans[id], [2]int64{from, at})
			delete(open, id)
		case "ckpt":
			ckpts[id]++
		}
	}
	for id, from := range open {
		t.Errorf("run %s started at %d and never ended", id, from)
	}
	return spans, ckpts
}

// overlapping counts the runs that ran twice at once, by their stamps.
func overlapping(spans map[string][][2]int64) (twice int, ids []string) {
	for id, s := range spans {
		for i := range s {
			for j := range i {
				if s[i][0] < s[j][1] && s[j][0] < s[i][1] || s[i][0] == s[i][1] {
					twice++
					ids = append(ids, id)
				}
			}
		}
	}
	return twice, ids
}

// stampedSweep is a pool sweep of n runs of about secs seconds that stamp
// their own starts and ends (and a checkpoint signal, SIGUSR1) into
// STAMPS, and append their id to DONE once they end whole.
func stampedSweep(t *testing.T, n int, secs string) *poolSweep {
	t.Helper()
	dir := t.TempDir()
	s := &poolSweep{dir: dir, out: filepath.Join(dir, "out"), token: tokenFor("np-pool-", dir), n: n}
	var tasks strings.Builder
	for i := range n {
		fmt.Fprintf(&tasks, `bash -c 'st() { echo "$NODEPACK_RUN_ID $1 $(date +%%s%%N)" >> %[1]s/STAMPS; }; trap "st ckpt" USR1; trap "st end; exit 143" TERM; st start; (trap "" USR1; exec -a %[2]s-$NODEPACK_RUN_ID sleep %[3]s) & while ! wait; do :; done; st end; echo $NODEPACK_RUN_ID >> %[1]s/DONE' # %[4]d`+"\n", dir, s.token, secs, i)
	}
	s.file = writeFile(t, dir, "tasks.txt", tasks.String())
	return s
}

// TestPoolFrozenTask is the regression of issue 64: a pool task frozen
// (SIGSTOP of its nodepack, its runs going on) for longer than its lease.
// Its supervisor asks its run for a checkpoint and stops it before its
// lease expires, so the run is never on two tasks at once; the other
// task takes its claims over; on waking it starts nothing it does not
// own and reports no success for a run it no longer owns: every run
// succeeds exactly once, and the readers count each once.
func TestPoolFrozenTask(t *testing.T) {
	s := stampedSweep(t, 6, "2")
	extra := []string{"--lease", "4s", "--parallel", "1", "--checkpoint-signal", "USR1"}
	a, aErr := s.start(t, "a", extra...)
	s.running(t, "a", 1, aErr)
	b, bErr := s.start(t, "b", extra...)
	s.running(t, "b", 1, bErr)
	// Freeze a until b has taken its claims over and started a run of
	// them: two leases and more.
	a.Process.Signal(syscall.SIGSTOP)
	frozen := time.Now()
	lease := filepath.Join(s.out, "claims", "tasks", "a")
	for deadline := time.Now().Add(2 * time.Minute); !strings.Contains(bErr.String(), "pool: took over"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			a.Process.Signal(syscall.SIGCONT)
			t.Fatalf("b never took a's claims over:\n%s", bErr)
		}
	}
	st, err := os.Stat(lease)
	if err != nil {
		t.Fatal(err)
	}
	renewed := st.ModTime() // a's last renewal, by this node's one clock
	a.Process.Signal(syscall.SIGCONT)
	t.Logf("a frozen for %v", time.Since(frozen).Round(time.Millisecond))
	// a exits 1: its run was interrupted here (and ran there), the sign
	// of a task that was seen dead.
	if err := a.Wait(); a.ProcessState.ExitCode() != 1 || !strings.Contains(aErr.String(), "taken over by another task") {
		t.Errorf("a: %v, want exit 1 and its claim said taken over\n%s", err, aErr)
	}
	if err := b.Wait(); err != nil {
		t.Errorf("b: %v\n%s", err, bErr)
	}
	s.once(t)
	spans, ckpts := stamps(t, filepath.Join(s.dir, "STAMPS"))
	if twice, ids := overlapping(spans); twice > 0 {
		t.Errorf("%d runs ran on two tasks at once: %v\na:\n%s\nb:\n%s", twice, ids, aErr, bErr)
	}
	// The run a was running when it froze: stopped by its supervisor,
	// a checkpoint asked for first, before a's lease could expire.
	var stoppedAt int64
	for id, sp := range spans {
		if len(sp) > 1 && ckpts[id] > 0 {
			stoppedAt = sp[0][1]
		}
	}
	if stoppedAt == 0 {
		t.Fatalf("no run was stopped with a checkpoint asked and run again: %v %v\na:\n%s", spans, ckpts, aErr)
	}
	after := time.Unix(0, stoppedAt).Sub(renewed)
	t.Logf("a's frozen run stopped %v after a's last renewal (lease 4s: the rule is within 2s)", after.Round(time.Millisecond))
	if after >= 4*time.Second {
		t.Errorf("a's frozen run stopped %v after a's last renewal, past its lease of 4s", after)
	}
	if doc := s.status(t); doc.Counts != (results.Counts{Succeeded: s.n}) {
		t.Errorf("status %+v", doc.Counts)
	}
}
