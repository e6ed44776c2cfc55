package sweep

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
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
	return func(yield func(execute.Run, error) bool) {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 0, 64<<10), MaxLineBytes+2) // room for "\r\n"
		ids := newIDSet()
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
				ID:      ids.next(args),
				Index:   index,
				Args:    args,
				Origin:  name + ":" + strconv.Itoa(line),
				Name:    execute.SafeName(string(trimmed), execute.MaxNameBytes),
				Request: request,
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

// idSet hands out content-derived run IDs and counts repeats. The zero
// value is not usable; call newIDSet. It is not safe for concurrent use.
type idSet struct {
	seen map[uint64]uint32 // short hash → times handed out
}

func newIDSet() *idSet { return &idSet{seen: make(map[uint64]uint32)} }

// next returns the ID of a run with this argv and nothing else.
func (s *idSet) next(args []string) string { return s.nextKey(args, nil, 0) }

// nextKey returns the ID of a run from its content: the first 12 hex digits
// of the SHA-256 of its argv, its added environment and its repetition, with
// "-k" appended for the k-th time (k ≥ 2) the same 12 digits are handed out.
//
// Each argv element is hashed followed by a NUL (which no element can
// contain); each env entry follows as 0x01, the entry, NUL; a rep > 0 as
// 0x02, its decimal digits, NUL. So a run with no added environment and rep
// 0 hashes exactly as its argv alone: task-file IDs are the same with or
// without --reps, and growing --reps keeps the IDs of the earlier reps.
func (s *idSet) nextKey(args, env []string, rep int) string {
	h := sha256.New()
	var buf []byte
	for _, a := range args {
		buf = append(append(buf[:0], a...), 0)
		h.Write(buf)
	}
	for _, kv := range env {
		buf = append(append(append(buf[:0], 1), kv...), 0)
		h.Write(buf)
	}
	if rep > 0 {
		buf = append(strconv.AppendInt(append(buf[:0], 2), int64(rep), 10), 0)
		h.Write(buf)
	}
	var sum [sha256.Size]byte
	short := h.Sum(sum[:0])[:6]
	key := binary.BigEndian.Uint64(append([]byte{0, 0}, short...))
	s.seen[key]++
	id := hex.EncodeToString(short)
	if n := s.seen[key]; n > 1 {
		id += "-" + strconv.FormatUint(uint64(n), 10)
	}
	return id
}
