package console

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

// TestWritesInOrder: what is written comes out in order, and Close waits
// for it.
func TestWritesInOrder(t *testing.T) {
	var out bytes.Buffer
	c := New(&out)
	for _, s := range []string{"a\n", "b\n", "c\n"} {
		c.Write([]byte(s))
	}
	if dropped := c.Close(time.Minute); dropped != 0 || out.String() != "a\nb\nc\n" {
		t.Errorf("wrote %q, dropped %d; want a, b, c and none", out.String(), dropped)
	}
	if n, err := c.Write([]byte("late\n")); n != 5 || err != nil || c.Close(0) != 1 {
		t.Errorf("a write after Close: %d, %v; want it reported done and dropped", n, err)
	}
}

// TestNeverBlocks: a reader that never reads holds up no write, and what
// did not fit is counted as dropped.
func TestNeverBlocks(t *testing.T) {
	r, w := io.Pipe()
	defer r.Close()
	c := New(w)
	line := []byte(strings.Repeat("x", 100) + "\n")
	for range 2 * consoleQueue {
		c.Write(line) // would block on the pipe at once, were it not queued
	}
	if dropped := c.Close(10 * time.Millisecond); dropped < consoleQueue-1 {
		t.Errorf("dropped %d of %d writes to a reader that never reads; want at least %d", dropped, 2*consoleQueue, consoleQueue-1)
	}
}

// failing is a writer whose reader went away.
type failing struct{ n int }

func (f *failing) Write(p []byte) (int, error) { f.n++; return 0, errors.New("broken pipe") }

// TestStopsAtAFailedWriter: after the writer fails, nothing more is
// written to it, and all of it is counted as dropped.
func TestStopsAtAFailedWriter(t *testing.T) {
	f := &failing{}
	c := New(f)
	for range 5 {
		c.Write([]byte("x\n"))
	}
	if dropped := c.Close(time.Minute); dropped != 5 || f.n != 1 {
		t.Errorf("dropped %d, wrote %d times; want 5 dropped and one try", dropped, f.n)
	}
}
