package sweep

import (
	"errors"
	"fmt"
	"iter"
	"path/filepath"
	"strings"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/runner/run"
)

// Spec says where a sweep's runs come from: a task file, or a command
// with Hydra sweep overrides, a YAML grid or a JSON-lines params file. The
// zero Spec has no source; set exactly one of TaskFile, Hydra, Grid and
// Params (or Search, or Runs). Open checks it and opens its files.
type Spec struct {
	// TaskFile is a file of shell commands, one a line ("-" is standard
	// input; a pipe, a FIFO or /dev/fd/N from process substitution work
	// too).
	TaskFile string
	// Hydra expands Command's Hydra sweep overrides (key=a,b
	// key=range(…)).
	Hydra bool
	// Grid is a YAML grid file; its combinations fill in Command.
	Grid string
	// Params is a JSON-lines params file ("-" for standard input); each
	// object fills in Command.
	Params string
	// Search is a searcher's command, run with sh -c: a program that
	// proposes the runs as the sweep goes, one params line per ask, and
	// is told how each ended (runner/search.go; docs/search.md). Its
	// proposals fill in Command. The source has no total and no runs
	// before the sweep starts: it is the runner's to stream.
	Search string
	// Runs are the runs of a sweep built in Go, in order: each its own
	// command or parameters that fill in Command. The sweep's definition
	// is its kind and Command; each run is known by its ID (what it
	// executes), so a sweep whose slice grew resumes as a task file does.
	Runs []Entry
	// Command is the command of a Hydra sweep, grid or params file,
	// program first; for Runs, the command of those without their own.
	Command []string
	// Reps runs every entry Reps times; zero or less means 1.
	Reps int
	// OutputDir is the output directory the runs will have, for
	// {run_dir}; empty is fine for checking, since the directory may be
	// chosen later.
	OutputDir string
	// CheckShell has Scan check that bash can parse every task line.
	CheckShell bool
	// Request is what every run asks for unless it says otherwise: the
	// base that task-file directives, params-file requests and Requests
	// are read over (keys they do not name keep its values).
	Request pack.Request
	// GPUMemory is the GPU memory runs may share on one of the node's
	// GPUs ([pack.Topology.GPUMemory]): a run that asks for gpu_mem but
	// not for cpus gets the CPUs of the part of a GPU that is (see
	// [pack.ParseRequest]). 0 when unknown: such a run keeps Request's
	// CPUs.
	GPUMemory uint64
	// Requests are rules, "MATCH: REQUEST", that give runs of a sweep,
	// grid or params file requests by their values (see parseRule); the
	// first that matches a run applies. A rule that matches no run is an
	// error of Scan.
	Requests []string
}

// Kind returns the kind of source: KindTasks, KindSweep, KindGrid,
// KindParams or KindRuns.
func (s Spec) Kind() string {
	switch {
	case s.Hydra:
		return KindSweep
	case s.Grid != "":
		return KindGrid
	case s.Params != "":
		return KindParams
	case s.Runs != nil:
		return KindRuns
	case s.Search != "":
		return KindSearch
	}
	return KindTasks
}

// Name names the source in messages and documents: the file, or "sweep".
func (s Spec) Name() string {
	switch s.Kind() {
	case KindSweep:
		return "sweep"
	case KindGrid:
		return s.Grid
	case KindParams:
		return s.Params
	case KindRuns:
		return "runs"
	case KindSearch:
		return "searcher"
	}
	return s.TaskFile
}

// Source is an opened Spec: its files parsed or open, ready to be scanned
// and streamed any number of times. Close it when done. It is not safe
// for concurrent use.
type Source struct {
	spec       Spec
	definition Definition
	notes      []string
	total      int
	input      *input // the task or params file
	hydra      *hydraSweep
	grid       *gridSweep
	rules      []requestRule
	memo       idMemo // every run's ID, from the last Scan that walked them all
}

// maxTotalRuns bounds a sweep, reps included, so that a typo is an input
// error rather than a hang.
const maxTotalRuns = maxRuns

