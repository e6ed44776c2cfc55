//go:build !linux

package ledger

import (
	"errors"
	"os"
)

// lockFile does nothing: ledgers are not locked on these systems.
func lockFile(f *os.File) error { return nil }

// reserveFile is not supported: the ledger reserves no room here.
func reserveFile(f *os.File, off, n int64) error { return errors.ErrUnsupported }

// Symbolic links are followed on these systems.
const (
	noFollow  = 0
	directory = 0
)

// writeOwner writes the lock's owner file in the lock directory dir.
func writeOwner(dir *os.File, b []byte) error {
	return os.WriteFile(dir.Name()+"/owner", b, 0o644)
}
