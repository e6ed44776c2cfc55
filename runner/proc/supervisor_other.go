//go:build !linux

package proc

import (
	"syscall"
	"time"
)

// MaybeGuard does nothing on systems other than Linux, where runs are
// started directly and nothing outlives the program to clean up after it.
// On Linux it lets the runner start one supervisor process that does; call
// it first thing in main.
func MaybeGuard() {}

// ClaimChildren does nothing on systems other than Linux; see its Linux
// documentation.
func ClaimChildren() {}

// StopBy does nothing and reports false: there is no supervisor here.
func StopBy(guard string, at time.Time, sig syscall.Signal, grace time.Duration) bool { return false }
