//go:build linux

package proc

import (
	"os"
	"testing"
)

// TestMain makes the test binary able to act as the supervisor, as a
// program's main does by calling MaybeGuard first.
func TestMain(m *testing.M) {
	MaybeGuard()
	os.Exit(m.Run())
}
