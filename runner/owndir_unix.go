//go:build unix

package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// ownDir checks that what is at path, if anything, is a directory (not a
// symbolic link) that belongs to this user.
func ownDir(path string) error {
	st, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a directory of nodepack's (%s): nodepack uses the output directory it names itself only when it is a real directory of yours; remove it, or choose the output directory yourself (-o)", path, describeMode(st.Mode()))
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) != os.Geteuid() {
		return fmt.Errorf("%s belongs to uid %d, not to you (uid %d): nodepack uses the output directory it names itself only when it is a real directory of yours; remove it, or choose the output directory yourself (-o)", path, sys.Uid, os.Geteuid())
	}
	return nil
}

// describeMode names what a file is, for a person.
func describeMode(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m.IsRegular():
		return "a file"
	}
	return "a " + m.Type().String() + " file"
}
