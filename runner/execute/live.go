package execute

import (
	"bytes"
	"io"
	"sync"
)

// maxLiveLine is where a line without a newline is cut for the Live writer.
const maxLiveLine = 64 << 10

// liveWriter serialises whole lines from all runs onto one writer.
type liveWriter struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte
}

func (l *liveWriter) writeLine(prefix, partial, rest []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf[:0], prefix...)
	l.buf = append(l.buf, partial...)
	l.buf = append(l.buf, rest...)
	if len(l.buf) == 0 || l.buf[len(l.buf)-1] != '\n' {
		l.buf = append(l.buf, '\n')
	}
	l.w.Write(l.buf) // a broken console must not fail the run
}

// lineWriter is one stream of one attempt: it copies bytes to the log file
// (if any) unchanged and hands complete, prefixed lines to the live writer.
// os/exec calls Write from a single goroutine per stream.
type lineWriter struct {
	file    io.Writer // nil without OutputDir
	live    *liveWriter
	prefix  []byte
	pending []byte // start of a line not yet ended
}

func (w *lineWriter) Write(p []byte) (int, error) {
	if w.file != nil {
		if n, err := w.file.Write(p); err != nil {
			return n, err
		}
	}
	rest := p
	for len(rest) > 0 {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			w.pending = append(w.pending, rest...)
			if len(w.pending) >= maxLiveLine {
				w.flush()
			}
			break
		}
		w.live.writeLine(w.prefix, w.pending, rest[:i+1])
		w.pending = w.pending[:0]
		rest = rest[i+1:]
	}
	return len(p), nil
}

// flush writes a final line that had no newline.
func (w *lineWriter) flush() {
	if len(w.pending) > 0 {
		w.live.writeLine(w.prefix, w.pending, nil)
		w.pending = w.pending[:0]
	}
}
