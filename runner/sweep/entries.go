package sweep

import (
	"bytes"
	"encoding/json"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"strings"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/runner/run"
)

// Entry is one run of a sweep built in Go ([Spec.Runs]): its own command,
// or parameters that fill in the sweep's command as a params-file line
// does, and what it asks for.
type Entry struct {
	// Command is the run's program and its arguments, run as they are (no
	// shell, no placeholders). Empty: [Spec.Command] with Params filled in.
	Command []string
	// Params are the run's parameters, recorded with it (status --runs,
	// the report) and matched by [Spec.Requests]. Filling in Spec.Command,
	// in the order of their keys, a key the command names as {key} takes
	// its value there and every other key is appended as --key=value; a
	// string is its text, any other value its JSON (3, 0.001, true, [1,2]).
	Params map[string]any
	// Request is what the run asks for, as it is; nil: [Spec.Request],
	// or the first of Spec.Requests that matches its Params.
	Request *pack.Request
}

// goRuns streams the runs of entries, with command (the sweep's, may be
// nil) filled in by those without their own. An entry that cannot run is
// an error naming it, runs[i].
func goRuns(entries []Entry, command []string, opts expandOptions) (iter.Seq2[run.Run, error], error) {
	var cmd *commandTemplate
	if len(command) > 0 {
		var err error
		if cmd, err = parseCommand(command, opts, func(string) bool { return true }); err != nil {
			return nil, err
		}
	}
	return func(yield func(run.Run, error) bool) {
		x := newExpander(opts)
		var e paramsEntry
		for i, g := range entries {
			origin := "runs[" + strconv.Itoa(i) + "]"
			fail := func(err error) { yield(run.Run{}, fmt.Errorf("%s: %w", origin, err)) }
			keys, vals, raws, err := goParams(g.Params)
			if err != nil {
				fail(err)
				return
			}
			switch {
			case len(g.Command) > 0:
				err = e.fill(nil, keys, vals, raws)
				if err == nil {
					err = checkArgv(g.Command)
				}
				if err == nil && g.Command[0] == "" {
					err = fmt.Errorf("empty program")
				}
				e.plain = g.Command
				if len(keys) == 0 {
					e.name = run.SafeName(strings.Join(g.Command, " "), run.MaxNameBytes)
				}
			case cmd == nil:
				err = fmt.Errorf("no command: give the run a Command, or the sweep one")
			default:
				err = e.fill(cmd, keys, vals, raws)
				e.plain = nil
			}
			if err == nil && g.Request != nil {
				err = g.Request.Validate()
			}
			if err != nil {
				fail(err)
				return
			}
			if len(keys) == 0 {
				e.params = nil
			}
			e.origin, e.request = origin, nil
			if g.Request != nil {
				r := *g.Request // the run's own: the caller may reuse its value
				e.request = &r
			}
			if !x.expand(&e.entry, yield) {
				return
			}
		}
	}, nil
}

// goParams turns a run's Params into keys in order, the argument text of
// each value and its compact JSON.
func goParams(params map[string]any) (keys, vals []string, raws []json.RawMessage, err error) {
	for k := range params {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if err := checkKey(k); err != nil {
			return nil, nil, nil, err
		}
		raw, err := json.Marshal(params[k])
		if err != nil {
			return nil, nil, nil, fmt.Errorf("%s: %w", k, err)
		}
		var compact bytes.Buffer
		json.Compact(&compact, raw)
		text, err := paramText(compact.Bytes())
		if err == nil {
			err = checkValue(k, text)
		}
		if err != nil {
			return nil, nil, nil, err
		}
		vals, raws = append(vals, text), append(raws, compact.Bytes())
	}
	return keys, vals, raws, nil
}
