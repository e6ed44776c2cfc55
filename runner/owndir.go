package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// ownDir checks that what is at path, if anything, is a directory (not a
// symbolic link) that belongs to this user, where the system says owners.
func ownDir(path string) error {
	st, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	const why = "nodepack uses the output directory it names itself only when it is a real directory of yours; remove it, or choose the output directory yourself (-o)"
	if !st.IsDir() {
		return fmt.Errorf("%s is not a directory of nodepack's (%s): %s", path, describeMode(st.Mode()), why)
	}
	if uid, ok := fileOwner(st); ok && uid != os.Geteuid() {
		return fmt.Errorf("%s belongs to uid %d, not to you (uid %d): %s", path, uid, os.Geteuid(), why)
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
