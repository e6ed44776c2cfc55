package sweep

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"iter"
	"strconv"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/runner/run"
)

// utf8BOM is the byte order mark some editors put at the start of a UTF-8
// file; it is not part of the first line.
var utf8BOM = []byte("\xef\xbb\xbf")

// maxLineBytes is the longest task-file line readTaskFile accepts: the
// kernel's limit on one execve argument (MAX_ARG_STRLEN, 128 KiB with its
// terminating NUL). A longer command could never start, so it is an input
// error; such a command belongs in a script.
const maxLineBytes = 128<<10 - 1

// readTaskFile returns the runs of a task file: one shell command per line,
// run as ["bash", "-c", line]. Blank lines and lines whose first non-blank
// character is '#' are skipped; a trailing "\r" and a UTF-8 byte order mark
// at the start of the file are dropped. name is used in
// Origin ("name:line") and in errors.
//
// A line "#nodepack REQUEST" ([directivePrefix]) gives the lines after it,
// until the next such line, the request REQUEST as [pack.ParseRequest]
// reads it over base ("#nodepack gpus=2 cpus=16"; keys it does not name
// keep base's): their Run.Request. "#nodepack" alone goes back to none,
// so that the runner's default applies. A directive that does not parse
// is an error naming its line.
//
// Each run's ID is the first 12 hex digits of the SHA-256 of its argv, so it
// stays the same when other lines are added or removed; the k-th repeat of an
// identical line (k ≥ 2) gets "-k" appended, as does a line whose short hash
// collides with an earlier one. IDs are unique within the file. Counting
// repeats costs a few tens of bytes of memory per distinct line.
//
// Bytes are passed to bash as they are: invalid UTF-8 is accepted, since file
// names in a command need not be UTF-8. A line longer than [maxLineBytes],
// containing a NUL byte or starting with - or + (which bash -c would take
// for an option of its own), or a read error, ends the sequence with an
// error that names the file and line. The reader is consumed lazily, one line per run.
func readTaskFile(r io.Reader, name string, base pack.Request) iter.Seq2[run.Run, error] {
	return func(yield func(run.Run, error) bool) {
		var ids idSet
		index := 0
		err := taskLines(r, name, base, 0, func(l *taskLine) bool {
			args := l.args()
			run := run.Run{
				ID:      ids.next(args),
				Index:   index,
				Args:    args,
				Origin:  l.origin(),
				Name:    l.name(),
				Request: l.request,
			}
			index++
			return yield(run, nil)
		})
		if err != nil {
			yield(run.Run{}, err)
		}
	}
}

// expandTasks is expand(readTaskFile(r, name, base), opts) without the
// runs in between: a line's origin and name are made only for the runs
// that are yielded, so that a resume skips a million lines it ran before
// in a fraction of the time.
func expandTasks(r io.Reader, name string, base pack.Request, opts expandOptions) iter.Seq2[run.Run, error] {
	return func(yield func(run.Run, error) bool) {
		x := newExpander(opts)
		err := taskLines(r, name, base, opts.GPUMemory, func(l *taskLine) bool {
			e := entry{plain: l.args(), request: l.request, describe: l}
			return x.expand(&e, yield)
		})
		if err != nil {
			yield(run.Run{}, err)
		}
	}
}

// taskLine is one command of a task file, as taskLines reads it.
type taskLine struct {
	file    string
	no      int    // line number
	text    []byte // the command as bash gets it; valid until the next line
	request *pack.Request
}

func (l *taskLine) args() []string { return []string{"bash", "-c", string(l.text)} }

func (l *taskLine) origin() string { return l.file + ":" + strconv.Itoa(l.no) }

func (l *taskLine) name() string {
	return run.SafeName(string(bytes.TrimSpace(l.text)), run.MaxNameBytes)
}

// taskLines calls f with every command of a task file, as readTaskFile
// describes them, until f returns false; it returns the error that ends
// the file early, naming its line.
func taskLines(r io.Reader, name string, base pack.Request, gpuMemory uint64, f func(l *taskLine) bool) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLineBytes+2) // room for "\r\n"
	l := taskLine{file: name}
	for sc.Scan() {
		l.no++
		text := sc.Bytes()
		if l.no == 1 {
			text = bytes.TrimPrefix(text, utf8BOM) // Windows editors start files with one
		}
		trimmed := bytes.TrimSpace(text)
		if len(trimmed) > 0 && trimmed[0] == '#' {
			r, ok, err := directive(trimmed, base, gpuMemory)
			if err != nil {
				return fmt.Errorf("%s:%d: %w", name, l.no, err)
			}
			if ok {
				l.request = r
			}
			continue
		}
		if len(trimmed) == 0 {
			continue
		}
		if len(text) > maxLineBytes {
			return fmt.Errorf("%s:%d: line is longer than %d bytes", name, l.no, maxLineBytes)
		}
		if bytes.IndexByte(text, 0) >= 0 {
			return fmt.Errorf("%s:%d: line contains a NUL byte", name, l.no)
		}
		if text[0] == '-' || text[0] == '+' {
			// bash -c "--version" prints bash's version and exits 0: a
			// run that says it succeeded without running anything.
			return fmt.Errorf("%s:%d: the line starts with %q: bash -c would read it as an option of its own (a blank before it makes it a command)", name, l.no, text[0])
		}
		l.text = text
		if !f(&l) {
			return nil
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			err = fmt.Errorf("line is longer than %d bytes", maxLineBytes)
		}
		return fmt.Errorf("%s:%d: %w", name, l.no+1, err)
	}
	return nil
}
