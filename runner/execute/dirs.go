package execute

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/nodepack/nodepack/runner/proc"
)

// workDirs are the sweep's folders: the output directory's runs/, held
// open, and the scratch folder the lanes' TMPDIRs are made in.
type workDirs struct {
	out     string   // the output directory, absolute; "" for no logs
	runs    *runsDir // out/runs, held open; nil for no logs
	scratch string   // parent of the lanes' TMPDIRs
	seq     atomic.Int64
	lanes   []*string // each lane's TMPDIR (schedMu), reused while runs leave it empty; "" for none yet
}

// open opens outputDir's runs/ ("" for no logs) and makes the scratch
// folder in tempDir ("" for the system's).
func (d *workDirs) open(outputDir, tempDir string) error {
	if outputDir != "" {
		dir, err := filepath.Abs(outputDir)
		if err != nil {
			return fmt.Errorf("output dir: %w", err)
		}
		if d.runs, err = openRunsDir(filepath.Join(dir, "runs")); err != nil {
			return fmt.Errorf("output dir: %w", err)
		}
		d.out = dir
	}
	scratch, err := proc.MakeScratch(cmp.Or(tempDir, os.TempDir()))
	if err != nil {
		d.close()
		return fmt.Errorf("temp dir: %w", err)
	}
	d.scratch = scratch
	return nil
}

// close removes the scratch folder and closes runs/.
func (d *workDirs) close() {
	if d.scratch != "" {
		proc.RemoveScratch(d.scratch)
	}
	if d.runs != nil {
		d.runs.close()
	}
}