// Open checks the spec and opens its source: it parses a Hydra sweep or a
// grid, and opens a task or params file, reading a stream (standard
// input, a pipe) once into a private spool file so that it can be read
// again (see [Source.Scan]). Errors are the user's input: they name the
// file, line and column where there is one.
func (s Spec) Open() (*Source, error) {
	n := 0
	for _, set := range []bool{s.TaskFile != "", s.Hydra, s.Grid != "", s.Params != "", s.Runs != nil, s.Search != ""} {
		if set {
			n++
		}
	}
	switch {
	case n > 1:
		return nil, errors.New("a task file, a sweep, a grid, params, runs and a searcher exclude each other: give one source")
	case n == 0:
		return nil, errors.New("no source: want a task file, runs, or a sweep, a grid or params with a command")
	case s.Runs != nil && len(s.Runs) == 0:
		return nil, errors.New("runs: no runs")
	case s.TaskFile == "" && s.Runs == nil && len(s.Command) == 0:
		kind := s.Kind()
		return nil, fmt.Errorf("a %s needs a command to run", kind)
	case s.TaskFile != "" && len(s.Command) > 0:
		return nil, fmt.Errorf("a task file takes no command: got %q", s.Command)
	}
	if s.Reps < 0 {
		return nil, fmt.Errorf("reps %d: want at least 1", s.Reps)
	}
	if s.Search != "" && s.Reps > 1 {
		return nil, fmt.Errorf("reps %d: a searcher proposes every run: have it propose the seeds (a seed parameter)", s.Reps)
	}
	src := &Source{spec: s, definition: Definition{Kind: s.Kind(), Reps: max(s.Reps, 1)}}
	if len(s.Requests) > 0 && s.Kind() == KindTasks {
		return nil, fmt.Errorf("request rules go with a sweep, a grid or params: a task file sets requests with %s lines", directivePrefix)
	}
	for _, text := range s.Requests {
		rule, err := parseRule(text, s.Request, s.GPUMemory)
		if err != nil {
			return nil, err
		}
		src.rules = append(src.rules, rule)
	}
	opts := src.options(Shard{})
	if opts.OutputDir == "" {
		opts.OutputDir = "OUTPUT" // to check {run_dir}: the directory may be chosen later
	}
	switch s.Kind() {
	case KindTasks:
		in, err := openInput(s.TaskFile)
		if err != nil {
			return nil, err
		}
		src.input, src.definition.Source = in, sourceName(s.TaskFile)
	case KindSweep:
		command := src.dropMultirun(s.Command)
		h, err := parseHydra(command)
		if err != nil {
			return nil, err
		}
		if _, err := h.Runs(opts); err != nil {
			return nil, err
		}
		src.hydra, src.spec.Command, src.definition.Command = h, command, h.Template()
	case KindGrid:
		in, err := openInput(s.Grid)
		if err != nil {
			return nil, fmt.Errorf("grid: %w", err)
		}
		g, err := readGrid(in.reader(), s.Grid)
		in.Close()
		if err != nil {
			return nil, err
		}
		if _, err := g.Runs(s.Command, opts); err != nil {
			return nil, fmt.Errorf("%s: %w", s.Grid, err)
		}
		src.grid, src.definition.Source, src.definition.Command = g, sourceName(s.Grid), s.Command
	case KindParams:
		if _, err := readParams(strings.NewReader(""), s.Params, s.Command, opts); err != nil {
			return nil, fmt.Errorf("%s: %w", s.Params, err)
		}
		in, err := openInput(s.Params)
		if err != nil {
			return nil, fmt.Errorf("params: %w", err)
		}
		src.input, src.definition.Source, src.definition.Command = in, sourceName(s.Params), s.Command
	case KindRuns:
		if _, err := goRuns(nil, s.Command, opts); err != nil {
			return nil, fmt.Errorf("runs: %w", err)
		}
		src.definition.Command = s.Command
	case KindSearch:
		if _, err := parseCommand(s.Command, opts, func(string) bool { return true }); err != nil {
			return nil, fmt.Errorf("search: %w", err)
		}
		src.definition.Source, src.definition.Command = s.Search, s.Command
	}
	return src, nil
}

