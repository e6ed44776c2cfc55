package runner

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Run is one command to run. Sources other than task files (sweeps, grids,
// parameter files) produce the same value with an argv that is executed
// directly, without a shell.
type Run struct {
	// ID names the run: NODEPACK_RUN_ID, the key of its ledger records, and
	// the end of its log directory's name (see Name). It must be unique among the runs of one Execute and a
	// single path element. If empty, the decimal Index is used.
	ID string
	// Index is the run's position among the runs of its source, from 0
	// (NODEPACK_RUN_INDEX).
	Index int
	// Args is the argv; Args[0] is looked up in nodepack's PATH.
	// A task-file line becomes ["bash", "-c", line].
	Args []string
	// Env holds extra KEY=VALUE entries for this run only. They are applied
	// last and override everything else, including the variables the runner
	// sets.
	Env []string
	// Dir is the working directory; empty means the caller's.
	Dir string
	// Origin says where the run came from, for messages ("tasks.txt:12").
	Origin string
	// Rep is the repetition of the same entry, from 0 (NODEPACK_REP and the
	// {rep} placeholder); see [SourceOptions.Reps].
	Rep int
	// Name is a readable name of the run's configuration, the same for all
	// its reps ("lr=0.1,seed=3"), so a person finds its logs without the
	// ledger: the run's directory is <OutputDir>/runs/<Name>-<ID>, or
	// runs/<ID> when Name is empty. It need not be unique; characters that
	// do not belong in a file name are replaced, and it is cut short.
	Name string
	// Params holds the run's parameters as one JSON object with typed
	// values (numbers, booleans and lists as the source wrote them); nil
	// for a run without parameters, such as a task-file line. The runner
	// writes it to params.json in the run's directory.
	Params json.RawMessage
}

// maxNameBytes is how much of Run.Name goes into a directory name.
const maxNameBytes = 80

// RunDir returns the directory the runner gives run r under outputDir:
// outputDir/runs/<Name>-<ID>, or outputDir/runs/<ID> without a Name. It is
// NODEPACK_RUN_DIR and the {run_dir} placeholder.
func RunDir(outputDir string, r Run) string {
	return filepath.Join(outputDir, "runs", r.dirName())
}

// dirName is the name of the run's directory under runs/.
func (r Run) dirName() string {
	name := SafeName(r.Name, maxNameBytes)
	if name == "" {
		return r.ID
	}
	return name + "-" + r.ID
}

// label names the run in live output: where it came from (tasks.txt:12),
// with its rep when there are several, else its ID.
func (r Run) label() string {
	switch {
	case r.Origin == "":
		return r.ID
	case r.Rep > 0:
		return r.Origin + " rep " + strconv.Itoa(r.Rep)
	}
	return r.Origin
}

// SafeName turns s into something usable inside a file name: letters,
// digits and . _ = , + - are kept, every other byte run becomes one '_',
// and the result is cut to at most max bytes (never inside a kept run of
// a multi-byte character: those are replaced anyway). Leading dots are
// dropped, so the name is never hidden, "." or "..".
func SafeName(s string, max int) string {
	var b strings.Builder
	underscore := false
	for i := 0; i < len(s) && b.Len() < max; i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9',
			c == '.' || c == '_' || c == '=' || c == ',' || c == '+' || c == '-':
			if c == '.' && b.Len() == 0 {
				continue
			}
			b.WriteByte(c)
			underscore = c == '_'
		default:
			if !underscore && b.Len() > 0 {
				b.WriteByte('_')
				underscore = true
			}
		}
	}
	return strings.TrimRight(b.String(), "_")
}

// writeParams writes the run's parameters to params.json in dir, if it has
// any.
func writeParams(dir string, r Run) error {
	if r.Params == nil {
		return nil
	}
	return os.WriteFile(filepath.Join(dir, "params.json"), append(slices.Clip(r.Params), '\n'), 0o644)
}

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
func ReadTaskFile(r io.Reader, name string) iter.Seq2[Run, error] {
	return func(yield func(Run, error) bool) {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 0, 64<<10), MaxLineBytes+2) // room for "\r\n"
		ids := newIDSet()
		line, index := 0, 0
		for sc.Scan() {
			line++
			text := sc.Bytes()
			if line == 1 {
				text = bytes.TrimPrefix(text, utf8BOM) // Windows editors start files with one
			}
			trimmed := bytes.TrimSpace(text)
			if len(trimmed) == 0 || trimmed[0] == '#' {
				continue
			}
			if len(text) > MaxLineBytes {
				yield(Run{}, fmt.Errorf("%s:%d: line is longer than %d bytes", name, line, MaxLineBytes))
				return
			}
			if bytes.IndexByte(text, 0) >= 0 {
				yield(Run{}, fmt.Errorf("%s:%d: line contains a NUL byte", name, line))
				return
			}
			args := []string{"bash", "-c", string(text)}
			run := Run{
				ID:     ids.next(args),
				Index:  index,
				Args:   args,
				Origin: name + ":" + strconv.Itoa(line),
				Name:   SafeName(string(trimmed), maxNameBytes),
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
			yield(Run{}, fmt.Errorf("%s:%d: %w", name, line+1, err))
		}
	}
}

// Runs returns a sequence that yields runs in order, with no errors.
// It is the simplest source for library callers.
func Runs(runs ...Run) iter.Seq2[Run, error] {
	return func(yield func(Run, error) bool) {
		for _, r := range runs {
			if !yield(r, nil) {
				return
			}
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

// validID reports whether id can name a run directory.
func validID(id string) bool {
	return id != "" && id != "." && id != ".." && !strings.ContainsAny(id, "/\x00")
}
