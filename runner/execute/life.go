package execute

import "sync"

// life is where a sweep stands, as channels its goroutines select on: each
// is closed once, and never opened again.
type life struct {
	stop      chan struct{} // closed when no run may start any more
	kill      chan struct{} // closed by Kill
	terminate chan struct{} // closed when the terminate deadline passes
	done      chan struct{} // closed once the scheduler and every run have returned

	haltOnce, killOnce, termOnce, doneOnce sync.Once
}

func newLife() *life {
	return &life{stop: make(chan struct{}), kill: make(chan struct{}), terminate: make(chan struct{}), done: make(chan struct{})}
}

// halt closes stop: no run may start any more.
func (l *life) halt() { l.haltOnce.Do(func() { close(l.stop) }) }

// killNow closes kill: every running process gets SIGKILL.
func (l *life) killNow() { l.killOnce.Do(func() { close(l.kill) }) }

// terminateNow closes terminate: every running process is stopped.
func (l *life) terminateNow() { l.termOnce.Do(func() { close(l.terminate) }) }

// end closes done.
func (l *life) end() { l.doneOnce.Do(func() { close(l.done) }) }

// closed reports whether c is closed.
func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
