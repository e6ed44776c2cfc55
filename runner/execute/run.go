package execute

import (
	"os"
	"slices"
	"strconv"

	"github.com/nodepack/nodepack/runner/run"
)

// label names the run in live output: where it came from (tasks.txt:12),
// with its rep when there are several, else its ID.
func label(r run.Run) string {
	switch {
	case r.Origin == "":
		return r.ID
	case r.Rep > 0:
		return r.Origin + " rep " + strconv.Itoa(r.Rep)
	}
	return r.Origin
}

// writeParams writes the run's parameters to params.json in dir, if it has
// any, following no symbolic link.
func writeParams(dir *os.File, r run.Run) error {
	if r.Params == nil {
		return nil
	}
	f, err := openIn(dir, "params.json", true, true)
	if err != nil {
		return err
	}
	_, err = f.Write(append(slices.Clip(r.Params), '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
