package submit

import (
	"path/filepath"

	"golang.org/x/sys/unix"
)

// inMemory reports whether dir, or the nearest directory above it that
// exists, is on a tmpfs or ramfs.
func inMemory(dir string) bool {
	var st unix.Statfs_t
	for d := dir; ; d = filepath.Dir(d) {
		if err := unix.Statfs(d, &st); err == nil {
			return st.Type == unix.TMPFS_MAGIC || st.Type == unix.RAMFS_MAGIC
		}
		if d == "/" {
			return false
		}
	}
}
