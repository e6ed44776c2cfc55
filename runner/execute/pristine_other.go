//go:build !linux

package execute

import (
	"io"
	"os"
)

// pristine reports whether dir is still an empty directory only its owner
// may enter, as prepare made it: then the lane's next run may have it, at
// the cost of a look instead of a mkdir and a rmdir per run.
func pristine(dir string) bool {
	d, err := os.Open(dir)
	if err != nil {
		return false
	}
	defer d.Close()
	if fi, err := d.Stat(); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		return false
	}
	_, err = d.Readdirnames(1)
	return err == io.EOF
}
