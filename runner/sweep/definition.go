package sweep

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/nodepack/nodepack/runner/run"
)

// Source kinds, as a [Definition] names them.
const (
	KindTasks  = "tasks"  // a task file: one shell command per line
	KindSweep  = "sweep"  // a command with Hydra-style sweep overrides
	KindGrid   = "grid"   // a YAML grid and a command
	KindParams = "params" // a JSON-lines params file and a command
	KindRuns   = "runs"   // runs built in Go (Spec.Runs)
	KindSearch = "search" // a searcher's proposals and a command (Spec.Search)
)

// Definition says what a sweep is, as its ledger records it, so that a
// rerun into the same output directory resumes only the same sweep. Runs
// are matched by ID, a hash of what each run executes, so a sweep whose
// task file or grid grew keeps its finished runs; a Definition holds what
// the IDs do not: where the runs come from, the command they are made
// from, and what the runner adds to every one of them.
type Definition struct {
	Kind string `json:"kind"` // KindTasks, KindSweep, KindGrid, KindParams, KindRuns or KindSearch
	// Source is the base name of the task, grid or params file ("-" for
	// standard input), or the searcher's command as given; empty for a
	// sweep.
	Source string `json:"source,omitempty"`
	// Command is the command of a grid or params source as given, or a
	// sweep's command with each swept value written as "{sweep}".
	Command []string `json:"command,omitempty"`
	Env     []string `json:"env,omitempty"`  // KEY=VALUE added to every run (Options.Env)
	Wrap    []string `json:"wrap,omitempty"` // the prefix of every run (Options.Wrap)
	Reps    int      `json:"reps,omitempty"`
	Shards  int      `json:"shards,omitempty"` // the number of shards; 0 or 1 when not sharded
}

// Key returns a short hash of what makes the sweep this sweep: kind,
// source, command, env and wrap. Reps and shards are left out: a sweep may
// grow its reps, and all shards of a sweep share one key. So is a
// searcher's command: it chooses the runs, the command makes them, so a
// sweep goes on with another searcher or budget, told every end.
func (d Definition) Key() string {
	b, _ := json.Marshal(Definition{Kind: d.Kind, Source: d.keySource(), Command: d.Command, Env: d.Env, Wrap: d.Wrap})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:4])
}

// Label is a short readable name for the sweep, for the name of its
// output directory: its file's name without the extension ("-" is
// "stdin"), or for a Hydra sweep the script it runs ("train" for python
// train.py …), else "sweep".
func (d Definition) Label() string {
	label := ""
	switch {
	case d.Kind == KindSearch:
		label = scriptLabel(strings.Fields(d.Source), "search")
	case d.Source == "-":
		label = "stdin"
	case d.Source != "":
		label = strings.TrimSuffix(d.Source, filepath.Ext(d.Source))
	default:
		label = scriptLabel(d.Command, "sweep")
	}
	if label = run.SafeName(label, 32); label == "" {
		label = d.Kind
	}
	return label
}

// keySource is the source as it defines the sweep: none for a searcher
// (see Key).
func (d Definition) keySource() string {
	if d.Kind == KindSearch {
		return ""
	}
	return d.Source
}

// scriptLabel is the name of the first script among words (train for
// train.py), else none.
func scriptLabel(words []string, none string) string {
	for _, a := range words {
		if ext := filepath.Ext(a); len(ext) > 1 && len(ext) <= 5 && !strings.ContainsAny(a, "= \t{") {
			return strings.TrimSuffix(filepath.Base(a), ext)
		}
	}
	return none
}

// Changes says, one phrase each, how d differs from an earlier definition
// in a way that makes the earlier results wrong for d: another kind of
// source, another source file, another command, env, wrap prefix or number
// of shards. It returns nil when a sweep of d may resume one of earlier;
// more or fewer reps are not a change.
func (d Definition) Changes(earlier Definition) []string {
	var changes []string
	if d.Kind != earlier.Kind {
		changes = append(changes, fmt.Sprintf("the source was %s, now %s", kindPhrase(earlier.Kind), kindPhrase(d.Kind)))
	} else if d.keySource() != earlier.keySource() {
		changes = append(changes, fmt.Sprintf("the %s was %s, now %s", sourceNoun(d.Kind), quoteOrNone(earlier.Source), quoteOrNone(d.Source)))
	}
	compare := func(what string, was, now []string) {
		if !slices.Equal(was, now) {
			changes = append(changes, fmt.Sprintf("%s was %s, now %s", what, wordsOrNone(was), wordsOrNone(now)))
		}
	}
	if d.Kind == earlier.Kind {
		compare("the command", earlier.Command, d.Command)
	}
	compare("the environment", earlier.Env, d.Env)
	compare("the wrapper", earlier.Wrap, d.Wrap)
	if max(d.Shards, 1) != max(earlier.Shards, 1) {
		changes = append(changes, fmt.Sprintf("the sweep had %d shards, now %d", max(earlier.Shards, 1), max(d.Shards, 1)))
	}
	return changes
}

func kindPhrase(kind string) string {
	switch kind {
	case KindTasks:
		return "a task file"
	case KindSweep:
		return "a sweep command"
	case KindGrid:
		return "a grid file"
	case KindParams:
		return "a params file"
	case KindRuns:
		return "runs given in Go"
	case KindSearch:
		return "a searcher"
	}
	return "unknown (" + kind + ")"
}

// sourceNoun names the file of a kind of source.
func sourceNoun(kind string) string {
	switch kind {
	case KindGrid:
		return "grid file"
	case KindParams:
		return "params file"
	case KindSearch:
		return "searcher"
	}
	return "task file"
}

func quoteOrNone(s string) string {
	if s == "" {
		return "none"
	}
	return fmt.Sprintf("%q", s)
}

func wordsOrNone(words []string) string {
	if len(words) == 0 {
		return "none"
	}
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = fmt.Sprintf("%q", w)
	}
	return "[" + strings.Join(q, " ") + "]"
}
