//go:build !unix

package untrusted

import (
	"fmt"
	"os"
	"path/filepath"
)

func openDir(path string) (*os.File, error) { return os.Open(path) }

// openBelow checks each part of rel with Lstat before the open: not
// proof against a race, on systems without openat.
func openBelow(dir *os.File, rel string) (*os.File, error) {
	path := filepath.Join(dir.Name(), rel)
	for p := path; p != dir.Name() && p != filepath.Dir(p); p = filepath.Dir(p) {
		st, err := os.Lstat(p)
		if err != nil {
			return nil, err
		}
		if st.Mode()&os.ModeSymlink != 0 {
			return nil, fmt.Errorf("%s: %w", path, ErrLink)
		}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, ErrNotRegular)
	}
	return f, nil
}
