package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runDirOf returns the run directory nodepack would make for the first
// run of tasks in out (from run --dry-run --json).
func runDirOf(t *testing.T, out, tasks string) string {
	t.Helper()
	code, stdout, stderr := runCLI(t, "run", "--dry-run", "--json", "--gpus", "none", "-o", out, tasks)
	if code != exitOK {
		t.Fatalf("dry run: exit %d\n%s", code, stderr)
	}
	var doc struct {
		Runs []struct {
			Dir string `json:"dir"`
		} `json:"runs"`
	}
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil || len(doc.Runs) == 0 {
		t.Fatalf("dry run: %v\n%s", err, stdout)
	}
	return doc.Runs[0].Dir
}

// TestNoWriteThroughPlantedLinks: a symbolic link planted where nodepack
// writes — a run's log, its directory, runs/, the ledger, the lock's
// owner file — is never written through: the file it points at stays as
// it was. Found up front it is exit 2 naming the path before anything
// runs; found for one run, that attempt fails as setup naming the path.
func TestNoWriteThroughPlantedLinks(t *testing.T) {
	for _, tc := range []struct {
		description string
		plant       func(t *testing.T, out, runDir, victim string)
		code        int
		want        string // in stderr
	}{
		{"a run's stdout.log", func(t *testing.T, out, runDir, victim string) {
			os.MkdirAll(runDir, 0o755)
			symlink(t, victim, filepath.Join(runDir, "stdout.log"))
		}, exitFailed, "stdout.log: a symbolic link"},
		{"a run's directory", func(t *testing.T, out, runDir, victim string) {
			os.MkdirAll(filepath.Dir(runDir), 0o755)
			symlink(t, filepath.Dir(victim), runDir)
		}, exitFailed, "echo_written-"},
		{"runs/", func(t *testing.T, out, runDir, victim string) {
			os.MkdirAll(out, 0o755)
			symlink(t, filepath.Dir(victim), filepath.Join(out, "runs"))
		}, exitUsage, "runs: a symbolic link"},
		{"the ledger", func(t *testing.T, out, runDir, victim string) {
			os.MkdirAll(out, 0o755)
			symlink(t, victim, filepath.Join(out, "ledger.jsonl"))
		}, exitUsage, "ledger.jsonl: a symbolic link"},
		{"the lock's owner file", func(t *testing.T, out, runDir, victim string) {
			os.MkdirAll(filepath.Join(out, "ledger.jsonl.lock"), 0o755)
			symlink(t, victim, filepath.Join(out, "ledger.jsonl.lock", "owner"))
		}, exitUsage, "owner: a symbolic link"},
		{"the lock directory", func(t *testing.T, out, runDir, victim string) {
			os.MkdirAll(out, 0o755)
			symlink(t, filepath.Dir(victim), filepath.Join(out, "ledger.jsonl.lock"))
		}, exitUsage, "ledger.jsonl.lock: a symbolic link"},
	} {
		t.Run(tc.description, func(t *testing.T) {
			dir := t.TempDir()
			victimDir := filepath.Join(dir, "victim")
			os.Mkdir(victimDir, 0o755)
			victim := writeFile(t, victimDir, "precious", "keep me\n")
			tasks := writeFile(t, dir, "tasks.txt", "echo written\n")
			out := filepath.Join(dir, "out")
			tc.plant(t, out, runDirOf(t, out, tasks), victim)
			code, _, stderr := runCLI(t, "run", "-q", "--gpus", "none", "-o", out, tasks)
			if code != tc.code || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, want %d and %q:\n%s", code, tc.code, tc.want, stderr)
			}
			if b, _ := os.ReadFile(victim); string(b) != "keep me\n" {
				t.Errorf("the file the link points at now holds %q", b)
			}
			if entries, _ := os.ReadDir(victimDir); len(entries) != 1 {
				t.Errorf("nodepack wrote into the directory the link points at: %v", entries)
			}
		})
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// TestDefaultOutputMustBeOwn: the output directory nodepack names itself
// is used only when it is a real directory of this user's: a symbolic
// link planted under its name, or a directory of another user's holding
// a ledger that says every run succeeded, is exit 2, and nothing is
// written there; an explicit -o may be a link the user chose.
func TestDefaultOutputMustBeOwn(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "t.txt", "echo ran >> "+filepath.Join(dir, "RAN")+"\n")
	run := func(args ...string) (int, string) {
		cmd := nodepackCommand(t, nil, append([]string{"run", "-q", "--gpus", "none"}, args...)...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		code := 0
		if exit, ok := err.(*exec.ExitError); ok {
			code = exit.ExitCode()
		}
		return code, string(out)
	}
	code, out := run("--dry-run", "t.txt")
	defOut := ""
	if i := strings.Index(out, "output "); code == exitOK && i >= 0 {
		defOut = strings.Fields(out[i+len("output "):])[0]
		defOut = strings.TrimSuffix(defOut, ";")
	}
	if !strings.HasPrefix(defOut, "nodepack-t-") {
		t.Fatalf("default output %q from %q", defOut, out)
	}
	elsewhere := filepath.Join(dir, "elsewhere")
	os.Mkdir(elsewhere, 0o755)
	symlink(t, elsewhere, filepath.Join(dir, defOut))
	if code, out := run("t.txt"); code != exitUsage || !strings.Contains(out, defOut+" is not a directory of nodepack's (a symbolic link)") {
		t.Errorf("a link under the default name: exit %d, want 2 naming it:\n%s", code, out)
	}
	if entries, _ := os.ReadDir(elsewhere); len(entries) != 0 {
		t.Errorf("nodepack wrote through the link: %v", entries)
	}
	// -o naming the link is the user's choice: written through.
	if code, out := run("-o", defOut, "t.txt"); code != exitOK {
		t.Errorf("-o %s (a link the user chose): exit %d\n%s", defOut, code, out)
	}
	os.Remove(filepath.Join(dir, defOut))
	os.RemoveAll(elsewhere)
	os.Remove(filepath.Join(dir, "RAN"))
	if os.Geteuid() != 0 {
		t.Skip("making a directory of another user's needs root")
	}
	// Another user's directory with a ledger saying all succeeded.
	if code, out := run("t.txt"); code != exitOK {
		t.Fatalf("first run: exit %d\n%s", code, out)
	}
	os.Remove(filepath.Join(dir, "RAN"))
	if err := os.Chown(filepath.Join(dir, defOut), 4242, 4242); err != nil {
		t.Fatal(err)
	}
	if code, out := run("t.txt"); code != exitUsage || !strings.Contains(out, "belongs to uid 4242") {
		t.Errorf("another user's directory: exit %d, want 2 naming its owner:\n%s", code, out)
	}
}
