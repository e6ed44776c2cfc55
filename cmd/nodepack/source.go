package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/nodepack/nodepack/runner"
	"github.com/nodepack/nodepack/runner/execute"
	"github.com/nodepack/nodepack/runner/run"
	"github.com/nodepack/nodepack/runner/sweep"
	"github.com/spf13/pflag"
)

// addSourceFlags adds the flags that say what the runs are, bound to spec
// and runsPerShard; plan and run share them.
func addSourceFlags(fs *pflag.FlagSet, spec *sweep.Spec, runsPerShard *int) {
	fs.BoolVar(&spec.Hydra, "sweep", false, "run the command after -- once per combination of its Hydra sweep overrides (key=a,b key=choice(a,b) key=range(0,10,2))")
	fs.StringVar(&spec.Grid, "grid", "", "run the command after -- once per combination of the YAML grid `FILE`, appending --key=value")
	fs.StringVar(&spec.Params, "params", "", "run the command after -- once per JSON object (one a line) of `FILE` (- for standard input), appending --key=value")
	fs.StringArrayVar(&spec.Requests, "request", nil, "give the runs whose values match a request, `'MATCH: REQ'` such as 'model=big: gpus=2 cpus=16' or '*: gpus=0.5' (repeatable; the first that matches applies; --sweep, --grid, --params)")
	fs.IntVar(&spec.Reps, "reps", 1, "run everything `N` times (NODEPACK_REP and {rep} say which)")
	fs.IntVar(runsPerShard, "runs-per-shard", 0, "`M` runs per array task: plan prints the array to submit; --shard auto uses it where the scheduler does not tell the array size (PBS, LSF)")
}

// sourceArgs puts the positional arguments into spec: the task file, or,
// with --sweep, --grid or --params, the command after --.
func sourceArgs(spec *sweep.Spec, args []string) error {
	if spec.Reps < 1 {
		return fmt.Errorf("--reps %d: want at least 1", spec.Reps)
	}
	if spec.Hydra || spec.Grid != "" || spec.Params != "" {
		if len(args) == 0 && spec.TaskFile == "" {
			kind := spec.Kind()
			return fmt.Errorf("--%s needs the command after --, e.g. --%s -- python train.py", kind, kind)
		}
		spec.Command = args
		return nil
	}
	if len(args) != 1 {
		return fmt.Errorf("want one TASKFILE (or - for standard input), got %d arguments", len(args))
	}
	spec.TaskFile = args[0]
	return nil
}

// dryRun lists the runs of this shard and returns the exit code: one line
// per run (id, index, shard, request, added env, argv) or, with asJSON, a
// nodepack.runs/v1 document. x says what runs ask for by default.
func dryRun(sw *runner.Sweep, x *execute.Options, asJSON bool, stdout, stderr io.Writer) int {
	shard, from := sw.Shard()
	_, total := sw.Total()
	spec := sw.Source().Spec()
	w := bufio.NewWriter(stdout)
	defer w.Flush()
	if asJSON {
		head, _ := json.Marshal(runsHeader{Schema: runsSchema, Source: sourceDoc{Kind: spec.Kind(), Name: spec.Name()},
			Total: total, Reps: max(spec.Reps, 1), Shard: shardDoc{Index: shard.Index, Count: max(shard.Count, 1), From: from},
			Output: sw.Output()})
		// The runs stream: the document is the header's fields plus "runs".
		w.Write(head[:len(head)-1])
		w.WriteString(",\"runs\":[")
	}
	n := 0
	for r, err := range sw.Runs() {
		if err != nil {
			w.Flush()
			fmt.Fprintf(stderr, "nodepack r: %s\n", termSafe(err.Error()))
			return exitUsage
		}
		req := x.RequestOf(r)
		if asJSON {
			if n > 0 {
				w.WriteByte(',')
			}
			b, _ := json.Marshal(runDoc{ID: r.ID, Index: r.Index, Rep: r.Rep, Shard: shard.Index,
				Argv: r.Args, Env: orEmptyStrings(r.Env), Origin: r.Origin, Name: r.Name, Params: r.Params,
				Dir: run.Dir(sw.Output(), r), Request: req.String(), Class: req.Class()})
			w.WriteString("\n  ")
			w.Write(b)
		} else {
			fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\t%q\n", r.ID, r.Index, shard, req, termSafe(strings.Join(r.Env, " ")), r.Args)
		}
		n++
	}
	if asJSON {
		w.WriteString("\n]}\n")
	}
	if err := w.Flush(); err != nil {
		fmt.Fprintf(stderr, "nodepack: %s\n", termSafe(err.Error()))
		return exitFailed
	}
	fmt.Fprintf(stderr, "nodepack run: dry run: %s of shard %s (%d in all shards), output %s; nothing started\n", countWord(n, "run"), shard, total, termSafe(sw.Output()))
	return exitOK
}

func orEmptyStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// runsSchema names the dry-run document's format. Fields are only ever
// added to it.
const runsSchema = "nodepack.runs/v1"

// runsHeader is the dry-run document (schema nodepack.runs/v1) without its
// runs, which follow in "runs" as runDoc objects.
type runsHeader struct {
	Schema string    `json:"schema"`
	Source sourceDoc `json:"source"`
	Total  int       `json:"total"` // runs in all shards
	Reps   int       `json:"reps"`
	Shard  shardDoc  `json:"shard"`
	Output string    `json:"output"` // the output directory a run would use
}

type sourceDoc struct {
	Kind string `json:"kind"` // tasks, sweep, grid or params
	Name string `json:"name"` // the file, "-" for standard input, or "sweep"
}

type shardDoc struct {
	Index int    `json:"index"`
	Count int    `json:"count"`
	From  string `json:"from,omitempty"` // what chose it
}

// runDoc is one run of the dry-run document.
type runDoc struct {
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
	// Request is what the run asks for, as --request and task-file
	// directives write it ("gpus=0.25 cpus=2"); Class names its kind of
	// placement ("0.25 GPU").
	Request string `json:"request"`
	Class   string `json:"class"`
}

// errNoRuns is the usage error of plan --runs-per-shard without runs.
var errNoRuns = errors.New("--runs-per-shard needs the runs: a TASKFILE, or --sweep, --grid or --params with the command after --")
