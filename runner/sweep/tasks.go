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
	"github.com/nodepack/nodepack/runner/execute"
)

// utf8BOM is the byte order mark some editors put at the start of a UTF-8
// file; it is not part of the first line.
var utf8BOM = []byte("\xef\xbb\xbf")

// MaxLineBytes is the longest task-file line ReadTaskFile accepts: the
// kernel's limit on one execve argument (MAX_ARG_STRLEN, 128 KiB with its
// terminating NUL). A longer command could never start, so it is an input
// error; such a command belongs in a script.
const MaxLineBytes = 128<<10 - 1

// ReadTaskFile returns the runs of a task file: one shell command per line,
// run as ["bash", "-c", line]. Blank lines and lines whose first non-blank
// character is '#' are skipped; a trailing "\r" and a UTF-8 byte order mark
// at the start of the file are dropped. name is used in
// Origin ("name:line") and in errors.
//
// A line "#nodepack REQUEST" ([DirectivePrefix]) gives the lines after it,
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
// names in a command need not be UTF-8. A line longer than [MaxLineBytes] or
// containing a NUL byte, or a read error, ends the sequence with an error that
// names the file and line. The reader is consumed lazily, one line per run.
func ReadTaskFile(r io.Reader, name string, base pack.Request) iter.Seq2[execute.Run, error] {
	return readTaskFile(r, name, base, true)
}

// readTaskFile is ReadTaskFile; without withIDs the runs have no ID, for
// Expand, which derives them again.
func readTaskFile(r io.Reader, name string, base pack.Request, withIDs bool) iter.Seq2[execute.Run, error] {
	return func(yield func(execute.Run, error) bool) {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 0, 64<<10), MaxLineBytes+2) // room for "\r\n"
		var ids idSet
		line, index := 0, 0
		var request *pack.Request
		for sc.Scan() {
			line++
			text := sc.Bytes()
			if line == 1 {
				text = bytes.TrimPrefix(text, utf8BOM) // Windows editors start files with one
			}
			trimmed := bytes.TrimSpace(text)
			if len(trimmed) > 0 && trimmed[0] == '#' {
				r, ok, err := directive(trimmed, base)
				if err != nil {
					yield(execute.Run{}, fmt.Errorf("%s:%d: %w", name, line, err))
					return
				}
				if ok {
					request = r
				}
				continue
			}
			if len(trimmed) == 0 {
				continue
			}
			if len(text) > MaxLineBytes {
				yield(execute.Run{}, fmt.Errorf("%s:%d: line is longer than %d bytes", name, line, MaxLineBytes))
				return
			}
			if bytes.IndexByte(text, 0) >= 0 {
				yield(execute.Run{}, fmt.Errorf("%s:%d: line contains a NUL byte", name, line))
				return
			}
			args := []string{"bash", "-c", string(text)}
			run := execute.Run{
				Index:   index,
				Args:    args,
				Origin:  name + ":" + strconv.Itoa(line),
				Name:    execute.SafeName(string(trimmed), execute.MaxNameBytes),
				Request: request,
			}
			if withIDs {
				run.ID = ids.next(args)
			}
			index++
			if !yield(run, nil) {
				return
			}
		}
		if err := sc.Err(); err != nil {
			if errors.Is(err, bufio.ErrTooLong) {
				err = fmt.Errorf("line is longer than %d bytes", MaxLineBytes)
			}
			yield(execute.Run{}, fmt.Errorf("%s:%d: %w", name, line+1, err))
		}
	}
}
