package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// closedReader runs nodepack with args, its standard output a pipe whose
// reader has gone before it writes: it returns how it ended (its exit
// status, or the signal that killed it) and its standard error.
func closedReader(t *testing.T, args ...string) (string, string) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	cmd := nodepackCommand(t, nil, args...)
	var stderr syncBuilder
	cmd.Stdout, cmd.Stderr = w, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatalf("nodepack %s: still running a minute after its reader went away", strings.Join(args, " "))
	}
	ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		return ws.Signal().String(), stderr.String()
	}
	return fmt.Sprintf("exit %d", ws.ExitStatus()), stderr.String()
}

// TestReaderGoneEndsOutputOnly: a reader of nodepack's output that goes
// away (| head -1) ends the output, not the command: it ends as it
// would have, with its own exit status (status: 1 for a sweep with a
// failed run), nothing said on standard error, not killed by SIGPIPE; a
// command that follows (tail, status --watch) stops. Under set -o
// pipefail, status --runs | head -1 of a table bigger than a pipe holds
// (head exits before status is done, every time) is status's 0.
func TestReaderGoneEndsOutputOnly(t *testing.T) {
	t.Parallel() // its commands run in processes of their own
	dir := t.TempDir()
	var tasks strings.Builder
	for i := range 500 {
		fmt.Fprintf(&tasks, "echo run %d\n", i)
	}
	writeFile(t, dir, "ok.txt", tasks.String())
	writeFile(t, dir, "mixed.txt", "true\necho oops; exit 3\n") // tail --failed has a line to write
	ok, mixed, slow := filepath.Join(dir, "ok"), filepath.Join(dir, "mixed"), filepath.Join(dir, "slow")
	for _, s := range [][2]string{{ok, "ok.txt"}, {mixed, "mixed.txt"}} {
		runCLI(t, "run", "-q", "--gpus", "none", "-o", s[0], filepath.Join(dir, s[1]))
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"status", ok}, "exit 0"},
		{[]string{"status", mixed}, "exit 1"},
		{[]string{"status", "--runs", ok}, "exit 0"},
		{[]string{"status", "--watch", "50ms", ok}, "exit 0"},
		{[]string{"tail", "--failed", mixed}, "exit 0"},
		{[]string{"--help"}, "exit 0"},
		{[]string{"man"}, "exit 0"},
	} {
		if got, stderr := closedReader(t, tc.args...); got != tc.want || stderr != "" {
			t.Errorf("nodepack %s, its reader gone: %s, stderr %q; want %s, nothing said", strings.Join(tc.args, " "), got, stderr, tc.want)
		}
	}

	// tail following a run that goes on.
	token := tokenFor("pipe-", dir)
	release := filepath.Join(dir, "release")
	writeFile(t, dir, "slow.txt", fmt.Sprintf("echo started; until test -e %s; do sleep 0.05; done # %s\n", release, token))
	cmd, stderr := startNodepack(t, token, "run", "-q", "--gpus", "none", "-o", slow, filepath.Join(dir, "slow.txt"))
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if _, out, _ := runCLI(t, "status", slow); strings.Contains(out, " 1 running") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the slow run did not start:\n%s", stderr)
		}
	}
	if got, errOut := closedReader(t, "tail", slow); got != "exit 0" || errOut != "" {
		t.Errorf("nodepack tail of a running run, its reader gone: %s, stderr %q; want it to stop, exit 0, nothing said", got, errOut)
	}
	writeFile(t, dir, "release", "")
	if code := exitCode(t, cmd); code != 0 {
		t.Errorf("the slow sweep: exit %d\n%s", code, stderr)
	}

	// As a user types it, under pipefail.
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	sh := exec.Command("bash", "-e", "-o", "pipefail", "-c", `"$0" status --runs "$1" | head -1`, exe, ok)
	sh.Env = append(os.Environ(), "NODEPACK_TEST_AS_MAIN=1")
	if out, err := sh.CombinedOutput(); err != nil || !strings.Contains(string(out), "id") {
		t.Errorf("nodepack status --runs DIR | head -1 under pipefail: %v\n%s", err, out)
	}
}
