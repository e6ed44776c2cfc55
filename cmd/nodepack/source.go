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
	"strconv"
	"strings"

	"github.com/nodepack/nodepack/resources"
	"github.com/nodepack/nodepack/runner"
	"github.com/spf13/pflag"
)

// Source kinds, as the dry-run document names them.
const (
	sourceTasks  = "tasks"
	sourceSweep  = "sweep"
	sourceGrid   = "grid"
	sourceParams = "params"
)

// sourceOptions say where the runs come from: one task file (or - for
// standard input) as the only argument, or, with --sweep, --grid or
// --params, the command after --. They also repeat (--reps) and shard
// (--shard) the runs. Call check before open or printDryRun; check sets
// Shard, ShardFrom, Total and Notes. Not safe for concurrent use.
type sourceOptions struct {
	DryRun       bool   // list the runs, start nothing
	JSON         bool   // with DryRun: a nodepack.runs/v1 document
	Sweep        bool   // expand the command's Hydra overrides
	Grid         string // YAML grid file
	Params       string // JSONL params file, - for standard input
	Reps         int    // runs of every entry
	ShardSpec    string // I/N, auto or none
	RunsPerShard int    // shard size for plan, and for auto where the array size is unknown

	// OutputDir is the run's --output, for {run_dir}. Empty means the value
	// of the "output" flag of the FlagSet given to AddFlags, if any.
	OutputDir string

	// Set by check.
	Shard     runner.Shard // this invocation's shard; Count is 1 when the runs are not sharded
	ShardFrom string       // what chose Shard ("--shard 1/4", "SLURM_ARRAY_TASK_ID=1 of 0-3"); empty when not sharded
	Total     int          // runs in all shards; -1 when unknown (standard input)
	Notes     []string     // remarks for stderr, one line each

	getenv  func(string) (string, bool) // nil means os.LookupEnv
	flags   *pflag.FlagSet
	checked bool
	sweep   *runner.Sweep
	grid    *runner.Grid
}

func (o *sourceOptions) AddFlags(fs *pflag.FlagSet) {
	o.flags = fs
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
		return sourceSweep
	case o.Grid != "":
		return sourceGrid
	case o.Params != "":
		return sourceParams
	}
	return sourceTasks
}

// name names the source in messages and documents.
func (o *sourceOptions) name(args []string) string {
	switch o.kind() {
	case sourceSweep:
		return "sweep"
	case sourceGrid:
		return o.Grid
	case sourceParams:
		return o.Params
	}
	if len(args) == 1 {
		return args[0]
	}
	return ""
}

// check validates every run before anything starts, so bad input is
// reported as file:line[:col] and nothing runs, and chooses the shard. It
// returns the number of runs of this shard, or -1 when that cannot be
// known up front (standard input).
func (o *sourceOptions) check(args []string) (int, error) {
	if o.JSON && !o.DryRun {
		return 0, errors.New("--json goes with --dry-run")
	}
	total, err := o.prepare(args)
	if err != nil {
		return 0, err
	}
	if err := o.chooseShard(total); err != nil {
		return 0, err
	}
	o.checked = true
	if total < 0 {
		return -1, nil
	}
	return o.Shard.Size(total), nil
}

