package proc

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// TestStaleScratchRemoved: MakeScratch (an Execute's) removes the scratch roots in its
// TMPDIR whose nodepack is gone (its pid free, or held by a process that
// started later), and keeps those of a nodepack that runs and what is not
// a root named by pid and start.
func TestStaleScratchRemoved(t *testing.T) {
	base := t.TempDir()
	start, ok := procStart(os.Getpid())
	if !ok {
		t.Skip("no /proc/PID/stat")
	}
	self := strconv.Itoa(os.Getpid())
	dirs := map[string]bool{ // name → kept
		"nodepack-" + self + "-" + strconv.FormatUint(start, 10) + "-alive":    true,
		"nodepack-" + self + "-" + strconv.FormatUint(start+1, 10) + "-reused": false,
		"nodepack-999999999-1-gone": false,
		"nodepack-4242":             true, // an older name: not ours to judge
		"other":                     true,
	}
	for name := range dirs {
		os.MkdirAll(filepath.Join(base, name, "0.1"), 0o700)
		os.WriteFile(filepath.Join(base, name, "0.1", "data"), []byte("x"), 0o600)
	}
	dir, err := MakeScratch(base)
	if err != nil {
		t.Fatal(err)
	}
	RemoveScratch(dir)
	for name, kept := range dirs {
		if _, err := os.Stat(filepath.Join(base, name)); (err == nil) != kept {
			t.Errorf("%s: present %v, want %v", name, err == nil, kept)
		}
	}
}
