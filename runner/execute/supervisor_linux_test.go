//go:build linux

package execute

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodepack/nodepack/runner/proc"
	"github.com/nodepack/nodepack/runner/run"
)

// procStatus reads one field of /proc/PID/status.
func procStatus(pid int, field string) string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// poll polls cond until it holds, failing the test after 10 s.
func poll(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

const (
	// helperSweepEnv makes the test binary run helperSweep in the
	// directory it names instead of the tests.
	helperSweepEnv = "NODEPACK_TEST_HELPER_SWEEP"
	// noSupervisorEnv makes the test binary an embedder that did not call
	// MaybeGuard.
	noSupervisorEnv = "NODEPACK_TEST_NO_SUPERVISOR"
	// spawnerEnv makes helperSweep start its runs from spawner threads,
	// as runs beyond directLimit start.
	spawnerEnv = "NODEPACK_TEST_SPAWNER"
	// markVar marks every process of the helper's runs, for the test to
	// find them by environment.
	markVar = "NODEPACK_TEST_MARK"
)

// helperSweep runs two runs in dir that each leave three processes behind
// and block: a member of the run's group, one that left it with setsid,
// and a group member that scrubbed the session from its environment. Each
// announces itself with a file in dir; the run's leader writes its pid.
func helperSweep(dir string) int {
	script := `echo $$ > leader.$NODEPACK_RUN_ID
(touch member.$NODEPACK_RUN_ID; exec sleep 60) &
setsid bash -c 'touch setsid.$NODEPACK_RUN_ID; exec sleep 60' &
env -u ` + proc.SessionVar + ` bash -c 'touch scrubbed.$NODEPACK_RUN_ID; exec sleep 60' &
wait`
	runs := []run.Run{{ID: "a", Args: []string{"bash", "-c", script}, Dir: dir}, {ID: "b", Args: []string{"bash", "-c", script}, Dir: dir}}
	if os.Getenv(spawnerEnv) != "" {
		proc.SetKnobs(proc.Knobs{Spawner: true})
	}
	_, err := Execute(context.Background(), run.Runs(runs...), Options{Policy: Policy{Parallel: 2}, Process: Process{TempDir: dir}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// startHelperSweep starts helperSweep in a process of its own, with its
// runs started from spawner threads if spawner is set, and waits until
// both runs left their three processes; it returns the process and the
// runs' leaders.
func startHelperSweep(t *testing.T, supervised, spawner bool) (*exec.Cmd, []int, string) {
	dir := t.TempDir()
	mark := "mark-" + filepath.Base(dir)
	cmd := exec.Command("/proc/self/exe", "-test.run=^$")
	cmd.Env = append(os.Environ(), helperSweepEnv+"="+dir, markVar+"="+mark)
	if !supervised {
		cmd.Env = append(cmd.Env, noSupervisorEnv+"=1")
	}
	if spawner {
		cmd.Env = append(cmd.Env, spawnerEnv+"=1")
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		for _, pid := range processesMarked(mark) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	var leaders []int
	poll(t, func() bool {
		for _, f := range []string{"member", "setsid", "scrubbed", "leader"} {
			for _, id := range []string{"a", "b"} {
				if _, err := os.Stat(filepath.Join(dir, f+"."+id)); err != nil {
					return false
				}
			}
		}
		return true
	})
	for _, id := range []string{"a", "b"} {
		b, _ := os.ReadFile(filepath.Join(dir, "leader."+id))
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatalf("leader %s: %q", id, b)
		}
		leaders = append(leaders, pid)
	}
	return cmd, leaders, mark
}

// processesMarked lists the live processes whose environment has
// markVar=mark.
func processesMarked(mark string) []int {
	var pids []int
	names, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, name := range names {
		env, err := os.ReadFile(name)
		if err != nil || !bytes.Contains(env, []byte("\x00"+markVar+"="+mark+"\x00")) {
			continue
		}
		pid, _ := strconv.Atoi(strings.Split(name, "/")[2])
		pids = append(pids, pid)
	}
	return pids
}

// TestKill9LeavesNoRun: SIGKILL of a program that called MaybeGuard leaves
// no process of any run behind — not the leader, not a member of its
// group, not one that left the group with setsid, not a group member that
// scrubbed its environment — within a second, every time, however the
// runs started.
func TestKill9LeavesNoRun(t *testing.T) {
	for i := range 6 {
		cmd, _, mark := startHelperSweep(t, true, i%2 == 1)
		cmd.Process.Kill()
		cmd.Wait()
		deadline := time.Now().Add(time.Second)
		for left := processesMarked(mark); len(left) > 0; left = processesMarked(mark) {
			if time.Now().After(deadline) {
				t.Fatalf("%d processes of the runs left a second after SIGKILL of the runner", len(left))
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
}

// TestKill9WithoutSupervisor is the embedder's reduced guarantee: without
// MaybeGuard, SIGKILL of the program still ends every run's leader
// (Pdeathsig); what the leader started may live on. A run started
// directly keeps the thread that forked it until it exits, and a spawner's
// thread never exits, so Pdeathsig fires only with the program's death.
func TestKill9WithoutSupervisor(t *testing.T) {
	for _, spawner := range []bool{false, true} {
		cmd, leaders, _ := startHelperSweep(t, false, spawner)
		cmd.Process.Kill()
		cmd.Wait()
		deadline := time.Now().Add(time.Second)
		for _, pid := range leaders {
			for syscall.Kill(pid, 0) == nil && !strings.HasPrefix(procStatus(pid, "State"), "Z") {
				if time.Now().After(deadline) {
					t.Fatalf("spawner %v: run leader %d alive a second after SIGKILL of the runner", spawner, pid)
				}
				time.Sleep(2 * time.Millisecond)
			}
		}
	}
}

// waitMarked is a run's first command in the mark tests: without
// ClaimChildren a run is marked right after it starts, and what it forks
// before that carries no mark (the window the README owns up to); the run
// waits until its own limits show the mark (19 digits: 2^61 µs and more).
const waitMarked = "for i in $(seq 3000); do grep -Eq '^Max realtime timeout +[0-9]{19} ' /proc/$$/limits && break; sleep 0.01; done; "

// TestMarkFindsWhatLeftGroupAndEnvironment: in a program that embeds the
// runner (no ClaimChildren: each run is marked as it starts), a run's
// grandchild that left its process group and cleared its environment is
// killed when the sweep ends, found by the mark.
func TestMarkFindsWhatLeftGroupAndEnvironment(t *testing.T) {
	name := fmt.Sprintf("marked-%d-%d", os.Getpid(), time.Now().UnixNano())
	line := waitMarked + "setsid env -i bash -c 'exec -a " + name + " sleep 300' & for i in $(seq 3000); do pgrep -f '^" + name + " ' >/dev/null && break; sleep 0.01; done"
	sum, _, err := execute(t, t.Context(), lanes(2), Options{}, shell(line, line)...)
	if err != nil || sum.Succeeded != 2 {
		t.Fatalf("Execute: %v, %+v", err, sum)
	}
	out, _ := exec.Command("pgrep", "-f", "^"+name+" ").Output()
	if len(out) > 0 {
		exec.Command("pkill", "-9", "-f", "^"+name+" ").Run()
		t.Errorf("processes that left their group and environment outlived the sweep: %s", out)
	}
}

// TestEscapeeDiesWithItsRun: a run's grandchild that left its process group
// and cleared its environment is killed when that run ends, not only when
// the sweep does: the other run, still running, sees it gone. The first
// run ends only once the second has seen the grandchild (a file says so).
func TestEscapeeDiesWithItsRun(t *testing.T) {
	name := fmt.Sprintf("ownrun-%d-%d", os.Getpid(), time.Now().UnixNano())
	seenFile := filepath.Join(t.TempDir(), "seen")
	alive := "pgrep -f '^" + name + " ' >/dev/null"
	first := waitMarked + "setsid env -i bash -c 'exec -a " + name + " sleep 300' & for i in $(seq 3000); do test -e " + seenFile + " && break; sleep 0.01; done"
	// Exit 0 only if the grandchild went while this run still ran.
	second := "for i in $(seq 3000); do " + alive + " && break; sleep 0.01; done; touch " + seenFile +
		"; for i in $(seq 3000); do " + alive + " || exit 0; sleep 0.01; done; exit 1"
	sum, events, err := execute(t, t.Context(), lanes(2), Options{}, shell(first, second)...)
	defer exec.Command("pkill", "-9", "-f", "^"+name+" ").Run()
	if err != nil || sum.Succeeded != 2 {
		for _, ev := range events {
			t.Logf("run %d: %s exit %d", ev.Run.Index, ev.Reason, ev.ExitCode)
		}
		t.Fatalf("%+v, %v: want both to succeed: the grandchild killed when its run ended, while the other still ran", sum, err)
	}
}
