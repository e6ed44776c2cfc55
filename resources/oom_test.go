package resources

import (
	"os"
	"path/filepath"
	"testing"
)

func TestOOMKills(t *testing.T) {
	for _, tc := range []struct {
		desc  string
		files map[string]string
		want  uint64 // the count read; 0 with ok false when none
		ok    bool
	}{
		{"cgroup v2", map[string]string{
			"proc/self/cgroup": "0::/system.slice/slurmstepd.scope/job_42/step_batch\n",
			"sys/fs/cgroup/system.slice/slurmstepd.scope/job_42/step_batch/memory.events": "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\noom_group_kill 0\n",
		}, 1, true},
		{"cgroup v1, hybrid with an empty v2 tree", map[string]string{
			"proc/self/cgroup": "12:memory:/slurm/uid_0/job_7\n0::/\n",
			"sys/fs/cgroup/memory/slurm/uid_0/job_7/memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 4\n",
		}, 4, true},
		{"no memory controller anywhere", map[string]string{
			"proc/self/cgroup": "0::/user.slice\n",
		}, 0, false},
		{"no cgroups", map[string]string{}, 0, false},
		{"a file without the count (an old kernel)", map[string]string{
			"proc/self/cgroup":            "0::/\n",
			"sys/fs/cgroup/memory.events": "low 0\nhigh 0\nmax 0\noom 0\n",
		}, 0, false},
	} {
		dir := t.TempDir()
		for name, body := range tc.files {
			p := filepath.Join(dir, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		read := oomKills(os.DirFS(dir), dir)
		if (read != nil) != tc.ok {
			t.Errorf("%s: reader %v, want one: %v", tc.desc, read != nil, tc.ok)
			continue
		}
		if read == nil {
			continue
		}
		if n, ok := read(); !ok || n != tc.want {
			t.Errorf("%s: %d, %v; want %d", tc.desc, n, ok, tc.want)
		}
	}
}

// TestOOMKillsReadsAgain: the open file is read afresh every time, as a
// cgroup file gives its current value on every read from the start.
func TestOOMKillsReadsAgain(t *testing.T) {
	dir := t.TempDir()
	events := filepath.Join(dir, "sys/fs/cgroup/job/memory.events")
	os.MkdirAll(filepath.Dir(events), 0o755)
	os.MkdirAll(filepath.Join(dir, "proc/self"), 0o755)
	os.WriteFile(filepath.Join(dir, "proc/self/cgroup"), []byte("0::/job\n"), 0o644)
	os.WriteFile(events, []byte("oom 0\noom_kill 0\n"), 0o644)
	read := oomKills(os.DirFS(dir), dir)
	if read == nil {
		t.Fatal("no reader")
	}
	// Same size, in place: the open file sees it.
	f, err := os.OpenFile(events, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte("oom 2\noom_kill 2\n"), 0)
	f.Close()
	if n, ok := read(); !ok || n != 2 {
		t.Errorf("after a kill: %d, %v", n, ok)
	}
}

func TestRunMemoryCgroups(t *testing.T) {
	for _, tc := range []struct {
		desc    string
		files   map[string]string
		wantDir string // within the test's root; "" for none
	}{
		{"cgroup v1 memory, hybrid", map[string]string{
			"proc/self/cgroup": "12:memory:/slurm/uid_0/job_7\n0::/\n",
			"sys/fs/cgroup/memory/slurm/uid_0/job_7/memory.limit_in_bytes": "9223372036854771712\n",
		}, "sys/fs/cgroup/memory/slurm/uid_0/job_7"},
		{"cgroup v2 only", map[string]string{
			"proc/self/cgroup": "0::/system.slice/slurmstepd.scope/job_42/step_batch\n",
			"sys/fs/cgroup/system.slice/slurmstepd.scope/job_42/step_batch/memory.max": "max\n",
		}, ""},
		{"v1 named in /proc but not mounted there", map[string]string{
			"proc/self/cgroup": "4:memory:/job\n",
		}, ""},
		{"no cgroups", map[string]string{}, ""},
	} {
		root := t.TempDir()
		for name, body := range tc.files {
			p := filepath.Join(root, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		dir, err := runMemoryCgroups(os.DirFS(root), root)
		want := ""
		if tc.wantDir != "" {
			want = filepath.Join(root, tc.wantDir)
		}
		if dir != want || (dir == "") != (err != nil) {
			t.Errorf("%s: %q, %v; want %q", tc.desc, dir, err, want)
		}
		if dir != "" {
			if left, _ := os.ReadDir(dir); len(left) != 1 {
				t.Errorf("%s: the probe group was left behind: %v", tc.desc, left)
			}
		}
	}
	dir, err := RunMemoryCgroups()
	t.Logf("this machine: %q, %v", dir, err)
}
