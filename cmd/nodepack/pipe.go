package main

import (
	"errors"
	"io"
	"sync"
	"syscall"
)

// pipeOut is nodepack's standard output, whose reader may go away
// (nodepack status DIR | head -1). Once a write fails with EPIPE the rest
// of the output is dropped, reported written, and gone is closed: the
// command goes on to its end and its own exit status, so that a script
// under set -o pipefail sees status's 0 or 1, not 141 by chance of when
// head exits; a command that follows (tail, status --watch) stops (see
// program).
type pipeOut struct {
	w    io.Writer
	gone chan struct{}
	once sync.Once
}

func newPipeOut(w io.Writer) *pipeOut { return &pipeOut{w: w, gone: make(chan struct{})} }

func (p *pipeOut) Write(b []byte) (int, error) {
	select {
	case <-p.gone:
		return len(b), nil
	default:
	}
	n, err := p.w.Write(b)
	if errors.Is(err, syscall.EPIPE) {
		p.once.Do(func() { close(p.gone) })
		return len(b), nil
	}
	return n, err
}

// Underlying is the writer behind it, to ask whether it is a terminal.
func (p *pipeOut) Underlying() io.Writer { return p.w }

// follows are the commands that go on until they are stopped, or until
// their reader goes away.
var follows = map[string]bool{"tail": true, "status": true}
