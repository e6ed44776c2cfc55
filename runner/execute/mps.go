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
// quit.
const mpsStartTimeout = 5 * time.Second

// mpsDaemon is the sweep's MPS control daemon: at most one per nodepack
// process, and, by a lock in the job's scratch, per allocation. It is
// started by the first run that shares a GPU and quit when the sweep
// ends; after a kill -9 of this process the supervisor kills it, and the
// MPS servers it started, with the runs: they carry the session in their
// environment. It is no run's, so the sweep for runs' leftovers leaves it.
type mpsDaemon struct {
	once      sync.Once
	path      string // the program
	pipe, log string // CUDA_MPS_PIPE_DIRECTORY, CUDA_MPS_LOG_DIRECTORY
	cmd       *exec.Cmd
	exited    chan struct{}
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
	// One daemon per allocation: the job's scratch holds the lock.
	base := cmp.Or(e.opts.TempDir, os.TempDir())
	lock, err := os.OpenFile(filepath.Join(base, "nodepack-mps.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("its lock: %w", err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		return errors.New("another nodepack of this allocation runs its MPS daemon")
	}
	d.lock, d.path = lock, path
	root := filepath.Join(e.scratch, "mps")
	d.pipe, d.log = filepath.Join(root, "pipe"), filepath.Join(root, "log")
	for _, dir := range []string{d.pipe, d.log} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			d.release()
			return err
		}
	}
	cmd := exec.Command(path, "-f")
	cmd.Env = append(os.Environ(), "CUDA_MPS_PIPE_DIRECTORY="+d.pipe, "CUDA_MPS_LOG_DIRECTORY="+d.log)
	if e.env.session != "" {
		cmd.Env = append(cmd.Env, sessionVar+"="+e.env.session)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out boundedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		d.release()
		return fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	d.cmd, d.exited = cmd, make(chan struct{})
	go func() { cmd.Wait(); close(d.exited) }()
	deadline := time.After(mpsStartTimeout)
	for {
		for _, name := range []string{"control", "nvidia-cuda-mps-control.pid"} {
			if _, err := os.Stat(filepath.Join(d.pipe, name)); err == nil {
				return nil
			}
		}
		select {
		case <-d.exited:
			d.release()
			return fmt.Errorf("%s exited at once: %s", filepath.Base(path), cmp.Or(out.tail(), cmd.ProcessState.String()))
		case <-deadline:
			d.kill()
			d.release()
			return fmt.Errorf("%s did not come up in %v", filepath.Base(path), mpsStartTimeout)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// stop quits the daemon, once every run has ended: "quit" on its control
// pipe, then SIGKILL to its group if it has not gone within the timeout.
func (d *mpsDaemon) stop() {
	if d.cmd == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), mpsStartTimeout)
	defer cancel()
	quit := exec.CommandContext(ctx, d.path)
	quit.Env = append(os.Environ(), "CUDA_MPS_PIPE_DIRECTORY="+d.pipe, "CUDA_MPS_LOG_DIRECTORY="+d.log)
	quit.Stdin = strings.NewReader("quit\n")
	quit.Run()
	select {
	case <-d.exited:
	case <-ctx.Done():
		d.kill()
	}
	d.release()
}

// kill sends SIGKILL to the daemon's group (its MPS servers too) and waits
// for it.
func (d *mpsDaemon) kill() {
	syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
	<-d.exited
}

// release lets another daemon of this allocation start.
func (d *mpsDaemon) release() {
	if d.lock != nil {
		d.lock.Close()
		d.lock = nil
	}
	d.cmd = nil
}

// boundedBuffer keeps the last few kilobytes written to it.
type boundedBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.b = append(b.b, p...)
	if len(b.b) > 4096 {
		b.b = b.b[len(b.b)-4096:]
	}
	return len(p), nil
}

// tail is the last line written, trimmed.
func (b *boundedBuffer) tail() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := strings.TrimSpace(string(bytes.ToValidUTF8(b.b, nil)))
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}
