package sweep

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"slices"
	"strconv"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/runner/metrics"
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
// A line "#nodepack params OBJECT" gives the next command, and only it,
// parameters, as a params file's line gives its run ("#nodepack params
// {"model": "convnet", "lr": 0.1}"): its Run.Params, and a Name made of
// them. They label the run for the results table and the report (a
// launcher that writes the command lines itself knows each one's
// configuration); they change neither its command nor its ID. Two such
// lines for one command, one that no command follows, or an object that
// does not parse (as a params file's line) is an error naming its line.
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
				ID:      ids.nextKey(args, nil, 0),
				Index:   index,
				Args:    args,
				Origin:  l.origin(),
				Name:    l.name(),
				Params:  l.params,
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
			if x.skipsNext() {
				return true // done before: no argv made
			}
			e := entry{plain: l.args(), request: l.request, describe: l, params: l.params}
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
	params  json.RawMessage // from a "#nodepack params" line before it; nil for none
	pairs   []string        // the params as key=value, for its name
}

func (l *taskLine) args() []string { return []string{"bash", "-c", string(l.text)} }

func (l *taskLine) origin() string { return l.file + ":" + strconv.Itoa(l.no) }

func (l *taskLine) name() string {
	if l.params != nil {
		return configName(l.pairs)
	}
	return run.SafeName(string(bytes.TrimSpace(l.text)), run.MaxNameBytes)
}

// paramsWord follows directivePrefix on a line that gives the next
// command its parameters.
const paramsWord = "params"

// paramsDirective reads a "#nodepack params OBJECT" line: ok is false for
// any other line. The error names the column in line.
func paramsDirective(line []byte) (params json.RawMessage, pairs []string, ok bool, err error) {
	rest, found := bytes.CutPrefix(line, []byte(directivePrefix))
	if !found || len(rest) == 0 || rest[0] != ' ' && rest[0] != '\t' {
		return nil, nil, false, nil
	}
	word := bytes.TrimLeft(rest, " \t")
	obj, found := bytes.CutPrefix(word, []byte(paramsWord))
	if !found || len(obj) > 0 && obj[0] != ' ' && obj[0] != '\t' && obj[0] != '{' {
		return nil, nil, false, nil
	}
	at := len(line) - len(obj) // obj's offset in line
	trimmed := bytes.TrimLeft(obj, " \t")
	at += len(obj) - len(trimmed)
	keys, vals, raws, err := parseParamsLine(trimmed)
	if err != nil {
		var ce *columnError
		if errors.As(err, &ce) {
			return nil, nil, true, &columnError{at + ce.col, directivePrefix + " " + paramsWord + ": " + ce.msg}
		}
		return nil, nil, true, fmt.Errorf("%s %s: %w", directivePrefix, paramsWord, err)
	}
	if i := slices.Index(keys, paramsRequestKey); i >= 0 {
		return nil, nil, true, fmt.Errorf("%s %s: %q: a task line's request goes on a %s line of its own", directivePrefix, paramsWord, paramsRequestKey, directivePrefix)
	}
	if len(keys) == 0 {
		return nil, nil, true, fmt.Errorf("%s %s: an empty object", directivePrefix, paramsWord)
	}
	pairs = make([]string, len(keys))
	for i, k := range keys {
		pairs[i] = k + "=" + vals[i]
	}
	return metrics.Object(keys, raws), pairs, true, nil
}

// taskLines calls f with every command of a task file, as readTaskFile
// describes them, until f returns false; it returns the error that ends
// the file early, naming its line.
func taskLines(r io.Reader, name string, base pack.Request, gpuMemory uint64, f func(l *taskLine) bool) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLineBytes+2) // room for "\r\n"
	l := taskLine{file: name}
	paramsAt := 0 // the line of params that wait for their command
	for sc.Scan() {
		l.no++
		text := sc.Bytes()
		if l.no == 1 {
			text = bytes.TrimPrefix(text, utf8BOM) // Windows editors start files with one
		}
		trimmed := bytes.TrimSpace(text)
		if len(trimmed) > 0 && trimmed[0] == '#' {
			params, pairs, ok, err := paramsDirective(trimmed)
			switch {
			case err != nil:
				var ce *columnError
				if errors.As(err, &ce) {
					return fmt.Errorf("%s:%d:%d: %s", name, l.no, ce.col+len(text)-len(bytes.TrimLeft(text, " \t")), ce.msg)
				}
				return fmt.Errorf("%s:%d: %w", name, l.no, err)
			case ok && paramsAt > 0:
				return fmt.Errorf("%s:%d: a second %s %s line for the command after line %d: one for each command", name, l.no, directivePrefix, paramsWord, paramsAt)
			case ok:
				l.params, l.pairs, paramsAt = params, pairs, l.no
				continue
			}
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
		l.params, l.pairs, paramsAt = nil, nil, 0
	}
	if paramsAt > 0 && sc.Err() == nil {
		return fmt.Errorf("%s:%d: %s %s for no command: a command line must follow it", name, paramsAt, directivePrefix, paramsWord)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			err = fmt.Errorf("line is longer than %d bytes", maxLineBytes)
		}
		return fmt.Errorf("%s:%d: %w", name, l.no+1, err)
	}
	return nil
}
