package runner

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/nodepack/nodepack/runner/escape"
	"github.com/nodepack/nodepack/runner/run"
)

// RunsSchema names the document WriteRuns writes as JSON. Fields are only
// ever added to it.
const RunsSchema = "nodepack.runs/v1"

// RunsHeader is the runs document (schema nodepack.runs/v1) without its
// runs, which follow in "runs" as RunDoc objects.
type RunsHeader struct {
	Schema string `json:"schema"`
	Source struct {
		Kind string `json:"kind"` // tasks, sweep, grid, params or runs
		Name string `json:"name"` // the file, "-" for standard input, or "sweep"
	} `json:"source"`
	Total int `json:"total"` // runs in all shards
	Reps  int `json:"reps"`
	Shard struct {
		Index int    `json:"index"`
		Count int    `json:"count"`
		From  string `json:"from,omitempty"` // what chose it
	} `json:"shard"`
	Output string `json:"output"` // the output directory a run would use
}

// RunDoc is one run of the runs document.
type RunDoc struct {
	ID     string          `json:"id"`
	Index  int             `json:"index"` // position among the runs of all shards (NODEPACK_RUN_INDEX)
	Rep    int             `json:"rep"`
	Shard  int             `json:"shard"`
	Argv   []string        `json:"argv"`
	Env    []string        `json:"env"` // added to the run's environment
	Origin string          `json:"origin"`
	Name   string          `json:"name,omitempty"`   // readable name of its configuration
	Params json.RawMessage `json:"params,omitempty"` // its parameters, typed; params.json in its directory
	Dir    string          `json:"dir"`              // its directory: logs, params.json, NODEPACK_RUN_DIR
	// Request is what the run asks for, as task-file directives write it
	// ("gpus=0.25 cpus=2"); Class names its kind of placement ("0.25 GPU").
	Request string `json:"request"`
	Class   string `json:"class"`
}

// ErrWrite marks WriteRuns' errors that are the writer's, not the source's.
var ErrWrite = errors.New("writing the runs")

// WriteRuns writes the runs of the sweep's shard, as they would start,
// and starts nothing: one line each (id, index, shard, request, added
// environment, argv; text escaped for a terminal) or, with asJSON, a
// nodepack.runs/v1 document, streamed. It returns how many runs it wrote;
// an error is a run the source could not give (bad input further down)
// or, wrapping ErrWrite, the writer's.
func (s *Sweep) WriteRuns(w io.Writer, asJSON bool) (int, error) {
	shard, from := s.Shard()
	_, total := s.Total()
	spec := s.source.Spec()
	b := bufio.NewWriter(w)
	if asJSON {
		var h RunsHeader
		h.Schema, h.Total, h.Reps, h.Output = RunsSchema, total, max(spec.Reps, 1), s.output
		h.Source.Kind, h.Source.Name = spec.Kind(), spec.Name()
		h.Shard.Index, h.Shard.Count, h.Shard.From = shard.Index, max(shard.Count, 1), from
		head, _ := json.Marshal(h)
		// The runs stream: the document is the header's fields plus "runs".
		b.Write(head[:len(head)-1])
		b.WriteString(",\"runs\":[")
	}
	n := 0
	for r, err := range s.Runs() {
		if err != nil {
			b.Flush()
			return n, err
		}
		req := s.opts.Execute.RequestOf(r)
		if asJSON {
			env := r.Env
			if env == nil {
				env = []string{}
			}
			line, _ := json.Marshal(RunDoc{ID: r.ID, Index: r.Index, Rep: r.Rep, Shard: shard.Index,
				Argv: r.Args, Env: env, Origin: r.Origin, Name: r.Name, Params: r.Params,
				Dir: run.Dir(s.output, r), Request: req.String(), Class: req.Class()})
			if n > 0 {
				b.WriteByte(',')
			}
			b.WriteString("\n  ")
			b.Write(line)
		} else {
			fmt.Fprintf(b, "%s\t%d\t%s\t%s\t%s\t%q\n", r.ID, r.Index, shard, req, escape.Term(strings.Join(r.Env, " ")), r.Args)
		}
		n++
	}
	if asJSON {
		b.WriteString("\n]}\n")
	}
	if err := b.Flush(); err != nil {
		return n, fmt.Errorf("%w: %w", ErrWrite, err)
	}
	return n, nil
}
