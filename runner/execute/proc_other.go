//go:build !linux

package execute

import (
	"os/exec"
	"syscall"

	"github.com/nodepack/nodepack/runner/run"
)

// On systems other than Linux a run gets no CPU affinity, no process group
// no supervisor and no sweeping: only its leader process is signalled.

func setup() error { return nil }

// sessionToken is "": without a supervisor no one looks for it.
func sessionToken() string { return "" }

// process is one started attempt.
type process struct {
	cmd     *exec.Cmd
	pid     int
	child   int
	exited  chan struct{} // closed once Wait has returned
	waitErr error
}

func startProcess(cmd *exec.Cmd, cpus []int, group *memGroup, key attemptKey) (*process, error) {
	if err := cmd.Start(); err != nil {
		return nil, &startError{err}
	}
	p := &process{cmd: cmd, pid: cmd.Process.Pid, child: cmd.Process.Pid, exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// waitExit returns once the process has exited.
func (p *process) waitExit() { <-p.exited }

// signal signals the leader; once Wait has reaped it, os.Process sends
// nothing.
func (p *process) signal(sig syscall.Signal) { p.cmd.Process.Signal(sig) }

func (p *process) finish() exitInfo {
	<-p.exited
	u := run.Usage{}
	if ps := p.cmd.ProcessState; ps != nil {
		u.CPU = ps.UserTime() + ps.SystemTime()
	}
	return exitInfo{code: exitCode(p.cmd.ProcessState), usage: u, err: p.waitErr}
}

func sweepAll() {}

// keeperAttr is how a helper process of nodepack's own starts: in a
// process group of its own.
func keeperAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
