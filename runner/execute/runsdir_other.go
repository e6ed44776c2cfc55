//go:build !unix

package execute

import (
	"os"
	"path/filepath"
	"time"
)

// On these systems nodepack's writes go by path, and a symbolic link
// planted in the output directory is followed.

func openDir(path string) (*os.File, error) { return os.Open(path) }

func mkdirIn(dir *os.File, name string) error {
	return os.Mkdir(filepath.Join(dir.Name(), name), 0o755)
}

func renameIn(dir *os.File, old, new string) error {
	return os.Rename(filepath.Join(dir.Name(), old), filepath.Join(dir.Name(), new))
}

func statIn(dir *os.File, name string) (size int64, mtime time.Time, ok bool) {
	st, err := os.Lstat(filepath.Join(dir.Name(), name))
	if err != nil {
		return 0, time.Time{}, false
	}
	return st.Size(), st.ModTime(), true
}

func openDirIn(dir *os.File, name string) (*os.File, error) {
	return os.Open(filepath.Join(dir.Name(), name))
}

func openIn(dir *os.File, name string, truncate, fresh bool) (*os.File, error) {
	flags := os.O_WRONLY | os.O_CREATE | os.O_APPEND
	if truncate {
		flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	return os.OpenFile(filepath.Join(dir.Name(), name), flags, 0o644)
}

// roomLow cannot tell here: always sync.
func roomLow(string) bool { return true }

func isDirIn(dir *os.File, name string) bool {
	st, err := os.Lstat(filepath.Join(dir.Name(), name))
	return err == nil && st.IsDir()
}
