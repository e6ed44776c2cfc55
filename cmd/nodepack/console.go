package main

import (
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
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

// termSafe returns s as nodepack prints text that came from runs or inputs
// (a run's stderr, an origin, a file name): what a terminal would act on
// is shown instead of acted on. Control characters but tab (ESC, CR, a
// newline inside a value, BEL, DEL, C1) become \xNN or \u00NN, bytes
// that are not UTF-8 \xNN, and the Unicode controls that reorder or hide
// text (bidi overrides and isolates, line and paragraph separators) \uNNNN.
func termSafe(s string) string {
	if clean(s) {
		return s // the common case: no copy
	}
	var b strings.Builder
	writeEscaped(&b, s, false)
	return b.String()
}

// clean reports whether s has nothing termSafe escapes: printable ASCII
// and tabs (anything past ASCII is looked at closer by termSafe).
func clean[S ~string | ~[]byte](s S) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 && c != '\t' || c == 0x7f || c >= 0x80 {
			return false
		}
	}
	return true
}

// escapedLen is about how long s is escaped: four bytes for each ASCII
// control, six for each byte past ASCII (at most), so that the line is
// made in one allocation.
func escapedLen(s []byte) int {
	n := len(s)
	for _, c := range s {
		switch {
		case c < 0x20 && c != '\t', c == 0x7f:
			n += 3
		case c >= 0x80:
			n += 5
		}
	}
	return n
}

// writeEscaped writes s to b with what termSafe escapes escaped; with
// quoted, for the inside of bash's $'…' as well: backslashes and single
// quotes too, so that it pastes back as the same bytes.
func writeEscaped(b *strings.Builder, s string, quoted bool) {
	b.Write(appendEscaped(make([]byte, 0, len(s)+len(s)/4), s, quoted))
}

// appendEscaped appends s to dst as writeEscaped writes it. A run's control
// bytes by the megabyte (--live) cost a few appends each, no formatting.
func appendEscaped(dst []byte, s string, quoted bool) []byte {
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			switch {
			case c < 0x20 && c != '\t', c == 0x7f:
				dst = append(dst, '\\', 'x', hexDigits[c>>4], hexDigits[c&0xf])
			case quoted && (c == '\\' || c == '\''):
				dst = append(dst, '\\', c)
			default:
				dst = append(dst, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			dst = append(dst, '\\', 'x', hexDigits[s[i]>>4], hexDigits[s[i]&0xf])
		case r < 0xa0, hidesText(r):
			dst = append(dst, '\\', 'u', hexDigits[r>>12&0xf], hexDigits[r>>8&0xf], hexDigits[r>>4&0xf], hexDigits[r&0xf])
		default:
			dst = append(dst, s[i:i+n]...)
		}
		i += n
	}
	return dst
}

const hexDigits = "0123456789abcdef"

// hidesText reports whether r reorders or hides the text around it on a
// terminal: bidi marks, embeddings, overrides and isolates, and the line
// and paragraph separators.
func hidesText(r rune) bool {
	return r == 0x200e || r == 0x200f || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 || r == 0x2028 || r == 0x2029
}