// sourceName is how a Definition names a source file: its base name, or
// "-" for standard input.
func sourceName(name string) string {
	if name == "-" || name == "/dev/stdin" {
		return "-"
	}
	return filepath.Base(name)
}

// dropMultirun removes Hydra's --multirun (-m) from a sweep's command, with
// a note: nodepack runs the sweep itself, and with the flag every run
// would start a sweep of its own. A -m right after a Python interpreter is
// Python's (python -m module) and stays.
func (src *Source) dropMultirun(args []string) []string {
	python := len(args) > 0 && strings.HasPrefix(filepath.Base(args[0]), "python")
	var kept []string
	for i, a := range args {
		if i > 0 && (a == "--multirun" || a == "-m" && !(i == 1 && python)) {
			src.notes = append(src.notes, fmt.Sprintf("dropped %s from the command: nodepack runs the sweep itself, and with it every run would start a Hydra sweep of its own", a))
			continue
		}
		kept = append(kept, a)
	}
	return kept
}

// Definition returns what defines the sweep, as far as the source knows:
// kind, source, command and reps. The caller adds what the runner adds to
// every run (Env, Wrap) and the number of shards.
func (src *Source) Definition() Definition { return src.definition }

// Notes returns remarks about the source for the person running it, one
// line each.
func (src *Source) Notes() []string { return src.notes }

// Spec returns the spec the source was opened from, with the command as
// it runs (without a dropped --multirun).
func (src *Source) Spec() Spec { return src.spec }

// SetOutputDir sets the output directory the runs will have, for their
// {run_dir}, once it is chosen.
func (src *Source) SetOutputDir(dir string) { src.spec.OutputDir = dir }

// Total returns the number of runs in all shards; valid after Scan.
func (src *Source) Total() int { return src.total }

// Program returns the program every run starts: bash for a task file, the
// command's first word otherwise (for runs given in Go with commands of
// their own, the first run's).
func (src *Source) Program() string {
	switch {
	case src.spec.Kind() == KindTasks:
		return "bash"
	case len(src.spec.Command) == 0 && len(src.spec.Runs) > 0 && len(src.spec.Runs[0].Command) > 0:
		return src.spec.Runs[0].Command[0] // runs given in Go, each with its own: the first's
	case len(src.spec.Command) == 0:
		return ""
	}
	return src.spec.Command[0]
}

// options are the expander's options for a shard.
func (src *Source) options(shard Shard) expandOptions {
	opts := expandOptions{Reps: src.spec.Reps, Shard: shard, Request: src.spec.Request, GPUMemory: src.spec.GPUMemory, Rules: src.rules, runs: src.total, memo: src.memo}
	if src.spec.OutputDir != "" {
		opts.OutputDir, _ = filepath.Abs(src.spec.OutputDir)
	}
	return opts
}

// Runs streams the runs of one shard (the zero Shard is all of them), from
// the start each time it is called.
func (src *Source) Runs(shard Shard) iter.Seq2[run.Run, error] {
	return src.runs(src.options(shard), nil)
}

// RunsExcept streams the runs of one shard as Runs does, without those
// for which skip, called with the ID of every run of the shard in order,
// returns true: a resume leaves out what its ledger says is done without
// making each such run (its name, origin, environment), which for a
// million runs done before is most of the wait for the first new one.
func (src *Source) RunsExcept(shard Shard, skip func(id string) bool) iter.Seq2[run.Run, error] {
	opts := src.options(shard)
	opts.skip = skip
	return src.runs(opts, nil)
}

// runs streams the runs for opts, counting each rule's matches in hits
// when it is not nil.
func (src *Source) runs(opts expandOptions, hits []int) iter.Seq2[run.Run, error] {
	opts.hits = hits
	var runs iter.Seq2[run.Run, error]
	var err error
	switch src.spec.Kind() {
	case KindSweep:
		runs, err = src.hydra.Runs(opts)
	case KindGrid:
		runs, err = src.grid.Runs(src.spec.Command, opts)
	case KindParams:
		runs, err = readParams(src.input.reader(), src.input.label, src.spec.Command, opts)
	case KindRuns:
		runs, err = goRuns(src.spec.Runs, src.spec.Command, opts)
	case KindSearch:
		// A searcher's runs are proposed as the sweep goes: none before.
		return func(func(run.Run, error) bool) {}
	default:
		runs = expandTasks(src.input.reader(), src.input.label, src.spec.Request, opts)
	}
	if err != nil {
		return func(yield func(run.Run, error) bool) { yield(run.Run{}, err) }
	}
	return runs
}

