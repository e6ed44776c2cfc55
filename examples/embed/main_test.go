package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/nodepack/nodepack/runner/proc"
)

func TestMain(m *testing.M) {
	proc.MaybeGuard()
	os.Exit(m.Run())
}

// TestLaunch runs the launcher as go run does: 20 runs built in Go, all
// succeed the first time, none runs again the second, and the best is
// the run whose learning rate is nearest 0.01 with seed 0.
func TestLaunch(t *testing.T) {
	var out bytes.Buffer
	if err := launch(t.Context(), t.TempDir(), &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{
		"round 1: 20 ran, 20 succeeded, 0 failed, 0 skipped as done before\n",
		"round 2: 0 ran, 0 succeeded, 0 failed, 20 skipped as done before\n",
		"best of 20 runs: lr=0.01 seed=0 loss=0\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
