//go:build !linux

package execute

// MaybeGuard does nothing on systems other than Linux, where runs are
// started directly. On Linux it lets the runner start every run through a
// guard process; call it first thing in main.
func MaybeGuard() {}