// SkipRest, returned by Scan's seen, says that the caller has seen enough
// of a sweep or a grid without rules: its remaining runs, which were
// checked when it was parsed, are counted without being walked.
//
//lint:ignore ST1012 a signal to stop, not a failure: named as fs.SkipAll is
var SkipRest = errors.New("skip the remaining runs")

// Scan reads every run of every shard once, before anything starts, and
// counts them (Total): a task or params file is checked line by line (and,
// with CheckShell, every task line must parse as bash), and every rule of
// Requests must match some run. A sweep or a grid was checked when it was
// parsed, so without rules it is walked only when seen is not nil. seen,
// if not nil, is called with every run, so that a caller can tell which of
// the runs it knows are still part of the sweep and check their requests;
// an error it returns ends the scan, and SkipRest ends the walk of a
// sweep or a grid without rules (elsewhere it only stops the calls).
func (src *Source) Scan(seen func(run run.Run) error) error {
	kind, reps := src.spec.Kind(), max(src.spec.Reps, 1)
	if kind == KindSearch {
		src.total = 0 // not known: the searcher proposes the runs as they go
		return nil
	}
	perRep := 0
	switch kind {
	case KindSweep:
		perRep = src.hydra.Len()
	case KindGrid:
		perRep = src.grid.Len()
	}
	if perRep > 0 && perRep > maxTotalRuns/reps {
		return fmt.Errorf("reps %d: %d × %d runs, more than %d", reps, perRep, reps, maxTotalRuns)
	}
	if perRep > 0 && seen == nil && len(src.rules) == 0 {
		src.total = perRep * reps
		return nil
	}
	hits := make([]int, len(src.rules))
	var shell *shellChecker
	if kind == KindTasks && src.spec.CheckShell {
		shell = newShellChecker()
	}
	checking := *src
	checking.memo, src.memo = nil, nil
	memo, memoOK := idMemo{}, true
	if checking.spec.OutputDir == "" {
		// Only to check and count: {run_dir} may be chosen later.
		checking.spec.OutputDir = "OUTPUT"
	}
	opts := checking.options(Shard{})
	opts.nameless = true
	runs := checking.runs(opts, hits)
	n := 0
	for run, err := range runs {
		if err != nil {
			return err
		}
		if shell != nil && run.Rep == 0 {
			if err := shell.check(run.Args[2]); err != nil {
				return fmt.Errorf("%s: %w", run.Origin, err)
			}
		}
		memoOK = memoOK && memo.add(run.ID)
		if seen != nil {
			if err := seen(run); err == SkipRest {
				if perRep > 0 && len(src.rules) == 0 {
					src.total = perRep * reps
					return nil
				}
				seen = nil
			} else if err != nil {
				return err
			}
		}
		if n++; n > maxTotalRuns {
			return fmt.Errorf("%s: more than %d runs", src.spec.Name(), maxTotalRuns)
		}
	}
	if n == 0 {
		if kind == KindTasks {
			return fmt.Errorf("%s: no commands", src.input.label)
		}
		return fmt.Errorf("%s: no runs", src.spec.Name())
	}
	for i, r := range src.rules {
		if hits[i] == 0 {
			return fmt.Errorf("request rule %q %w of %s: check its keys and values", r.Text, errRuleUnmatched, src.spec.Name())
		}
	}
	src.total = n
	if memoOK && len(memo) == n {
		src.memo = memo // every run walked: the next walk reads its IDs here
	}
	return nil
}

// Close releases the task or params file (and the spool of a stream).
func (src *Source) Close() { src.input.Close() }
