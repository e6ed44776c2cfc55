//go:build linux

package ledger

import (
	"os"

	"golang.org/x/sys/unix"
)

// lockFile takes an exclusive advisory lock on f without waiting; the
// kernel drops it when the process dies, however it dies.
func lockFile(f *os.File) error { return unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) }

// reserveFile allocates n bytes of f from off, past its end, without
// changing its size.
func reserveFile(f *os.File, off, n int64) error {
	return unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_KEEP_SIZE, off, n)
}
