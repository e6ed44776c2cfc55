package ledger

import (
	"encoding/json"
	"fmt"
	"sync"
	"time"
)

// commitInterval is the least time between two group commits of a
// Writer: records posted meanwhile wait and go together. It bounds how
// long a finished run waits to be durable, and so to be reported: at most
// commitInterval plus one write and fsync. A record after a quiet spell
// is committed at once.
const commitInterval = 10 * time.Millisecond

// committer is a Writer's group commit: a queue of records and the one
// goroutine, started when records arrive and gone when none wait, that
// writes them. The zero value is ready.
type committer struct {
	mu      sync.Mutex
	queue   []queued
	spare   []queued
	running bool
	hurry   bool          // a post wants its commit now
	nudge   chan struct{} // tells a waiting committer about a hurry
	idle    *sync.Cond    // broadcast when the committer stops
	last    time.Time     // the last commit
}

type queued struct {
	rec  any // a record; nil for a Flush
	sync bool
	done func(error)
}

// post queues rec (nil: only a commit point); fsync asks the commit to
// sync the file, now to skip the wait for commitInterval.
func (c *committer) post(l *Writer, rec any, fsync, now bool, done func(error)) {
	// The record is encoded by the committer, not here: a run's slot is
	// given to the next run once its end is posted.
	q := queued{rec: rec, sync: fsync, done: done}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.nudge == nil {
		c.nudge = make(chan struct{}, 1)
		c.idle = sync.NewCond(&c.mu)
	}
	c.queue = append(c.queue, q)
	if now && !c.hurry {
		c.hurry = true
		select {
		case c.nudge <- struct{}{}:
		default:
		}
	}
	if !c.running {
		c.running = true
		go c.run(l)
	}
}

// wait returns once the committer has stopped: everything posted before
// was committed and told.
func (c *committer) wait(l *Writer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.running {
		c.idle.Wait()
	}
}

// run commits until the queue is empty.
func (c *committer) run(l *Writer) {
	var timer *time.Timer
	for {
		c.mu.Lock()
		if len(c.queue) == 0 {
			c.running = false
			c.idle.Broadcast()
			c.mu.Unlock()
			return
		}
		if wait := time.Until(c.last.Add(commitInterval)); !c.hurry && wait > 0 {
			c.mu.Unlock()
			if timer == nil {
				timer = time.NewTimer(wait)
			} else {
				timer.Reset(wait)
			}
			select {
			case <-timer.C:
			case <-c.nudge:
				timer.Stop()
			}
			continue
		}
		batch := c.queue
		c.queue, c.spare = c.spare[:0], nil
		c.hurry = false
		select {
		case <-c.nudge: // a hurry this batch takes care of
		default:
		}
		c.mu.Unlock()

		l.buf = l.buf[:0]
		fsync := false
		encodeErr := make([]error, len(batch)) // by position; nil for most
		for i, q := range batch {
			if q.rec == nil {
				continue
			}
			line, err := json.Marshal(q.rec)
			if err != nil {
				// A record nodepack cannot write is lost from the ledger:
				// never silently, so the sweep stops starting runs too.
				encodeErr[i] = fmt.Errorf("ledger %s: %s: %w", l.path, recordName(q.rec), err)
				l.mu.Lock()
				if l.problem == nil {
					l.problem = encodeErr[i]
				}
				l.mu.Unlock()
				continue
			}
			l.buf = append(append(l.buf, line...), '\n')
			fsync = fsync || q.sync
		}
		err := l.commit(l.buf, fsync)
		c.last = time.Now()
		for i, q := range batch {
			if q.done != nil {
				switch {
				case encodeErr[i] != nil:
					q.done(encodeErr[i])
				default:
					q.done(err)
				}
			}
			batch[i] = queued{}
		}
		c.mu.Lock()
		c.spare = batch[:0]
		c.mu.Unlock()
	}
}
