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
