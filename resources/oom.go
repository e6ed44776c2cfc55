package resources

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"

	"github.com/nodepack/nodepack/resources/usage"
)

// OOMKills returns a reader of the count of kernel OOM kills in this
// process's memory cgroup — where the runs it starts are too — for the
// runner's Options.OOMKills; nil when this system has no such count to
// read. The count is oom_kill in cgroup v2's memory.events or in cgroup
// v1's memory.oom_control: the kernel counts a kill in the cgroup of the
// process it killed and in every ancestor, whichever limit was hit. The
// file stays open for the life of the process, so a read is one pread:
// call it once, not per sweep. The reader may be called concurrently.
func OOMKills() func() (uint64, bool) { return oomKills(os.DirFS("/"), "/") }

// oomKills is OOMKills for the file system at dir (root is the same, as
// an fs.FS).
func oomKills(root fs.FS, dir string) func() (uint64, bool) {
	p := oomKillsFile(root)
	if p == "" {
		return nil
	}
	f, err := os.Open(filepath.Join(dir, p))
	if err != nil {
		return nil
	}
	var mu sync.Mutex
	buf := make([]byte, 1024)
	read := func() (uint64, bool) {
		mu.Lock()
		defer mu.Unlock()
		n, _ := f.ReadAt(buf, 0)
		return usage.ParseOOMKill(buf[:n])
	}
	if _, ok := read(); !ok {
		f.Close()
		return nil
	}
	return read
}

// oomKillsFile finds the file that counts this process's cgroup's OOM
// kills, as a path within root; "" when there is none.
func oomKillsFile(root fs.FS) string {
	v1, v2 := ownCgroups(root)
	// A hybrid system mounts v2 without the memory controller: v1 counts.
	for _, p := range []string{path.Join(v1, "memory.oom_control"), path.Join(v2, "memory.events")} {
		if p == "memory.oom_control" || p == "memory.events" {
			continue // no such cgroup
		}
		if b, err := fs.ReadFile(root, p); err == nil {
			if _, ok := usage.ParseOOMKill(b); ok {
				return p
			}
		}
	}
	return ""
}

// ownCgroups returns this process's group in cgroup v1's memory hierarchy
// and in the cgroup v2 tree, as directories within root where they are
// usually mounted; "" for one it is not in.
func ownCgroups(root fs.FS) (v1memory, v2 string) {
	data, err := fs.ReadFile(root, "proc/self/cgroup")
	if err != nil {
		return "", ""
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		fields := strings.SplitN(sc.Text(), ":", 3)
		switch {
		case len(fields) != 3:
		case hasController(fields[1], "memory"):
			v1memory = path.Join("sys/fs/cgroup/memory", fields[2])
		case fields[0] == "0" && fields[1] == "":
			v2 = path.Join("sys/fs/cgroup", fields[2])
		}
	}
	return v1memory, v2
}

// RunMemoryCgroups returns this process's own group in cgroup v1's memory
// hierarchy when this process may make groups in it, for the runner's
// Options.MemCgroup (which gives each run that asks for memory a group of
// its own, limited to what it asked for); otherwise "" and why not.
// It makes and removes a group to find out.
//
// Under cgroup v2 it returns "": there a process may make groups with
// their own limits only where the batch system delegated its group, and
// only after moving itself out of it, which nodepack does not do.
func RunMemoryCgroups() (dir string, whyNot error) { return runMemoryCgroups(os.DirFS("/"), "/") }

// runMemoryCgroups is RunMemoryCgroups for the file system at dir (root is
// the same, as an fs.FS).
func runMemoryCgroups(root fs.FS, dir string) (string, error) {
	v1, v2 := ownCgroups(root)
	switch {
	case v1 == "" && v2 != "":
		return "", errors.New("this system has cgroup v2 only, where nodepack makes no groups of its own")
	case v1 == "":
		return "", errors.New("this system has no memory cgroups")
	}
	if _, err := fs.Stat(root, path.Join(v1, "memory.limit_in_bytes")); err != nil {
		return "", fmt.Errorf("memory cgroup: %w", err)
	}
	own := filepath.Join(dir, v1)
	probe, err := os.MkdirTemp(own, ".nodepack-probe-")
	if err != nil {
		return "", fmt.Errorf("memory cgroup: %w", err)
	}
	if err := os.Remove(probe); err != nil {
		return "", fmt.Errorf("memory cgroup: %w", err)
	}
	return own, nil
}
