package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"path/filepath"
	"strings"

	"github.com/nodepack/nodepack/resources"
	"github.com/nodepack/nodepack/runner"
	"github.com/spf13/pflag"
)

// sourceOptions say where the runs come from: one task file (or - for
// standard input) as the only argument, or, with --sweep, --grid or
// --params, the command after --. They also repeat (--reps) and shard
// (--shard) the runs. Call check (or prepare, scan and chooseShard) before
// open or printDryRun, and close when done. Not safe for concurrent use.
type sourceOptions struct {
	DryRun       bool   // list the runs, start nothing
	JSON         bool   // with DryRun: a nodepack.runs/v1 document
	Sweep        bool   // expand the command's Hydra overrides
	Grid         string // YAML grid file
	Params       string // JSONL params file, - for standard input
	Reps         int    // runs of every entry
	ShardSpec    string // I/N, auto or none
	RunsPerShard int    // shard size for plan, and for auto where the array size is unknown

	// OutputDir is the run's output directory, for {run_dir}.
	OutputDir string
	// CheckShell, with a task file, checks that bash can parse every line.
	CheckShell bool

	// Set by prepare.
	Definition runner.Definition // Shards is set by chooseShard
	Notes      []string          // remarks for stderr, one line each
	// Set by scan.
	Total int // runs in all shards
	// Set by chooseShard.
	Shard     runner.Shard // this invocation's shard; Count is 1 when the runs are not sharded
	ShardFrom string       // what chose Shard ("--shard 1/4", "SLURM_ARRAY_TASK_ID=1 of 0-3"); empty when not sharded

	getenv  func(string) (string, bool) // nil means os.LookupEnv
	args    []string
	checked bool
	input   *input // the task or params file
	sweep   *runner.Sweep
	grid    *runner.Grid
}

func (o *sourceOptions) AddFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.DryRun, "dry-run", false, "list the runs (id, index, shard, added env, argv) and start nothing")
	fs.BoolVar(&o.JSON, "json", false, "with --dry-run: print the runs as a JSON document (schema nodepack.runs/v1)")
	o.addSourceFlags(fs)
	fs.StringVar(&o.ShardSpec, "shard", "auto", "run only shard `I/N`: the runs whose index is I mod N; auto takes it from the array index and task rank (SLURM_ARRAY_TASK_ID, SLURM_PROCID, SGE_TASK_ID, PBS_ARRAY_INDEX, LSB_JOBINDEX); none runs all")
}

// addSourceFlags adds the flags that say what the runs are; plan has them
// too.
func (o *sourceOptions) addSourceFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.Sweep, "sweep", false, "run the command after -- once per combination of its Hydra sweep overrides (key=a,b key=choice(a,b) key=range(0,10,2))")
	fs.StringVar(&o.Grid, "grid", "", "run the command after -- once per combination of the YAML grid `FILE`, appending --key=value")
	fs.StringVar(&o.Params, "params", "", "run the command after -- once per JSON object (one a line) of `FILE` (- for standard input), appending --key=value")
	fs.IntVar(&o.Reps, "reps", 1, "run everything `N` times (NODEPACK_REP and {rep} say which)")
	fs.IntVar(&o.RunsPerShard, "runs-per-shard", 0, "`M` runs per array task: plan prints the array to submit; --shard auto uses it where the scheduler does not tell the array size (PBS, LSF)")
}

func (o *sourceOptions) kind() string {
	switch {
	case o.Sweep:
		return runner.KindSweep
	case o.Grid != "":
		return runner.KindGrid
	case o.Params != "":
		return runner.KindParams
	}
	return runner.KindTasks
}

// name names the source in messages and documents.
func (o *sourceOptions) name() string {
	switch o.kind() {
	case runner.KindSweep:
		return "sweep"
	case runner.KindGrid:
		return o.Grid
	case runner.KindParams:
		return o.Params
	}
	if len(o.args) == 1 {
		return o.args[0]
	}
	return ""
}

