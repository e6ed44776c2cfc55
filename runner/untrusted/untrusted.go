// Package untrusted opens what runs leave behind in their directories —
// metrics files, logs, return values — as input that may be hostile or
// merely careless: only a regular file, reached without following a
// symbolic link in any part of its path below a directory the caller
// trusts, opened without blocking (a FIFO or a device there is refused,
// never waited on), and read no further than a bound. Package untrusted
// does nothing else; its callers decide the bounds.
package untrusted

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ErrLink is wrapped by the error for a symbolic link (or anything that is
// not a directory) where a run's file, or a directory above it, should be:
// it is not followed.
var ErrLink = errors.New("a symbolic link, not followed")

// ErrNotRegular is wrapped by the error for something that is not a
// regular file: a FIFO, a device, a socket or a directory, which a read
// could block on or never finish.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is wrapped by ReadFile's error for a file over its bound.
var ErrTooLarge = errors.New("larger than nodepack reads")

// Dir is a directory the caller trusts (an output directory, a run's
// directory nodepack made and holds open), from which run files are
// opened.
type Dir struct {
	f   *os.File
	own bool
}

// OpenDir opens the directory at path, following links in path itself:
// the caller's choice, not a run's.
func OpenDir(path string) (*Dir, error) {
	f, err := openDir(path)
	if err != nil {
		return nil, err
	}
	return &Dir{f: f, own: true}, nil
}

// In uses the open directory f, which stays the caller's to close.
func In(f *os.File) *Dir { return &Dir{f: f} }

// Close closes the directory, if OpenDir opened it.
func (d *Dir) Close() error {
	if d.own {
		return d.f.Close()
	}
	return nil
}

// Open opens rel, a path relative to d, for reading: every directory on
// the way and the file itself are not symbolic links, and the file is a
// regular one. Errors name rel under d and wrap fs.ErrNotExist, ErrLink
// or ErrNotRegular.
func (d *Dir) Open(rel string) (*os.File, error) {
	rel = filepath.Clean(rel)
	if filepath.IsAbs(rel) || rel == ".." || strings.HasPrefix(rel, "../") || rel == "." {
		return nil, fmt.Errorf("%s: not a path below %s", rel, d.f.Name())
	}
	return openBelow(d.f, rel)
}

// ReadFile reads the whole of rel below d, at most max bytes: a larger
// file is an error wrapping ErrTooLarge, and is not read.
func (d *Dir) ReadFile(rel string, max int64) ([]byte, error) {
	f, err := d.Open(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readAll(f, max)
}

// Open is OpenDir(root).Open(rel): for one file.
func Open(root, rel string) (*os.File, error) {
	d, err := OpenDir(root)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.Open(rel)
}

// ReadFile is OpenDir(root).ReadFile(rel, max): for one file.
func ReadFile(root, rel string, max int64) ([]byte, error) {
	d, err := OpenDir(root)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.ReadFile(rel, max)
}

// Split returns the directory and the name of path, to open as
// OpenDir(dir).Open(name): for a caller that has only a file's path and
// trusts the directory it is in.
func Split(path string) (dir, name string) { return filepath.Dir(path), filepath.Base(path) }

// readAll reads f to its end, refusing more than max bytes.
func readAll(f *os.File, max int64) ([]byte, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > max {
		return nil, fmt.Errorf("%s: %d bytes: %w (%d)", f.Name(), st.Size(), ErrTooLarge, max)
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max { // it grew as it was read
		return nil, fmt.Errorf("%s: over %d bytes: %w", f.Name(), max, ErrTooLarge)
	}
	return b, nil
}

// pathError names what failed where.
func pathError(path string, err error) error { return &fs.PathError{Op: "open", Path: path, Err: err} }
