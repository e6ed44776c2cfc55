package proc

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodepack/nodepack/resources/usage"
)

// Cgroups makes the memory cgroups of processes launched with a memory
// limit (cgroup v1): one directory in the group this process is in, and in
// it one group per such process, removed once it is waited for.
// Its methods may be called concurrently.
type Cgroups struct {
	dir     string // nodepack-PID-* in MemCgroup
	home    string // MemCgroup's tasks file, where a spawner thread goes back to
	seq     atomic.Uint64
	removal sync.WaitGroup // removals still waiting for a group's last process
}

// NewCgroups makes a directory for the groups in parent, the cgroup v1
// memory group this process is in. Close removes it.
func NewCgroups(parent string) (*Cgroups, error) {
	procs, err := os.ReadFile(filepath.Join(parent, "cgroup.procs"))
	if err != nil {
		return nil, fmt.Errorf("memory cgroup: %w", err)
	}
	self := []byte(strconv.Itoa(os.Getpid()))
	if !slices.ContainsFunc(bytes.Fields(procs), func(pid []byte) bool { return bytes.Equal(pid, self) }) {
		return nil, fmt.Errorf("memory cgroup %s: this process is not in it", parent)
	}
	dir, err := os.MkdirTemp(parent, fmt.Sprintf("nodepack-%d-", os.Getpid()))
	if err != nil {
		return nil, fmt.Errorf("memory cgroup: %w", err)
	}
	return &Cgroups{dir: dir, home: filepath.Join(parent, "tasks")}, nil
}

// cgroup is one attempt's memory cgroup.
type cgroup struct {
	m     *Cgroups
	dir   string
	tasks string // where the spawner thread goes to start the run in the group
	limit uint64
}

// make makes a group limited to limit bytes of memory, swap included.
func (m *Cgroups) make(limit uint64) (*cgroup, error) {
	dir := filepath.Join(m.dir, strconv.FormatUint(m.seq.Add(1), 10))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("memory cgroup: %w", err)
	}
	value := []byte(strconv.FormatUint(limit, 10))
	if err := os.WriteFile(filepath.Join(dir, "memory.limit_in_bytes"), value, 0o644); err != nil {
		os.Remove(dir)
		return nil, fmt.Errorf("memory cgroup: limit: %w", err)
	}
	// No paging out past the limit: memory plus swap is held to it too
	// where the kernel accounts swap, and the group does not swap
	// where it does not. Neither file need exist.
	writeExisting(filepath.Join(dir, "memory.memsw.limit_in_bytes"), value)
	writeExisting(filepath.Join(dir, "memory.swappiness"), []byte("0"))
	return &cgroup{m: m, dir: dir, tasks: filepath.Join(dir, "tasks"), limit: limit}, nil
}

// writeExisting writes to a file that exists, without creating one.
func writeExisting(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	return errors.Join(err, f.Close())
}

// moveThread moves the calling OS thread to the group whose tasks file
// this is. A thread's children start in its group: under cgroup v1 a
// single thread may move, so a spawner thread that starts a run from
// inside the run's group puts the run there before its first instruction.
func moveThread(tasks string, tid int) error {
	if err := writeExisting(tasks, []byte(strconv.Itoa(tid))); err != nil {
		return fmt.Errorf("memory cgroup: move thread: %w", err)
	}
	return nil
}

// oomKills is the count of the group's processes that the kernel's OOM
// killer killed.
func (g *cgroup) oomKills() uint64 {
	b, _ := os.ReadFile(filepath.Join(g.dir, "memory.oom_control"))
	n, _ := usage.ParseOOMKill(b)
	return n
}

// remove removes the group once its run has been reaped. A descendant
// that left the run's process group is still in its cgroup: it is
// killed, as the sweeper would, and the group is removed once it is gone,
// in the background.
func (g *cgroup) remove() {
	if os.Remove(g.dir) == nil {
		return
	}
	g.m.removal.Go(func() { removeGroup(g.dir, removeWait) })
}

// removeWait bounds how long a group's removal waits for its last
// processes to exit: a process the OOM killer chose can take seconds on a
// loaded node.
const removeWait = 30 * time.Second

// removeGroup kills what is left in the group at dir and removes it,
// trying until it is gone or within is up.
func removeGroup(dir string, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for wait := time.Millisecond; ; wait = min(2*wait, 250*time.Millisecond) {
		killAll(dir)
		if err := os.Remove(dir); err == nil || errors.Is(err, fs.ErrNotExist) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(wait)
	}
}

// killAll sends SIGKILL to every process in the group at dir but this one
// (one of whose threads may be in it while it starts a run).
func killAll(dir string) {
	b, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	self := os.Getpid()
	for _, f := range bytes.Fields(b) {
		if pid, err := strconv.Atoi(string(f)); err == nil && pid != self {
			unix.Kill(pid, unix.SIGKILL)
		}
	}
}

// Close removes the directory once every group in it is gone.
func (m *Cgroups) Close() {
	m.removal.Wait()
	left, _ := os.ReadDir(m.dir)
	for _, e := range left {
		if e.IsDir() {
			removeGroup(filepath.Join(m.dir, e.Name()), removeWait)
		}
	}
	os.Remove(m.dir)
}
