//go:build unix

package runner

import (
	"io/fs"
	"syscall"
)

// fileOwner returns the uid that owns the file st describes.
func fileOwner(st fs.FileInfo) (int, bool) {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(sys.Uid), true
}
