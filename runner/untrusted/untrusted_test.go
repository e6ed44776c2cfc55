package untrusted

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestOpen: what a run may leave where nodepack reads: a regular file is
// read; a link (to a secret, to /dev/zero, as the directory above the
// file) is not followed; a FIFO, a directory or a device is refused at
// once, never waited on; a path out of the directory is refused.
func TestOpen(t *testing.T) {
	root := t.TempDir()
	run := filepath.Join(root, "runs", "a-1")
	os.MkdirAll(run, 0o755)
	os.WriteFile(filepath.Join(run, "metrics.jsonl"), []byte("{\"loss\": 1}\n"), 0o644)
	secret := filepath.Join(t.TempDir(), "secret.jsonl")
	os.WriteFile(secret, []byte("{\"loss\": 0}\n"), 0o644)
	os.Symlink(secret, filepath.Join(run, "linked.jsonl"))
	os.Symlink("/dev/zero", filepath.Join(run, "zero"))
	if err := syscall.Mkfifo(filepath.Join(run, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Mkdir(filepath.Join(run, "dir"), 0o755)
	os.Symlink(filepath.Dir(secret), filepath.Join(root, "runs", "b-2")) // a run directory replaced by a link
	for _, tc := range []struct {
		rel  string
		want error // nil: opened
	}{
		{"runs/a-1/metrics.jsonl", nil},
		{"runs/a-1/linked.jsonl", ErrLink},
		{"runs/a-1/zero", ErrLink},
		{"runs/a-1/fifo", ErrNotRegular},
		{"runs/a-1/dir", ErrNotRegular},
		{"runs/b-2/secret.jsonl", ErrLink},
		{"runs/a-1/missing", fs.ErrNotExist},
	} {
		f, err := Open(root, tc.rel)
		if tc.want == nil {
			if err != nil {
				t.Errorf("%s: %v", tc.rel, err)
			} else {
				f.Close()
			}
			continue
		}
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.rel, err, tc.want)
		}
		if f != nil {
			f.Close()
		}
	}
	for _, rel := range []string{"../x", "/etc/passwd", ".", "runs/../../x"} {
		if f, err := Open(root, rel); err == nil {
			f.Close()
			t.Errorf("%s: opened, want refused", rel)
		}
	}
	if _, err := Open(root, "/dev/null"); err == nil {
		t.Error("an absolute path was opened")
	}
}

// TestReadFile: a file over the bound is refused, not read; one within it
// is read whole.
func TestReadFile(t *testing.T) {
	root := t.TempDir()
	os.WriteFile(filepath.Join(root, "small"), []byte("12345"), 0o644)
	if b, err := ReadFile(root, "small", 5); err != nil || string(b) != "12345" {
		t.Errorf("ReadFile within the bound: %q, %v", b, err)
	}
	if _, err := ReadFile(root, "small", 4); !errors.Is(err, ErrTooLarge) {
		t.Errorf("ReadFile over the bound: %v, want ErrTooLarge", err)
	}
}
