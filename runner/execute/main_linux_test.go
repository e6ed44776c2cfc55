//go:build linux

package execute

import (
	"os"
	"testing"

	"github.com/nodepack/nodepack/runner/proc"
)

// TestMain makes the test binary able to act as the supervisor, as a
// program's main does by calling MaybeGuard first, and as the sweep that
// the kill -9 tests kill (helperSweep).
func TestMain(m *testing.M) {
	if os.Getenv(noSupervisorEnv) == "" {
		proc.MaybeGuard()
	}
	if dir := os.Getenv(helperSweepEnv); dir != "" {
		os.Exit(helperSweep(dir))
	}
	os.Exit(m.Run())
}
