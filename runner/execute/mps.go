package execute

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/runner/proc"
	"golang.org/x/sys/unix"
)

// MPSMode says whether runs that share a GPU share it through NVIDIA's
// Multi-Process Service (MPS), which runs their kernels side by side
// where time-slicing takes turns, and has the driver hold each run to
// the GPU memory it asked for.
type MPSMode string

// The MPS modes. The zero value is MPSOff: until MPS is checked on a
// GPU node (scripts/gpu-check.sh), it is asked for.
const (
	// MPSOff never starts a daemon: runs share by time-slicing (or
	// through a daemon the site runs).
	MPSOff MPSMode = ""
	// MPSAuto starts an MPS control daemon of the sweep's own when the
	// first run that shares a GPU starts and the daemon's program is
	// there; where it cannot start, the sweep is told why, once, and runs
	// share by time-slicing.
	MPSAuto MPSMode = "auto"
	// MPSOn is MPSAuto, with the program required: Start refuses a sweep
	// without it.
	MPSOn MPSMode = "on"
)

// MPSProgram is the MPS control daemon's program, looked for in PATH
// unless Options.MPSControl names another.
const MPSProgram = "nvidia-cuda-mps-control"

// mpsStartTimeout bounds the wait for a daemon to come up, and for one to
// quit at a sweep's normal end; a stopped sweep waits no longer than its
// grace for it.
const mpsStartTimeout = 5 * time.Second

// mpsKillWait bounds the wait for a daemon's exit after SIGKILL to its
// group: a process the kernel cannot end at once (in an uninterruptible
// sleep) is left to the sweep for leftovers rather than waited for.
const mpsKillWait = 2 * time.Second

// mpsDaemon is the sweep's MPS control daemon: at most one per nodepack
// process, and, by its lock (mpsLock), per allocation. It is started by the
// first run that shares a GPU and quit when the sweep ends. It dies with
// this process: its parent-death signal is SIGKILL (its keeper goroutine
// holds the thread that forked it until it has exited), and the
// supervisor kills it, and the MPS servers it started, with the runs: they
// carry the session in their environment. It is no run's, so the sweep for
// runs' leftovers leaves it while it runs. Its output goes to a file in
// the sweep's scratch, never a pipe, so that a child of it that holds its
// output (in a session of its own) cannot hold up its end.
type mpsDaemon struct {
	once      sync.Once
	path      string        // the program
	pipe, log string        // CUDA_MPS_PIPE_DIRECTORY, CUDA_MPS_LOG_DIRECTORY
	p         *proc.Process // nil while there is none
	lock      *os.File
	err       error // why there is none
}

// mpsPath is the control daemon's program for opts, or an error saying
// why there is none.
func mpsPath(opts *Options) (string, error) {
	name := cmp.Or(opts.MPSControl, MPSProgram)
	path, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("no %s here", name)
	}
	return path, nil
}

