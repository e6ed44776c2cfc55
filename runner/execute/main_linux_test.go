//go:build linux

package execute

import (
	"os"
	"testing"
)

// TestMain makes the test binary able to act as a guard, as a program's
// main does by calling MaybeGuard first.
func TestMain(m *testing.M) {
	MaybeGuard()
	os.Exit(m.Run())
}
