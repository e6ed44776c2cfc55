//go:build !linux

package proc

import (
	"os/exec"
	"sync"
	"syscall"

	"github.com/nodepack/nodepack/runner/run"
)

// On systems other than Linux a process gets no CPU affinity, no process
// group, no supervisor and no sweeping: only it is signalled.

// Setup does nothing here.
func Setup() error { return nil }

// Session is "": without a supervisor no one looks for it.
func Session() string { return "" }

// Supervised is false: there is no supervisor here.
func Supervised() bool { return false }

func applyKnobs() {}

// Process is one started process.
type Process struct {
	cmd      *exec.Cmd
	pid      int
	exited   chan struct{} // closed once Wait has returned
	waitErr  error
	stopOnce sync.Once
}

// Launch starts s.Cmd; see the Linux documentation.
func Launch(s Spec) (*Process, error) {
	cmd := s.Cmd
	if err := cmd.Start(); err != nil {
		return nil, &StartError{err}
	}
	p := &Process{cmd: cmd, pid: cmd.Process.Pid, exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// LaunchHelper starts a helper process of the program's own.
func LaunchHelper(cmd *exec.Cmd) (*Process, error) { return Launch(Spec{Cmd: cmd}) }

// Signal signals the process; once Wait has reaped it, os.Process sends
// nothing.
func (p *Process) Signal(sig syscall.Signal) { p.cmd.Process.Signal(sig) }

// Wait waits for the process to exit and says how it ended.
func (p *Process) Wait() Exit {
	<-p.exited
	u := run.Usage{}
	if ps := p.cmd.ProcessState; ps != nil {
		u.CPU = ps.UserTime() + ps.SystemTime()
	}
	return Exit{Code: exitCode(p.cmd.ProcessState), Usage: u, Err: p.waitErr}
}

// SweepAll does nothing here.
func SweepAll() {}