// check validates every run before anything starts, so bad input is
// reported as file:line[:col] and nothing runs, and chooses the shard. It
// returns the number of runs of this shard.
func (o *sourceOptions) check(args []string) (int, error) {
	if err := o.prepare(args); err != nil {
		return 0, err
	}
	if err := o.scan(nil); err != nil {
		return 0, err
	}
	if err := o.chooseShard(o.Total); err != nil {
		return 0, err
	}
	return o.Shard.Size(o.Total), nil
}

// prepare checks the flags and arguments, parses a sweep or a grid, opens
// a task or params file (a stream is spooled: see input), and sets
// Definition and Notes.
func (o *sourceOptions) prepare(args []string) error {
	o.args, o.Total = args, 0
	if o.JSON && !o.DryRun {
		return errors.New("--json goes with --dry-run")
	}
	if o.Reps < 1 {
		return fmt.Errorf("--reps %d: want at least 1", o.Reps)
	}
	if o.RunsPerShard < 0 {
		return fmt.Errorf("--runs-per-shard %d: must not be negative", o.RunsPerShard)
	}
	n := 0
	for _, set := range []bool{o.Sweep, o.Grid != "", o.Params != ""} {
		if set {
			n++
		}
	}
	if n > 1 {
		return errors.New("--sweep, --grid and --params exclude each other")
	}
	kind := o.kind()
	if kind == runner.KindTasks {
		if len(args) != 1 {
			return fmt.Errorf("want one TASKFILE (or - for standard input), got %d arguments", len(args))
		}
	} else if len(args) == 0 {
		return fmt.Errorf("--%s needs the command after --, e.g. --%s -- python train.py", kind, kind)
	}
	o.Definition = runner.Definition{Kind: kind, Reps: o.Reps}
	opts := o.sourceOptions()
	if opts.OutputDir == "" {
		opts.OutputDir = "OUTPUT" // to check {run_dir}: the directory may be chosen later
	}
	switch kind {
	case runner.KindTasks:
		in, err := openInput(args[0])
		if err != nil {
			return err
		}
		o.input, o.Definition.Source = in, sourceName(args[0])
	case runner.KindSweep:
		args = o.dropMultirun(args)
		s, err := runner.ParseSweep(args)
		if err != nil {
			return err
		}
		if _, err := s.Runs(opts); err != nil {
			return err
		}
		o.sweep, o.args, o.Definition.Command = s, args, s.Template()
	case runner.KindGrid:
		in, err := openInput(o.Grid)
		if err != nil {
			return fmt.Errorf("--grid: %w", err)
		}
		g, err := runner.ReadGrid(in.reader(), o.Grid)
		in.Close()
		if err != nil {
			return err
		}
		if _, err := g.Runs(args, opts); err != nil {
			return fmt.Errorf("%s: %w", o.Grid, err)
		}
		o.grid, o.Definition.Source, o.Definition.Command = g, sourceName(o.Grid), args
	case runner.KindParams:
		if _, err := runner.ReadParams(strings.NewReader(""), o.Params, args, opts); err != nil {
			return fmt.Errorf("%s: %w", o.Params, err)
		}
		in, err := openInput(o.Params)
		if err != nil {
			return fmt.Errorf("--params: %w", err)
		}
		o.input, o.Definition.Source, o.Definition.Command = in, sourceName(o.Params), args
	}
	return nil
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
func (o *sourceOptions) dropMultirun(args []string) []string {
	python := len(args) > 0 && strings.HasPrefix(filepath.Base(args[0]), "python")
	var kept []string
	for i, a := range args {
		if i > 0 && (a == "--multirun" || a == "-m" && !(i == 1 && python)) {
			o.Notes = append(o.Notes, fmt.Sprintf("dropped %s from the command: nodepack runs the sweep itself, and with it every run would start a Hydra sweep of its own", a))
			continue
		}
		kept = append(kept, a)
	}
	return kept
}

// sourceOptions returns the runner's options for the chosen reps and
// shard.
func (o *sourceOptions) sourceOptions() runner.SourceOptions {
	opts := runner.SourceOptions{Reps: o.Reps, Shard: o.Shard}
	if o.OutputDir != "" {
		opts.OutputDir, _ = filepath.Abs(o.OutputDir)
	}
	return opts
}

// runs streams the runs of the source with the given options.
func (o *sourceOptions) runs(opts runner.SourceOptions) iter.Seq2[runner.Run, error] {
	fail := func(err error) iter.Seq2[runner.Run, error] {
		return func(yield func(runner.Run, error) bool) { yield(runner.Run{}, err) }
	}
	var runs iter.Seq2[runner.Run, error]
	var err error
	switch o.kind() {
	case runner.KindSweep:
		runs, err = o.sweep.Runs(opts)
	case runner.KindGrid:
		runs, err = o.grid.Runs(o.args, opts)
	case runner.KindParams:
		runs, err = runner.ReadParams(o.input.reader(), o.input.label, o.args, opts)
	default:
		runs = runner.Expand(runner.ReadTaskFile(o.input.reader(), o.input.label), opts)
	}
	if err != nil {
		return fail(err)
	}
	return runs
}

// scan reads every run of every shard once, before anything starts: a
// task or params file is checked line by line (with CheckShell, every
// task line must parse as bash), and Total is counted. A sweep or a grid
// was checked when parsed; it is walked only when past is not nil. past,
// if not nil, is called with every run's ID and index, so a caller can
// tell which of the runs it knows are still part of the sweep.
func (o *sourceOptions) scan(past func(id string, index int)) error {
	kind := o.kind()
	perRep := 0
	switch kind {
	case runner.KindSweep:
		perRep = o.sweep.Len()
	case runner.KindGrid:
		perRep = o.grid.Len()
	}
	if perRep > 0 && perRep > maxTotalRuns/o.Reps {
		return fmt.Errorf("--reps %d: %d × %d runs, more than %d", o.Reps, perRep, o.Reps, maxTotalRuns)
	}
	if perRep > 0 && past == nil {
		o.Total = perRep * o.Reps
		return nil
	}
	opts := o.sourceOptions()
	opts.Shard = runner.Shard{}
	var shell *shellChecker
	if kind == runner.KindTasks && o.CheckShell {
		shell = newShellChecker()
	}
	n := 0
	for run, err := range o.runs(opts) {
		if err != nil {
			return err
		}
		if shell != nil && run.Rep == 0 {
			if err := shell.check(run.Args[2]); err != nil {
				return fmt.Errorf("%s: %w", run.Origin, err)
			}
		}
		if past != nil {
			past(run.ID, run.Index)
		}
		n++
		if n > maxTotalRuns {
			return fmt.Errorf("%s: more than %d runs", o.name(), maxTotalRuns)
		}
	}
	if n == 0 {
		if kind == runner.KindTasks {
			return fmt.Errorf("%s: no commands", o.input.label)
		}
		return fmt.Errorf("%s: no runs", o.name())
	}
	o.Total = n
	return nil
}

// maxTotalRuns bounds a sweep, reps included, so that a typo is an input
// error rather than a hang.
const maxTotalRuns = 1_000_000_000

// close releases the task or params file.
func (o *sourceOptions) close() { o.input.Close() }

// chooseShard sets Shard and ShardFrom from --shard.
func (o *sourceOptions) chooseShard(total int) error {
	o.Shard, o.ShardFrom = runner.Shard{Index: 0, Count: 1}, ""
	switch o.ShardSpec {
	case "none":
		return nil
	case "", "auto":
		getenv := o.getenv
		if getenv == nil {
			getenv = os.LookupEnv
		}
		sh, from, err := autoShard(resources.DetectScheduler(getenv), total, o.RunsPerShard)
		if err != nil {
			return fmt.Errorf("--shard auto: %w", err)
		}
		o.Shard, o.ShardFrom = sh, from
		if from != "" {
			o.Notes = append(o.Notes, fmt.Sprintf("shard %s from %s: runs %s; --shard none runs them all", sh, from, shardRuns(sh)))
		}
	default:
		sh, err := runner.ParseShard(o.ShardSpec)
		if err != nil {
			return fmt.Errorf("--shard: %w", err)
		}
		o.Shard, o.ShardFrom = sh, "--shard "+o.ShardSpec
	}
	if m := o.RunsPerShard; m > 0 && total > 0 && o.Shard.Count > 1 {
		if need := (total + m - 1) / m; need != o.Shard.Count {
			o.Notes = append(o.Notes, fmt.Sprintf("%d shards for %d runs, not %d as --runs-per-shard %d would give: each shard runs about %d",
				o.Shard.Count, total, need, m, (total+o.Shard.Count-1)/o.Shard.Count))
		}
	}
	return nil
}

// shardRuns describes the positions of a shard: "1, 4, 7, …".
func shardRuns(s runner.Shard) string {
	return fmt.Sprintf("%d, %d, %d, …", s.Index, s.Index+s.Count, s.Index+2*s.Count)
}

// autoShard maps the scheduler's array index and task rank to a shard:
// array tasks are numbered 0 … N-1 in array order whatever the array's
// first index and step (--array=1-9:2 gives shards 0 … 4), and the tasks of
// a multi-task step (srun -n K) split each array task's shard further, as
// clusterduck does: shard = array position × K + rank, of N × K. Outside an
// array job and a multi-task step it is 0/1 and from is empty.
func autoShard(s resources.Scheduler, total, runsPerShard int) (sh runner.Shard, from string, err error) {
	sh = runner.Shard{Index: 0, Count: 1}
	var parts []string
	if a := s.Array; a != nil {
		pos, count, desc, err := arrayPosition(s.Kind, *a, total, runsPerShard)
		if err != nil {
			return sh, "", err
		}
		sh = runner.Shard{Index: pos, Count: count}
		parts = append(parts, desc)
	}
	if t := s.Tasks; t != nil && t.Count > 1 {
		if t.Rank < 0 || t.Rank >= t.Count {
			return sh, "", fmt.Errorf("SLURM_PROCID=%d is not below the step's %d tasks", t.Rank, t.Count)
		}
		sh = runner.Shard{Index: sh.Index*t.Count + t.Rank, Count: sh.Count * t.Count}
		parts = append(parts, fmt.Sprintf("SLURM_PROCID=%d of %d tasks", t.Rank, t.Count))
	}
	return sh, strings.Join(parts, " and "), nil
}

// arrayIndexVar names the variable that holds the array index.
var arrayIndexVar = map[string]string{
	resources.SchedulerSlurm: "SLURM_ARRAY_TASK_ID",
	resources.SchedulerSGE:   "SGE_TASK_ID",
	resources.SchedulerPBS:   "PBS_ARRAY_INDEX",
	resources.SchedulerLSF:   "LSB_JOBINDEX",
}

// arrayFirstIndex is where arrays start when the scheduler does not say:
// PBS arrays as nodepack plan prints them (qsub -J 0-K), LSF's from 1.
var arrayFirstIndex = map[string]int{resources.SchedulerPBS: 0, resources.SchedulerLSF: 1}

// arrayPosition returns the array task's position 0 … count-1 and the
// array's task count. Slurm and Grid Engine tell the array's range; PBS
// and LSF do not, and then count is the shards --runs-per-shard gives.
func arrayPosition(kind string, a resources.Array, total, runsPerShard int) (pos, count int, desc string, err error) {
	v := arrayIndexVar[kind]
	if a.Step <= 0 {
		return 0, 0, "", fmt.Errorf("%s=%d: array step %d is not positive", v, a.Index, a.Step)
	}
	if a.Count > 0 {
		if n := (a.Max-a.Min)/a.Step + 1; a.Max < a.Min || n != a.Count {
			return 0, 0, "", fmt.Errorf("%s=%d: the array %d-%d:%d has %d tasks, not the %d the scheduler counts (a list such as 1,5,7 has no order to shard by): use --shard I/N",
				v, a.Index, a.Min, a.Max, a.Step, max(n, 0), a.Count)
		}
		if a.Index < a.Min || a.Index > a.Max || (a.Index-a.Min)%a.Step != 0 {
			return 0, 0, "", fmt.Errorf("%s=%d is not in the array %d-%d:%d", v, a.Index, a.Min, a.Max, a.Step)
		}
		return (a.Index - a.Min) / a.Step, a.Count, fmt.Sprintf("%s=%d of %d-%d", v, a.Index, a.Min, a.Max), nil
	}
	if runsPerShard <= 0 {
		return 0, 0, "", fmt.Errorf("%s=%d: the scheduler does not tell the array's size: give --runs-per-shard M (and submit the array nodepack plan --runs-per-shard M prints) or --shard I/N", v, a.Index)
	}
	if total < 0 {
		return 0, 0, "", fmt.Errorf("%s=%d: --runs-per-shard needs a source whose size is known, not standard input: use --shard I/N", v, a.Index)
	}
	first, ok := arrayFirstIndex[kind]
	if !ok {
		first = a.Min
	}
	count = max((total+runsPerShard-1)/runsPerShard, 1)
	pos = (a.Index - first) / a.Step
	if a.Index < first || (a.Index-first)%a.Step != 0 || pos >= count {
		return 0, 0, "", fmt.Errorf("%s=%d is not one of the %d array tasks for %d runs at %d per shard (%s)", v, a.Index, count, total, runsPerShard, submitLine(count))
	}
	return pos, count, fmt.Sprintf("%s=%d of %d tasks (--runs-per-shard %d)", v, a.Index, count, runsPerShard), nil
}

// submitLine says how to submit an array of n tasks to each scheduler.
func submitLine(n int) string {
	return fmt.Sprintf("sbatch --array=0-%d, qsub -t 1-%d (Grid Engine), qsub -J 0-%d (PBS), bsub -J 'name[1-%d]' (LSF)", n-1, n, n-1, n)
}

// open streams the runs of this shard.
func (o *sourceOptions) open() iter.Seq2[runner.Run, error] {
	return o.runs(o.sourceOptions())
}

// printDryRun lists the runs of this shard and returns the exit code:
// one line per run (id, index, shard, added env, argv) or, with --json, a
// nodepack.runs/v1 document.
func (o *sourceOptions) printDryRun(stdout, stderr io.Writer) int {
	runs := o.open()
	w := bufio.NewWriter(stdout)
	defer w.Flush()
	if o.JSON {
		head, _ := json.Marshal(runsHeader{Schema: runsSchema, Source: sourceDoc{Kind: o.kind(), Name: o.name()},
			Total: o.Total, Reps: o.Reps, Shard: shardDoc{Index: o.Shard.Index, Count: max(o.Shard.Count, 1), From: o.ShardFrom},
			Output: o.OutputDir})
		// The runs stream: the document is the header's fields plus "runs".
		w.Write(head[:len(head)-1])
		w.WriteString(",\"runs\":[")
	}
	n := 0
	for run, err := range runs {
		if err != nil {
			w.Flush()
			fmt.Fprintf(stderr, "nodepack run: %v\n", err)
			return exitUsage
		}
		if o.JSON {
			if n > 0 {
				w.WriteByte(',')
			}
			b, _ := json.Marshal(runDoc{ID: run.ID, Index: run.Index, Rep: run.Rep, Shard: o.Shard.Index,
				Argv: run.Args, Env: orEmptyStrings(run.Env), Origin: run.Origin, Name: run.Name, Params: run.Params,
				Dir: runner.RunDir(o.OutputDir, run)})
			w.WriteString("\n  ")
			w.Write(b)
		} else {
			fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%q\n", run.ID, run.Index, o.Shard, strings.Join(run.Env, " "), run.Args)
		}
		n++
	}
	if o.JSON {
		w.WriteString("\n]}\n")
	}
	if err := w.Flush(); err != nil {
		fmt.Fprintf(stderr, "nodepack: %v\n", err)
		return exitFailed
	}
	fmt.Fprintf(stderr, "nodepack run: dry run: %s of shard %s (%d in all shards), output %s; nothing started\n", countWord(n, "run"), o.Shard, o.Total, o.OutputDir)
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
}