// prepare parses and validates the source and returns its number of runs
// in all shards (-1 when unknown); it sets Total.
func (o *sourceOptions) prepare(args []string) (int, error) {
	o.Total = -1
	if o.Reps < 1 {
		return 0, fmt.Errorf("--reps %d: want at least 1", o.Reps)
	}
	if o.RunsPerShard < 0 {
		return 0, fmt.Errorf("--runs-per-shard %d: must not be negative", o.RunsPerShard)
	}
	n := 0
	for _, set := range []bool{o.Sweep, o.Grid != "", o.Params != ""} {
		if set {
			n++
		}
	}
	if n > 1 {
		return 0, errors.New("--sweep, --grid and --params exclude each other")
	}
	kind := o.kind()
	if kind == sourceTasks {
		if len(args) != 1 {
			return 0, fmt.Errorf("want one TASKFILE (or - for standard input), got %d arguments", len(args))
		}
	} else if len(args) == 0 {
		return 0, fmt.Errorf("--%s needs the command after --, e.g. --%s -- python train.py", kind, kind)
	}
	opts := o.sourceOptions()
	if opts.RunDir == nil {
		// The output directory may be chosen after check (the default
		// depends on the job); validating {run_dir} needs no real path.
		opts.RunDir = func(id string) string { return filepath.Join("OUTPUT", "runs", id) }
	}
	entries := -1
	switch kind {
	case sourceTasks:
		var err error
		if entries, err = checkTaskFile(args[0]); err != nil {
			return 0, err
		}
	case sourceSweep:
		s, err := runner.ParseSweep(args)
		if err != nil {
			return 0, err
		}
		if _, err := s.Runs(opts); err != nil {
			return 0, err
		}
		o.sweep, entries = s, s.Len()
	case sourceGrid:
		f, err := os.Open(o.Grid)
		if err != nil {
			return 0, fmt.Errorf("--grid: %w", err)
		}
		g, err := runner.ReadGrid(f, o.Grid)
		f.Close()
		if err != nil {
			return 0, err
		}
		if _, err := g.Runs(args, opts); err != nil {
			return 0, fmt.Errorf("%s: %w", o.Grid, err)
		}
		o.grid, entries = g, g.Len()
	case sourceParams:
		if o.Params == "-" {
			// Standard input cannot be read twice: it is checked as it
			// streams, and its size is unknown.
			if _, err := runner.ReadParams(strings.NewReader(""), "<stdin>", args, opts); err != nil {
				return 0, err
			}
			return -1, nil
		}
		var err error
		if entries, err = checkParams(o.Params, args, opts); err != nil {
			return 0, err
		}
	}
	if entries < 0 {
		return -1, nil
	}
	if entries > (1<<53)/o.Reps {
		return 0, fmt.Errorf("--reps %d: too many runs", o.Reps)
	}
	o.Total = entries * o.Reps
	return o.Total, nil
}

// sourceOptions returns the runner's options for the chosen reps and
// shard.
func (o *sourceOptions) sourceOptions() runner.SourceOptions {
	opts := runner.SourceOptions{Reps: o.Reps, Shard: o.Shard}
	out := o.OutputDir
	if out == "" && o.flags != nil {
		if f := o.flags.Lookup("output"); f != nil {
			out = f.Value.String()
		}
	}
	if out != "" {
		if abs, err := filepath.Abs(out); err == nil {
			out = abs
		}
		// The runner's run directory, NODEPACK_RUN_DIR.
		opts.RunDir = func(id string) string { return filepath.Join(out, "runs", id) }
	}
	return opts
}

// checkParams reads the whole params file once, rendering every run, and
// returns the number of lines with an object.
func checkParams(name string, command []string, opts runner.SourceOptions) (int, error) {
	f, err := os.Open(name)
	if err != nil {
		return 0, fmt.Errorf("--params: %w", err)
	}
	defer f.Close()
	opts.Reps, opts.Shard = 1, runner.Shard{}
	runs, err := runner.ReadParams(bufio.NewReaderSize(f, 1<<20), name, command, opts)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	n := 0
	for _, err := range runs {
		if err != nil {
			return 0, err
		}
		n++
	}
	if n == 0 {
		return 0, fmt.Errorf("%s: no runs", name)
	}
	return n, nil
}

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