// mpsEnv returns what a run placed at place adds to its environment to be
// an MPS client: the daemon's directories, and the GPU memory it asked
// for as the driver's limit; nil when the run does not share its GPU or
// the sweep has no daemon.
func (e *Execution) mpsEnv(place pack.Assignment) []string {
	if e.opts.MPS == MPSOff || !place.SharedGPUs || len(place.GPUs) == 0 {
		return nil
	}
	d := &e.mps
	d.once.Do(func() {
		if d.err = d.start(e); d.err != nil {
			e.note("MPS: " + d.err.Error() + ": runs that share a GPU take turns on it (time-slicing)")
		}
	})
	if d.err != nil {
		return nil
	}
	env := []string{"CUDA_MPS_PIPE_DIRECTORY=" + d.pipe, "CUDA_MPS_LOG_DIRECTORY=" + d.log}
	if m := place.Request.GPUMem; m > 0 && len(place.GPUs) == 1 {
		// The client's device 0 is its one GPU (CUDA_VISIBLE_DEVICES).
		env = append(env, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0="+strconv.FormatUint((m+1<<20-1)>>20, 10)+"M")
	}
	if pct := computeShare(place); e.opts.MPSCompute && pct > 0 {
		env = append(env, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE="+strconv.Itoa(pct))
	}
	return env
}

// computeShare is the percentage of its GPU's compute a run placed at
// place has a share of: its GPU share, or the part of the GPU's memory its
// gpu_mem is; rounded up, at least 1; 0 where it has no share of one GPU.
func computeShare(place pack.Assignment) int {
	r := place.Request
	var share float64
	switch {
	case len(place.GPUs) != 1:
		return 0
	case r.GPUShare > 0 && r.GPUShare < pack.GPUWhole:
		share = float64(r.GPUShare) / pack.GPUWhole
	case r.GPUMem > 0 && place.GPUs[0].MemoryBytes > 0:
		share = float64(r.GPUMem) / float64(place.GPUs[0].MemoryBytes)
	default:
		return 0
	}
	return min(max(int(math.Ceil(share*100)), 1), 100)
}

// start starts the daemon in the foreground, in a process group of its
// own, with its pipe and log directories in the sweep's scratch, and
// waits until it is up.
func (d *mpsDaemon) start(e *Execution) error {
	path, err := mpsPath(&e.opts)
	if err != nil {
		return err
	}
	lock, err := mpsLock(cmp.Or(e.opts.TempDir, os.TempDir()))
	if err != nil {
		return err
	}
	d.lock, d.path = lock, path
	root := filepath.Join(e.dirs.scratch, "mps")
	d.pipe, d.log = filepath.Join(root, "pipe"), filepath.Join(root, "log")
	for _, dir := range []string{d.pipe, d.log} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			d.release()
			return err
		}
	}
	outPath := filepath.Join(root, "daemon.out")
	out, err := os.OpenFile(outPath, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		d.release()
		return fmt.Errorf("its output: %w", err)
	}
	cmd := exec.Command(path, "-f")
	cmd.Env = append(os.Environ(), "CUDA_MPS_PIPE_DIRECTORY="+d.pipe, "CUDA_MPS_LOG_DIRECTORY="+d.log)
	if e.env.session != "" {
		cmd.Env = append(cmd.Env, proc.SessionVar+"="+e.env.session)
	}
	cmd.Stdout, cmd.Stderr = out, out // a file: Wait waits for no copy
	p, err := proc.LaunchHelper(cmd)
	out.Close()
	if err != nil {
		d.release()
		return fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	d.p = p
	deadline := time.After(mpsStartTimeout)
	for {
		for _, name := range []string{"control", "nvidia-cuda-mps-control.pid"} {
			if _, err := os.Lstat(filepath.Join(d.pipe, name)); err == nil {
				return nil
			}
		}
		select {
		case <-d.p.Exited():
			exit := d.p.Wait()
			d.release()
			return fmt.Errorf("%s exited at once: %s", filepath.Base(path), cmp.Or(fileTail(outPath), exitText(exit)))
		case <-deadline:
			d.kill()
			d.release()
			return fmt.Errorf("%s did not come up in %v", filepath.Base(path), mpsStartTimeout)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// stop quits the daemon, once every run has ended: "quit" on its control
// pipe, then SIGKILL to its group if it has not gone within wait. It
// returns within wait and mpsKillWait, whatever the daemon does.
func (d *mpsDaemon) stop(wait time.Duration) {
	if d.p == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	quit := exec.CommandContext(ctx, d.path)
	quit.Env = append(os.Environ(), "CUDA_MPS_PIPE_DIRECTORY="+d.pipe, "CUDA_MPS_LOG_DIRECTORY="+d.log)
	quit.Stdin = strings.NewReader("quit\n")
	quit.WaitDelay = 100 * time.Millisecond // a child of it that keeps its stdin open
	quit.Run()
	select {
	case <-d.p.Exited():
	case <-ctx.Done():
		d.kill()
	}
	d.release()
}

// kill sends SIGKILL to the daemon's group (its MPS servers too) and waits
// for it, at most mpsKillWait.
func (d *mpsDaemon) kill() {
	d.p.Signal(syscall.SIGKILL)
	select {
	case <-d.p.Exited():
	case <-time.After(mpsKillWait):
	}
}

// release lets another daemon of this allocation start.
func (d *mpsDaemon) release() {
	if d.lock != nil {
		d.lock.Close()
		d.lock = nil
	}
	d.p = nil
}

// mpsLockName is the MPS lock's name in its folder.
const mpsLockName = "mps.lock"

// MPSLockDir is where the lock that allows one MPS daemon per allocation
// lives, given the sweep's temporary directory base (Options.TempDir, or
// the system's): a folder of this user's own in it, nodepack-UID. With a
// job's own scratch (SLURM_TMPDIR, or a TMPDIR the batch system sets per
// job) that is one daemon per job; with a node's shared /tmp, one per
// user and node: never a file another user made.
func MPSLockDir(base string) string {
	return filepath.Join(base, "nodepack-"+strconv.Itoa(os.Geteuid()))
}

// mpsLock takes the lock of one MPS daemon per allocation: MPSLockDir(base)
// made if need be, and taken only when it is a folder (not a link) of this
// user's that no one else may write; the lock file in it opened without
// following a link or blocking, and only when it is a regular file.
func mpsLock(base string) (*os.File, error) {
	dir := MPSLockDir(base)
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("its lock: %w", err)
	}
	d, err := os.OpenFile(dir, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			return nil, fmt.Errorf("its lock: %s: not a folder (a symbolic link is not followed)", dir)
		}
		return nil, fmt.Errorf("its lock: %w", err)
	}
	defer d.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(d.Fd()), &st); err != nil {
		return nil, fmt.Errorf("its lock: %s: %w", dir, err)
	}
	if int(st.Uid) != os.Geteuid() || st.Mode&0o022 != 0 {
		return nil, fmt.Errorf("its lock: %s: not a folder of this user's that only this user may write", dir)
	}
	path := filepath.Join(dir, mpsLockName)
	fd, err := unix.Openat(int(d.Fd()), mpsLockName, unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0o600)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil, fmt.Errorf("its lock: %s: a symbolic link, not followed", path)
		}
		return nil, fmt.Errorf("its lock: %s: %w", path, err)
	}
	lock := os.NewFile(uintptr(fd), path)
	if st, err := lock.Stat(); err != nil || !st.Mode().IsRegular() {
		lock.Close()
		return nil, fmt.Errorf("its lock: %s: not a regular file", path)
	}
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		lock.Close()
		return nil, fmt.Errorf("another nodepack of this allocation runs its MPS daemon (its lock: %s)", path)
	}
	return lock, nil
}

// fileTail is the last line of the file at path (at most its last 4 KiB),
// trimmed; "" when it cannot be read.
func fileTail(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	var b [4096]byte
	st, err := f.Stat()
	if err != nil {
		return ""
	}
	n, _ := f.ReadAt(b[:], max(st.Size()-int64(len(b)), 0))
	s := strings.TrimSpace(string(bytes.ToValidUTF8(b[:n], nil)))
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}

// exitText says how a process ended, as os.ProcessState does.
func exitText(x proc.Exit) string {
	if x.Signal != "" {
		return "killed by " + x.Signal
	}
	return "exit status " + strconv.Itoa(x.Code)
}
