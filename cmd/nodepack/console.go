package main

import (
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nodepack/nodepack/runner/escape"
)

// console carries nodepack's own output to a terminal, a pipe or a file
// without ever holding up the sweep: writes go to a queue in memory that a
// goroutine empties, so a pipe nobody reads, a slow terminal or a reader
// that went away (head -3) never blocks a run's start, the ledger or the
// handling of a signal. When the queue is full or the writer has failed,
// chunks are dropped and counted; the ledger and the runs' own logs stay
// the record of what happened.
type console struct {
	w       io.Writer
	queue   chan []byte
	done    chan struct{}
	dropped atomic.Int64
	failed  atomic.Bool
	mu      sync.Mutex // makes Write and close safe to call concurrently
	closed  bool
}

// consoleQueue is how many writes wait at most: a few megabytes of lines.
const consoleQueue = 1 << 14

func newConsole(w io.Writer) *console {
	c := &console{w: w, queue: make(chan []byte, consoleQueue), done: make(chan struct{})}
	go c.drain()
	return c
}

func (c *console) drain() {
	defer close(c.done)
	for b := range c.queue {
		if c.failed.Load() {
			c.dropped.Add(1)
			continue
		}
		if _, err := c.w.Write(b); err != nil {
			c.failed.Store(true) // EPIPE: the reader is gone
			c.dropped.Add(1)
		}
	}
}

// Write queues a copy of p and never blocks; it always reports success,
// since a console that cannot keep up must not fail the sweep.
func (c *console) Write(p []byte) (int, error) {
	c.queueOwned(append([]byte(nil), p...))
	return len(p), nil
}

// queueOwned is Write for a p the caller hands over: queued, not copied.
func (c *console) queueOwned(p []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		c.dropped.Add(1)
		return
	}
	select {
	case c.queue <- p:
	default:
		c.dropped.Add(1)
	}
}

// close writes out what is queued, waiting at most wait for a reader, and
// returns how many writes were dropped.
func (c *console) close(wait time.Duration) int64 {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		close(c.queue)
	}
	c.mu.Unlock()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-c.done:
	case <-t.C:
	}
	return c.dropped.Load()
}

// termSafe is escape.Term: how nodepack prints text that came from runs
// or inputs.
func termSafe(s string) string { return escape.Term(s) }
