package sweep

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"strconv"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/runner/run"
)

// KindSearch's grammar: what a searcher (Spec.Search) answers to each ask
// is one line of a params file, the run it proposes, or a control word.
//
//	{"lr": 0.01, "layers": 3}                   a run: the command with --lr=0.01 --layers=3
//	{"lr": 0.01, "nodepack": {"gpus": 2}}       a run that asks for 2 GPUs
//	{"nodepack": "wait"}                        no proposal for now: ask again after the next run ends
//	{"nodepack": "done"}                        no more proposals: the sweep ends when its runs do
//
// A proposal makes the run the same line of a params file would, with the
// same argv and ID, so the ledger knows a run proposed twice (or by the
// searcher of an earlier session) as one run. The process and the
// conversation are the runner's (runner/search.go); docs/search.md is the
// protocol.

// Reply is what a searcher said to one ask: a run, or Wait, or Done.
type Reply struct {
	Run  run.Run
	Wait bool // no proposal for now
	Done bool // no more proposals
	Line int  // the reply's line of the searcher's output, from 1
}

// Proposals turns a searcher's replies into runs. Make it with
// [Source.Proposals]; it is not safe for concurrent use.
type Proposals struct {
	cmd   *commandTemplate
	opts  expandOptions
	label string
}

// Proposals returns the reader of the replies of a KindSearch source's
// searcher, named label in errors ("searcher").
func (src *Source) Proposals(label string) (*Proposals, error) {
	if src.spec.Kind() != KindSearch {
		return nil, fmt.Errorf("proposals: the source is %s, not a searcher", kindPhrase(src.spec.Kind()))
	}
	opts := src.options(Shard{})
	opts.Reps = 1
	cmd, err := parseCommand(src.spec.Command, opts, func(string) bool { return true })
	if err != nil {
		return nil, err
	}
	return &Proposals{cmd: cmd, opts: opts, label: label}, nil
}

// Replies reads a searcher's output, one reply a line (blank lines and
// lines starting with '#' are skipped), and yields each, the runs
// numbered from first on (run.Run.Index) with origin "LABEL:LINE". An
// error ends the sequence and names the line and column: a line that is
// not one JSON object, an unknown control word, a proposal that is no run
// of the command, a line longer than 1 MiB. The end of the output ends it
// with no error.
func (p *Proposals) Replies(r io.Reader, first int) iter.Seq2[Reply, error] {
	return func(yield func(Reply, error) bool) {
		sc := newLineScanner(r)
		line, index := 0, first
		for sc.Scan() {
			line++
			text := lineText(sc.Bytes(), line)
			if len(text) == 0 || text[0] == '#' {
				continue
			}
			rep, err := p.parse(text, index, line)
			if err != nil {
				yield(Reply{}, lineError(p.label, line, err))
				return
			}
			if !rep.Wait && !rep.Done {
				index++
			}
			if !yield(rep, nil) {
				return
			}
		}
		if err := sc.Err(); err != nil {
			yield(Reply{}, scanError(p.label, line+1, err))
		}
	}
}

// parse reads one reply.
func (p *Proposals) parse(text []byte, index, line int) (Reply, error) {
	keys, vals, raws, err := parseParamsLine(text)
	if err != nil {
		return Reply{}, err
	}
	if len(keys) == 1 && keys[0] == paramsRequestKey && len(raws[0]) > 0 && raws[0][0] == '"' {
		switch vals[0] {
		case "wait":
			return Reply{Wait: true, Line: line}, nil
		case "done":
			return Reply{Done: true, Line: line}, nil
		}
		return Reply{}, &columnError{bytes.IndexByte(text, ':') + 2, fmt.Sprintf("unknown word %q: a reply is a run's parameters, {\"nodepack\": \"wait\"} or {\"nodepack\": \"done\"}", vals[0])}
	}
	var e paramsEntry
	if err := e.fromObject(keys, vals, raws, p.cmd, p.opts); err != nil {
		return Reply{}, err
	}
	e.origin = p.label + ":" + strconv.Itoa(line)
	r, err := p.run(&e, index)
	return Reply{Run: r, Line: line}, err
}

// run expands the entry of one proposal into its run, at index.
func (p *Proposals) run(e *paramsEntry, index int) (run.Run, error) {
	// A fresh expander for each: a proposal made twice is one run, with
	// one ID, not a second rep.
	x := newExpander(p.opts)
	x.next = index
	var out run.Run
	var err error
	x.expand(&e.entry, func(r run.Run, e error) bool {
		out, err = r, e
		return false
	})
	if err == nil && out.Args == nil {
		err = errors.New("no run") // not reached: one entry is one run
	}
	return out, err
}

// Again makes once more the run an earlier session's searcher proposed,
// from what its ledger recorded: its parameters (a Started record's
// params, in their order) and, when not empty, the request it held. The
// run is the one the proposal made, with the same ID, unless the command
// or the environment changed (the ledger then refuses the sweep first).
func (p *Proposals) Again(params json.RawMessage, request string, index int, origin string) (run.Run, error) {
	if len(params) == 0 {
		params = json.RawMessage("{}")
	}
	keys, vals, raws, err := parseParamsLine(params)
	if err != nil {
		var ce *columnError
		if errors.As(err, &ce) {
			err = errors.New(ce.msg)
		}
		return run.Run{}, fmt.Errorf("%s: recorded params: %w", origin, err)
	}
	var e paramsEntry
	if err := e.fromObject(keys, vals, raws, p.cmd, p.opts); err != nil {
		return run.Run{}, fmt.Errorf("%s: recorded params: %w", origin, err)
	}
	if request != "" {
		r, err := pack.ParseRequest(request, p.opts.Request, p.opts.GPUMemory)
		if err == nil && r != p.opts.Request {
			e.request = &r
		}
	}
	e.origin = origin
	return p.run(&e, index)
}
