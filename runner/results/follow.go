package results

// Follow follows the logs of a sweep's runs, as tail -f would follow the
// right files: each line of a run's stdout and stderr, prefixed with where
// the run came from (tasks.txt:12, or its id), from the last lines
// already written until the runs end.

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nodepack/nodepack/runner/ledger"
	"github.com/nodepack/nodepack/runner/untrusted"
)

// FollowOptions says which runs to follow and how. The zero FollowOptions follows
// the running runs, from their last 10 lines.
type FollowOptions struct {
	// Runs names runs by id (or a prefix of one) or by origin
	// (tasks.txt:12); Failed adds the failed runs and Running the running
	// ones. With none of them, the running runs.
	Runs            []string
	Failed, Running bool
	// Lines is how many of the lines already written to show first; 0
	// means 10, a negative value none.
	Lines int
	// Poll is how often the files are read for more; 0 means 200 ms.
	Poll time.Duration
	// Line, if set, rewrites each line written (its prefix and text,
	// without the newline): the place to escape what a terminal would
	// act on. Nil writes the runs' bytes as they are.
	Line func(line string) string
}

// Follow writes the chosen runs' log lines to w until every one of them
// has ended (a run that ended already shows its last lines and is done)
// or ctx is done. A name that matches no run, or more than one, is an
// error, before anything is written.
func Follow(ctx context.Context, dir string, opts FollowOptions, w io.Writer) error {
	if opts.Lines == 0 {
		opts.Lines = 10
	}
	if opts.Poll <= 0 {
		opts.Poll = 200 * time.Millisecond
	}
	table, err := Read(dir, nil)
	if err != nil {
		return err // it names dir, or the ledger and line
	}
	runs, err := choose(table.Rows, opts)
	if err != nil {
		return err
	}
	var files []*followed
	for _, r := range runs {
		label := "[" + cmp.Or(r.Origin, r.ID) + "] "
		for _, p := range []string{r.Stdout, r.Stderr} {
			if p == "" {
				continue
			}
			f := &followed{root: dir, rel: p, prefix: label, line: opts.Line}
			f.start(opts.Lines)
			files = append(files, f)
		}
	}
	defer func() {
		for _, f := range files {
			f.close()
		}
	}()
	running := map[string]bool{}
	for _, r := range runs {
		if r.State == ledger.StateRunning {
			running[r.ID] = true
		}
	}
	lastCheck := time.Now()
	for {
		for _, f := range files {
			if err := f.copy(w); err != nil {
				return err // an os error: it says what and where
			}
		}
		if len(running) == 0 {
			for _, f := range files {
				f.flush(w) // a last line without a newline
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(opts.Poll):
		}
		if time.Since(lastCheck) >= time.Second {
			lastCheck = time.Now()
			st, err := ReadStatus(dir, lastCheck)
			if err != nil {
				return err // it names dir, or the ledger and line
			}
			still := map[string]bool{}
			for _, r := range st.Running {
				if running[r.ID] {
					still[r.ID] = true
				}
			}
			running = still
		}
	}
}

// choose picks the rows opts names.
func choose(rows []Row, opts FollowOptions) ([]Row, error) {
	var out []Row
	add := func(r Row) {
		if !slices.ContainsFunc(out, func(o Row) bool { return o.ID == r.ID }) {
			out = append(out, r)
		}
	}
	for _, name := range opts.Runs {
		var match []Row
		for _, r := range rows {
			if r.Origin == name || strings.HasPrefix(r.ID, name) || filepath.Base(r.Origin) == name {
				match = append(match, r)
			}
		}
		switch len(match) {
		case 0:
			return nil, fmt.Errorf("no run %q in this sweep (give an id, a prefix of one, or an origin such as tasks.txt:12)", name)
		case 1:
			add(match[0])
		default:
			return nil, fmt.Errorf("%q names %d runs: give more of the id", name, len(match))
		}
	}
	running := opts.Running || len(opts.Runs) == 0 && !opts.Failed
	for _, r := range rows {
		if opts.Failed && r.State == ledger.StateFailed || running && r.State == ledger.StateRunning {
			add(r)
		}
	}
	if len(out) == 0 {
		var what []string
		if running {
			what = append(what, "running")
		}
		if opts.Failed {
			what = append(what, "failed")
		}
		return nil, fmt.Errorf("no %s runs in this sweep (name a run to see its last lines)", strings.Join(what, " or "))
	}
	return out, nil
}

// followed is one log file being followed: rel below the output
// directory root, opened as package untrusted opens a run's file (a
// regular file, no link followed, never a blocking open).
type followed struct {
	root, rel string
	prefix    string
	f         *os.File
	off       int64
	partial   []byte // the start of a line whose end is not written yet
	first     []byte // the last lines already written, shown first
	buf       []byte
	line      func(string) string // FollowOptions.Line
}

// start opens the file and keeps its last n lines (none if n < 0); a file
// not made yet is opened once it is.
func (f *followed) start(n int) {
	file, err := untrusted.Open(f.root, f.rel)
	if err != nil {
		return
	}
	f.f = file
	st, err := file.Stat()
	if err != nil {
		return
	}
	size := st.Size()
	if n < 0 {
		f.off = size
		return
	}
	// Read back from the end, 64 KiB at most: enough for the lines shown.
	from := max(size-64<<10, 0)
	buf := make([]byte, size-from)
	if _, err := file.ReadAt(buf, from); err != nil && !errors.Is(err, io.EOF) {
		return
	}
	end := bytes.LastIndexByte(buf, '\n') + 1 // whole lines only
	first := lastLines(buf[:end], n)
	if first == 0 && from > 0 {
		first = min(bytes.IndexByte(buf, '\n')+1, end) // a line cut by the 64 KiB
	}
	f.first = buf[first:end]
	f.off = from + int64(end)
}

// lastLines returns where the last n lines of b (whole lines) start.
func lastLines(b []byte, n int) int {
	i := len(b)
	for range n {
		if i == 0 {
			return 0
		}
		j := bytes.LastIndexByte(b[:i-1], '\n')
		i = j + 1
	}
	return i
}

// copyBudget is the most bytes one copy writes: a log that grows faster
// is followed as fast as that, and the other runs' logs get their turn.
const copyBudget = 4 << 20

// maxPartial is the longest line kept waiting for its end: a longer one
// is written cut there.
const maxPartial = 64 << 10

// copy writes the lines written to the file since the last call, at most
// copyBudget bytes of them.
func (f *followed) copy(w io.Writer) error {
	if f.f == nil {
		file, err := untrusted.Open(f.root, f.rel)
		if err != nil {
			return nil // not made yet (or refused: a link, a FIFO)
		}
		f.f = file
	}
	if f.first != nil {
		if err := f.write(w, f.first); err != nil {
			return err
		}
		f.first = nil
	}
	if f.buf == nil {
		f.buf = make([]byte, 64<<10)
	}
	for done := 0; done < copyBudget; {
		n, err := f.f.ReadAt(f.buf, f.off)
		if n > 0 {
			f.off += int64(n)
			done += n
			if err := f.write(w, f.buf[:n]); err != nil {
				return err
			}
		}
		if n < len(f.buf) || err != nil {
			return nil
		}
	}
	return nil
}

// write writes the complete lines of b, each with the prefix, and keeps
// an incomplete last line for later.
func (f *followed) write(w io.Writer, b []byte) error {
	data := append(f.partial, b...)
	var out bytes.Buffer
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		if f.line != nil {
			out.WriteString(f.line(f.prefix + string(data[:i])))
			out.WriteByte('\n')
		} else {
			out.WriteString(f.prefix)
			out.Write(data[:i+1])
		}
		data = data[i+1:]
	}
	f.partial = append([]byte(nil), data...)
	_, err := w.Write(out.Bytes())
	if err == nil && len(f.partial) > maxPartial {
		err = f.write(w, []byte("\n")) // a line without an end, cut
	}
	return err
}

// flush writes an incomplete last line, once the run has ended.
func (f *followed) flush(w io.Writer) {
	if len(f.partial) > 0 {
		line := f.prefix + string(f.partial)
		if f.line != nil {
			line = f.line(line)
		}
		fmt.Fprintln(w, line)
		f.partial = nil
	}
}

func (f *followed) close() {
	if f.f != nil {
		f.f.Close()
	}
}
