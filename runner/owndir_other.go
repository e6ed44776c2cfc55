//go:build !unix

package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// ownDir checks that what is at path, if anything, is a directory, not a
// symbolic link; these systems say no owner.
func ownDir(path string) error {
	st, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a directory of nodepack's: remove it, or choose the output directory yourself (-o)", path)
	}
	return nil
}
