package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/nodepack/nodepack/cmd/internal/console"
	"github.com/nodepack/nodepack/runner/escape"
	"github.com/nodepack/nodepack/runner/run"
	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progress reports runs as they finish: a live bar when stderr is a
// terminal, otherwise one plain line per finished attempt (what an sbatch
// log wants). Failures are always printed as lines.
type progress struct {
	w        io.Writer
	total    int // -1 when unknown (standard input)
	quiet    bool
	bar      *progressbar.ProgressBar // nil in plain mode
	mu       sync.Mutex               // serialises bar redraws with --live output
	finished int
}

// newProgress reports on a sweep of total runs of which done were
// finished before (a resumed sweep skips them), so the count ends at
// total/total.
func newProgress(w io.Writer, total, done int, quiet bool) *progress {
	p := &progress{w: w, total: total, quiet: quiet, finished: done}
	if f, ok := terminalOf(w); ok && term.IsTerminal(int(f.Fd())) && !quiet {
		p.bar = progressbar.NewOptions(total,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription("runs"),
			progressbar.OptionShowCount(),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionClearOnFinish(),
		)
		p.bar.Add(done)
	}
	return p
}

// terminalOf finds the file behind nodepack's console, to ask whether it
// is a terminal.
func terminalOf(w io.Writer) (*os.File, bool) {
	for {
		u, ok := w.(interface{ Underlying() io.Writer }) // a console.Writer, a pipeOut
		if !ok {
			break
		}
		w = u.Underlying()
	}
	f, ok := w.(*os.File)
	return f, ok
}

// event is the runner's OnEvent; the runner never calls it concurrently.
func (p *progress) event(ev run.Event) {
	if ev.Kind != run.Finished {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	counts := !ev.Retry && !ev.Promoted // a promotion's run was counted when it paused
	if counts {
		p.finished++
	}
	failed := ev.Reason != run.OK && !ev.Reason.JudgedOut()
	if p.bar != nil {
		if failed {
			p.bar.Clear()
			fmt.Fprintln(p.w, p.line(ev))
		}
		if counts {
			p.bar.Add(1)
		}
		return
	}
	if failed || !p.quiet {
		fmt.Fprintln(p.w, p.line(ev))
	}
}

// line describes one finished attempt, e.g.
// "nodepack: [3/100] ok 1a2b3c4d5e6f exit 0 0.21s lane 1 tasks.txt:3".
func (p *progress) line(ev run.Event) string {
	count := fmt.Sprintf("%d/%d", p.finished, p.total)
	if p.total < 0 {
		count = fmt.Sprint(p.finished)
	}
	state := string(ev.Reason)
	if ev.Class != "" {
		state = string(ev.Class) // why it failed
	}
	if ev.Retry {
		state += ", will retry"
	}
	s := fmt.Sprintf("nodepack: [%s] %s %s exit %d %v lane %d", count, state, termSafe(ev.Run.ID), ev.ExitCode,
		ev.End.Sub(ev.Start).Round(10*time.Millisecond), ev.Lane)
	if ev.Attempt > 1 {
		s += fmt.Sprintf(" attempt %d", ev.Attempt)
	}
	if ev.Run.Origin != "" {
		s += " " + termSafe(ev.Run.Origin)
	}
	if ev.Reason != run.OK && !ev.Reason.JudgedOut() && ev.Stderr != "" {
		s += " log " + termSafe(ev.Stderr) // where to look: a pruned run did nothing wrong
	}
	switch n := len(ev.StderrTail); {
	case n > 0 && ev.Reason != run.Interrupted:
		s += ": " + termSafe(ev.StderrTail[n-1])
	case ev.Err != nil:
		s += ": " + termSafe(ev.Err.Error()) // nodepack's own reason: setup, a full disk
	}
	return s
}

// live writes --live output to w; the bar is cleared first so lines do not
// tangle with it.
func (p *progress) live(w io.Writer, b []byte) (int, error) {
	// One line of a run's output: shown, not acted on by the terminal;
	// escaped in one pass when it needs it (megabytes of control bytes).
	line, own := b, false
	if text := bytes.TrimSuffix(b, []byte("\n")); !escape.Clean(text) {
		line = append(escape.Append(make([]byte, 0, escape.Len(text)+1), string(text), false), '\n')
		own = true
	}
	if p.bar != nil {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.bar.Clear()
	}
	if c, ok := w.(*console.Writer); ok && own {
		c.WriteOwned(line) // made here: queued as it is, not copied again
		return len(b), nil
	}
	if _, err := w.Write(line); err != nil {
		return 0, err
	}
	return len(b), nil
}

// failuresOnly reports whether the lines printed as runs ended were
// those of failures only (-q, or a progress bar for the rest).
func (p *progress) failuresOnly() bool { return p != nil && (p.quiet || p.bar != nil) }

func (p *progress) finish() {
	if p.bar != nil {
		p.bar.Finish()
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }
