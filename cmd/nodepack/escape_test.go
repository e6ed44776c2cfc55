package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestRunsTextReachesNoTerminal: a run that prints escape sequences to its
// stderr, and a task file whose name holds one, get none of their bytes
// onto the user's terminal through run, status and tail; tail --raw
// passes them when asked.
func TestRunsTextReachesNoTerminal(t *testing.T) {
	dir := t.TempDir()
	const hostile = `printf '\033]0;PWNED\007\033[2J\r' >&2; exit 1`
	tasks := writeFile(t, dir, "tasks\x1b[31m.txt", hostile+"\n")
	out := filepath.Join(dir, "out")
	for _, tc := range []struct {
		description string
		args        []string
		want        string // an escaped trace of the hostile text
	}{
		{"run", []string{"run", "--gpus", "none", "-o", out, tasks}, `\x1b]0;PWNED\x07`},
		{"run -q", []string{"run", "-q", "--gpus", "none", "-o", out, "--restart", tasks}, `\x1b]0;PWNED\x07`},
		{"run --live, which streams the runs' lines", []string{"run", "-q", "--live", "--gpus", "none", "-o", out, "--restart", tasks}, `\x1b[2J\x0d`},
		{"status", []string{"status", out}, `\x1b]0;PWNED\x07`},
		{"status --failed", []string{"status", "--failed", out}, `tasks\x1b[31m.txt:1`},
		{"tail", []string{"tail", "--failed", out}, `\x1b[2J\x0d`},
		{"a bad input's one line", []string{"run", "--gpus", "none", "-o", out, "--restart", "--request", "*: gpus=\x1b[2J", "--sweep", "--", "echo", "a=1"}, `\x1b[2J`},
	} {
		_, stdout, stderr := runCLI(t, tc.args...)
		all := stdout + stderr
		if strings.ContainsAny(all, "\x1b\x07\r") {
			t.Errorf("%s: raw control characters reach the terminal:\n%q", tc.description, all)
		}
		if !strings.Contains(all, tc.want) {
			t.Errorf("%s: output lacks the escaped %s:\n%s", tc.description, tc.want, all)
		}
	}
	if _, stdout, _ := runCLI(t, "tail", "--raw", "--failed", out); !strings.Contains(stdout, "\x1b]0;PWNED\x07") {
		t.Errorf("tail --raw: %q, want the run's bytes as they are", stdout)
	}
}