// open streams the runs of this shard; the returned function releases what
// open holds.
func (o *sourceOptions) open(args []string) (iter.Seq2[runner.Run, error], func()) {
	fail := func(err error) (iter.Seq2[runner.Run, error], func()) {
		return func(yield func(runner.Run, error) bool) { yield(runner.Run{}, err) }, func() {}
	}
	if !o.checked {
		if _, err := o.check(args); err != nil {
			return fail(err)
		}
	}
	opts := o.sourceOptions()
	switch o.kind() {
	case sourceSweep:
		runs, err := o.sweep.Runs(opts)
		if err != nil {
			return fail(err)
		}
		return runs, func() {}
	case sourceGrid:
		runs, err := o.grid.Runs(args, opts)
		if err != nil {
			return fail(err)
		}
		return runs, func() {}
	case sourceParams:
		r, name, closeFile := io.Reader(os.Stdin), "<stdin>", func() {}
		if o.Params != "-" {
			f, err := os.Open(o.Params)
			if err != nil {
				return fail(fmt.Errorf("--params: %w", err))
			}
			r, name, closeFile = bufio.NewReaderSize(f, 1<<20), o.Params, func() { f.Close() }
		}
		runs, err := runner.ReadParams(r, name, args, opts)
		if err != nil {
			closeFile()
			return fail(err)
		}
		return runs, closeFile
	}
	runs, closeFile := openTaskFile(args[0])
	return runner.Expand(runs, opts), closeFile
}

// printDryRun lists the runs of this shard and returns the exit code:
// one line per run (id, index, shard, added env, argv) or, with --json, a
// nodepack.runs/v1 document.
func (o *sourceOptions) printDryRun(args []string, stdout, stderr io.Writer) int {
	runs, closeRuns := o.open(args)
	defer closeRuns()
	w := bufio.NewWriter(stdout)
	defer w.Flush()
	if o.JSON {
		head, _ := json.Marshal(runsHeader{Schema: runsSchema, Source: sourceDoc{Kind: o.kind(), Name: o.name(args)},
			Total: o.Total, Reps: o.Reps, Shard: shardDoc{Index: o.Shard.Index, Count: max(o.Shard.Count, 1), From: o.ShardFrom}})
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
				Argv: run.Args, Env: orEmptyStrings(run.Env), Origin: run.Origin})
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
	fmt.Fprintf(stderr, "nodepack run: dry run: %d runs of shard %s%s; nothing started\n", n, o.Shard, totalNote(o.Total))
	return exitOK
}

func totalNote(total int) string {
	if total < 0 {
		return ""
	}
	return " (" + strconv.Itoa(total) + " in all shards)"
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
	Total  int       `json:"total"` // runs in all shards; -1 when unknown
	Reps   int       `json:"reps"`
	Shard  shardDoc  `json:"shard"`
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
	ID     string   `json:"id"`
	Index  int      `json:"index"` // position among the runs of all shards (NODEPACK_RUN_INDEX)
	Rep    int      `json:"rep"`
	Shard  int      `json:"shard"`
	Argv   []string `json:"argv"`
	Env    []string `json:"env"` // added to the run's environment
	Origin string   `json:"origin"`
}

// checkTaskFile reads the whole task file once before anything starts, so
// a bad line is reported as file:line and nothing runs; it returns the
// number of runs. Standard input cannot be read twice: it is checked as it
// streams, and its total is unknown (-1).
func checkTaskFile(name string) (int, error) {
	if name == "-" {
		return -1, nil
	}
	f, err := os.Open(name)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n := 0
	for _, err := range runner.ReadTaskFile(bufio.NewReaderSize(f, 1<<20), name) {
		if err != nil {
			return 0, err
		}
		n++
	}
	if n == 0 {
		return 0, fmt.Errorf("%s: no commands", name)
	}
	return n, nil
}

// openTaskFile streams the runs of a task file (or standard input).
func openTaskFile(name string) (iter.Seq2[runner.Run, error], func()) {
	if name == "-" {
		return runner.ReadTaskFile(os.Stdin, "<stdin>"), func() {}
	}
	f, err := os.Open(name)
	if err != nil {
		return func(yield func(runner.Run, error) bool) { yield(runner.Run{}, err) }, func() {}
	}
	return runner.ReadTaskFile(bufio.NewReaderSize(f, 1<<20), name), func() { f.Close() }
}
