package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodepack/nodepack/runner/proc"
)

// TestMain lets a test run this test binary as the nodepack command (under
// taskset, say): with NODEPACK_TEST_AS_MAIN=1 it is nodepack.
func TestMain(m *testing.M) {
	proc.MaybeGuard()
	if os.Getenv("NODEPACK_TEST_AS_MAIN") == "1" {
		proc.ClaimChildren() // as main does; not in the tests, which start processes of their own
		os.Exit(program(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
	code := m.Run()
	if journey.path != "" {
		os.RemoveAll(filepath.Dir(journey.path))
	}
	os.Exit(code)
}

// nodepackCommand returns a command that runs this binary as nodepack,
// optionally behind a prefix such as taskset.
func nodepackCommand(t *testing.T, prefix []string, args ...string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	argv := append(append(prefix, exe), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "NODEPACK_TEST_AS_MAIN=1")
	return cmd
}

// runCLI calls run in-process and returns exit code, stdout and stderr.
func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := program(t.Context(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestUsage(t *testing.T) {
	tests := []struct {
		description string
		args        []string
		wantCode    int
		wantOut     string // in stdout
		wantErr     string // in stderr
	}{
		{"no command", nil, exitUsage, "", "Commands:"},
		{"help", []string{"--help"}, exitOK, "detect", ""},
		{"unknown command", []string{"frobnicate"}, exitUsage, "", `unknown command "frobnicate"`},
		{"detect help has an example", []string{"detect", "--help"}, exitOK, "Examples:\n  nodepack detect", ""},
		{"unknown flag", []string{"detect", "--gpu=0"}, exitUsage, "", "unknown flag: --gpu"},
		{"stray argument", []string{"detect", "extra"}, exitUsage, "", `unexpected argument "extra"`},
		{"version", []string{"version"}, exitOK, "nodepack ", ""},
		{"an MPS mode it does not know", []string{"run", "--mps", "yes", "tasks.txt"}, exitUsage, "", `--mps "yes": want auto, on or off`},
		{"a compute share without MPS", []string{"run", "--mps-compute", "tasks.txt"}, exitUsage, "", "--mps-compute goes with --mps auto or --mps on"},
		{"a prune direction begun and not given", []string{"run", "--prune", "loss:", "tasks.txt"}, exitUsage, "", `"loss:": want loss:min or loss:max`},
		{"a sort direction begun and not given", []string{"status", "--runs", "--sort", "loss:", "."}, exitUsage, "", `--sort "loss:": want COLUMN, COLUMN:min or COLUMN:max`},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, tc.args...)
			if code != tc.wantCode || !strings.Contains(stdout, tc.wantOut) || !strings.Contains(stderr, tc.wantErr) {
				t.Errorf("nodepack %q = %d\nstdout: %s\nstderr: %s\nwant %d, stdout with %q, stderr with %q",
					tc.args, code, stdout, stderr, tc.wantCode, tc.wantOut, tc.wantErr)
			}
			if code == exitUsage && len(tc.args) > 0 && strings.Count(stderr, "\n") != 1 {
				t.Errorf("a usage error should be one line, got %q", stderr)
			}
		})
	}
}
