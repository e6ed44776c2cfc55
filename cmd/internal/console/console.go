// Package console carries a program's own output to a terminal, a pipe
// or a file without ever holding up the program: writes go to a queue in
// memory that a goroutine empties, so that a pipe nobody reads, a slow
// terminal or a reader that went away (head -3) never blocks the caller.
// When the queue is full or the writer has failed, writes are dropped and
// counted.
package console

import (
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// Writer is a console: nodepack's own output never blocks a run's start,
// the ledger or the handling of a signal on it; what it drops, the ledger
// and the runs' own logs still record. Its methods may be called
// concurrently.
type Writer struct {
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

// New returns a Writer that writes to w, on a goroutine of its own.
func New(w io.Writer) *Writer {
	c := &Writer{w: w, queue: make(chan []byte, consoleQueue), done: make(chan struct{})}
	go c.drain()
	return c
}

func (c *Writer) drain() {
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
func (c *Writer) Write(p []byte) (int, error) {
	c.WriteOwned(append([]byte(nil), p...))
	return len(p), nil
}

// WriteOwned is Write for a p the caller hands over: queued, not copied.
func (c *Writer) WriteOwned(p []byte) {
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

// Close writes out what is queued, waiting at most wait for a reader, and
// returns how many writes were dropped. Writes after it are dropped.
func (c *Writer) Close(wait time.Duration) int64 {
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

// Underlying returns the writer c writes to.
func (c *Writer) Underlying() io.Writer { return c.w }
