// Package run holds what a sweep is made of and what happens to it: a
// [Run] (one command with its parameters, request and identity) and the
// [Event] of each attempt of it (started, finished, with its [Reason],
// exit status, failure class and use). It is the leaf that the readers of
// a sweep (the ledger, results, report, tail) share with the process
// runner (package execute), so that reading a sweep links no code that
// forks; it does nothing itself.
package run

import (
	"encoding/json"
	"errors"
	"iter"
	"path/filepath"
	"strings"

	"github.com/nodepack/nodepack/pack"
)

// Run is one command to run. Sources other than task files (sweeps, grids,
// parameter files) produce the same value with an argv that is executed
// directly, without a shell.
type Run struct {
	// ID names the run: NODEPACK_RUN_ID, the key of its ledger records, and
	// the end of its log directory's name (see Name). It must be unique
	// among the runs of one sweep and a
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
	// {rep} placeholder).
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
	// Request, if not nil, is what this run asks for, in place of
	// the sweep's default request.
	Request *pack.Request
	// Paused says an earlier session of the sweep paused the run (its
	// ledger's state): under the same pruning policy it is a candidate for
	// promotion, not a run to start (see execute.Options.Prune); without
	// one it runs, from its checkpoint.
	Paused bool
}

// ErrLink is wrapped by the error for a symbolic link where nodepack
// writes (a run's directory or log, runs/, a ledger, its lock): nodepack
// never writes through a link it did not make, which could point its
// writes at any file the user may write.
var ErrLink = errors.New("a symbolic link (or not what nodepack made) where nodepack writes: remove it")

// MaxNameBytes is how much of Run.Name goes into a directory name.
const MaxNameBytes = 80

// Dir returns the directory the runner gives run r under outputDir:
// outputDir/runs/<Name>-<ID>, or outputDir/runs/<ID> without a Name. It is
// NODEPACK_RUN_DIR and the {run_dir} placeholder.
func Dir(outputDir string, r Run) string {
	return filepath.Join(outputDir, "runs", r.DirName())
}

// DirName is the name of the run's directory under runs/: <Name>-<ID>, or
// <ID> without a Name.
func (r Run) DirName() string {
	name := SafeName(r.Name, MaxNameBytes)
	if name == "" {
		return r.ID
	}
	return name + "-" + r.ID
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

// ValidID reports whether id can name a run: not empty, not . or .., no
// slash and no NUL byte.
func ValidID(id string) bool {
	return id != "" && id != "." && id != ".." && strings.IndexByte(id, '/') < 0 && strings.IndexByte(id, 0) < 0
}
