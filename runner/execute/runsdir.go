package execute

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// runsDir is the output directory's runs/, held open: a run's directory
// and its files are made from it with *at calls that follow no symbolic
// link, so a link planted in runs/, in a run's directory or in place of
// runs/ itself cannot send the writes elsewhere. Safe for concurrent use.
type runsDir struct {
	path string
	mu   sync.Mutex
	f    *os.File // runs/; made again when a temp cleaner removed it
}

// openRunsDir makes and opens dir (OUTPUT/runs).
func openRunsDir(dir string) (*runsDir, error) {
	d := &runsDir{path: dir}
	if err := d.reopen(nil); err != nil {
		return nil, err
	}
	return d, nil
}

// reopen makes runs/ (again) and opens it, unless another caller already
// did since it saw stale (nil: at the start).
func (d *runsDir) reopen(stale *os.File) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.f != stale {
		return nil
	}
	if err := os.MkdirAll(d.path, 0o755); err != nil {
		return err
	}
	f, err := openDir(d.path)
	if err != nil {
		return err
	}
	if d.f != nil {
		d.f.Close()
	}
	d.f = f
	return nil
}

func (d *runsDir) current() *os.File {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.f
}

// close closes runs/.
func (d *runsDir) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.f != nil {
		d.f.Close()
		d.f = nil
	}
}

// runDir makes the run directory name under runs/, or finds the one an
// earlier attempt made, and returns it open; created says this call made
// it. A directory that is a symbolic link, or not a directory, is an
// error wrapping run.ErrLink.
func (d *runsDir) runDir(name string) (dir *os.File, created bool, err error) {
	for again := true; ; again = false {
		runs := d.current()
		err = mkdirIn(runs, name)
		if errors.Is(err, fs.ErrNotExist) && again {
			// runs/ was removed under the sweep (a temp cleaner): make it
			// again, and try once more.
			if err := d.reopen(runs); err != nil {
				return nil, false, err
			}
			continue
		}
		if err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, false, &os.PathError{Op: "mkdir", Path: filepath.Join(d.path, name), Err: err}
		}
		created = err == nil
		dir, err = openDirIn(runs, name)
		return dir, created, err
	}
}
