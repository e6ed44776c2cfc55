package nodepack

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/nodepack/nodepack/runner"
	"golang.org/x/sys/unix"
)

// StopSignals are the signals that stop a sweep: scancel and a walltime
// (SIGTERM), Ctrl-C, a closed terminal or ssh session (SIGHUP), and the
// early warnings of sbatch --signal and Grid Engine's -notify (SIGUSR1,
// SIGUSR2).
var StopSignals = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2}

// NotifyStop returns a copy of parent that the first of StopSignals
// cancels, with a runner.Interrupt as its cause: a sweep started with it
// sends every run SIGTERM, then SIGKILL after its grace, and ends
// interrupted. A warning before a time limit (SIGUSR1, SIGUSR2) asks for
// the job's requeue; a cancel (SIGTERM, SIGINT, SIGHUP) does not.
//
// onSignal, if not nil, is called with every stop signal that arrives and
// how many came before it: for the first, before the context is
// cancelled (what runs are running then all get SIGTERM). A program kills
// the sweep on a second SIGINT there (runner.Session.Kill). stop stops
// the notification and releases the context.
func NotifyStop(parent context.Context, onSignal func(sig syscall.Signal, before int)) (ctx context.Context, stop func()) {
	ch := make(chan os.Signal, 4)
	signal.Notify(ch, StopSignals...)
	ctx, stopped := notifyStop(parent, ch, onSignal)
	return ctx, func() { signal.Stop(ch); stopped() }
}

func notifyStop(parent context.Context, ch <-chan os.Signal, onSignal func(syscall.Signal, int)) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	done := make(chan struct{})
	go func() {
		for n := 0; ; n++ {
			select {
			case got := <-ch:
				sig := got.(syscall.Signal)
				if onSignal != nil {
					onSignal(sig, n)
				}
				if n == 0 {
					cancel(runner.Interrupt{Reason: unix.SignalName(sig), Requeue: sig == syscall.SIGUSR1 || sig == syscall.SIGUSR2})
				}
			case <-done:
				return
			}
		}
	}()
	return ctx, func() { close(done); cancel(nil) }
}
