package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/nodepack/nodepack/cmd/internal/clidoc"
	"github.com/nodepack/nodepack/cmd/internal/flagvalue"
	"github.com/nodepack/nodepack/runner/metrics"
	"github.com/nodepack/nodepack/runner/results"
	"github.com/nodepack/nodepack/runner/submit"
	"github.com/spf13/pflag"
	"golang.org/x/term"
)

const statusUsage = `Usage: nodepack status [--json] [--failed] [--watch [D]] DIR
       nodepack status --runs [--sort COLUMN[:min|max]] [--top N] [--format table|csv|json] [--metric NAME=REGEX]... DIR

Shows the progress of the sweep whose output directory is DIR, from its
ledgers (all shards together), while it runs or after: how many runs are
pending, running, succeeded, failed and interrupted; the running ones with
their lane, GPUs, CPUs and time so far; the failed ones with why they
failed (their class: cuda-oom, gpu-mem, host-oom, gpu-error, disk-full,
io-error, setup, not-found, timeout, signal or exit), exit code, attempts,
the last lines of their stderr and their log; the GPUs taken out of use after a
fault; and, while it runs, the throughput and an estimate of the time
left. --failed shows the failed runs only. A run the ledger shows running
whose nodepack is gone (checked when DIR's sweep runs on this host) is
shown as interrupted.

It only reads DIR, so it works from any shell that sees the file system (a
login node). Inside a batch job a sweep's default directory is
nodepack-JOBID-NAME-KEY (the array's id for a sharded array); DIR may be
nodepack-JOBID, or JOBID alone in the current directory, for the one
sweep that job ran (a job that ran several is exit 2, naming them). So may
the DIR of report, tail and retry.

For a sweep started with nodepack submit (DIR/submissions.jsonl), it
also asks the scheduler (squeue, qstat) and shows each submission's job
and its array tasks: pending, running, ended, and a task that left the
queue without an end record in its shard's ledger (died: its node went
down, or it was killed) or without a ledger (not started: its log in
DIR/jobs/ is named where there is one; none, it never ran); 'nodepack
resubmit DIR' submits what is left.

--json prints a nodepack.status/v1 document; its "counts" object always
holds pending, running, succeeded, failed and interrupted, its "classes"
object the failed runs per class.

Exit status, for scripts: 0 when no run of the sweep failed, 1 when some
did (as nodepack run would exit), 2 when DIR holds no ledger or a ledger is
corrupt; --runs exits 0 with any table. A reader that goes away
(| head -1) ends the output, not status: it exits as it would have, also
under set -o pipefail (not 141), and --watch stops.

--runs prints the results table instead: one row per run that started,
in input order. On a terminal it is a table for people: where the run
comes from, its parameters and its metrics first, then its state, time,
attempts, peak memory and id, durations and sizes for people, cut to the
terminal's width with a note naming the columns left out. Piped, or with
--format csv or json, it has every column: id, origin, each parameter,
state, failure class, attempts, the last attempt's start, end, duration
(in seconds, to the millisecond), exit code, signal, GPUs and CPUs, peak
memory and GPU memory, energy (energy_wh: its share of its GPUs' energy,
where they count it), the metrics, and the logs (relative to DIR). CSV
and JSON are for programs: they hold each value as the run gave it, a
control character too (the table shows them escaped).
--sort loss orders the runs by a metric (or a parameter, or duration_s),
lowest first for a loss, highest first for an accuracy, as the name
suggests (:min or :max says it), runs without a value last; --top 10 keeps
the first ten. On a terminal the metric it sorts by (else a loss, or the
first metric) is followed by its curve over the steps as a sparkline.

A run's metrics are the last values of what it appended to the file
$NODEPACK_METRICS names (one JSON object per line, {"step": 200, "loss":
0.41}), with its $NODEPACK_RUN_DIR/metrics.json on top; --metric
NAME=REGEX adds one from its stdout (the group named value, else the first
group). A parameter or metric named like a column gets a "param." or
"metric." prefix. CSV loads with pandas' read_csv as it is, except that a
text cell a spreadsheet would evaluate as a formula (it starts with =, +,
-, @, a tab or a carriage return and is not a number) gets a leading ',
so that opening the file runs nothing; --format json writes an array of
flat objects, values exact.

Examples:
  nodepack status nodepack-123456
  nodepack status --watch 10s nodepack-out
  nodepack status --failed nodepack-out
  nodepack status --json nodepack-out | jq .counts
  nodepack status --runs --sort loss --top 10 results
  nodepack status --runs --metric 'loss=loss[=:] *([0-9.eE+-]+)' nodepack-out > runs.csv`

func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("status", pflag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print a nodepack.status/v1 document; with --runs, the table as JSON (--format json)")
	failedOnly := fs.Bool("failed", false, "show the failed runs only: class, exit, attempts, stderr's last lines, log")
	watch := fs.Duration("watch", 0, "refresh every `D` until interrupted (--watch alone: 2s)")
	runs := fs.Bool("runs", false, "print a table of the runs, one row each: id, origin, each parameter, state, class, attempts, start, end, duration, exit, GPUs, CPUs, peak memory, metrics, logs")
	var ro runsOptions
	fs.StringVar(&ro.format, "format", "", "with --runs: table (the default on a terminal), csv (the default otherwise) or json (an array of flat objects)")
	clidoc.OfferChoices(fs, "format", "table", "csv", "json")
	fs.StringVar(&ro.sort, "sort", "", "with --runs: order the runs by `COLUMN[:min|max]`, a metric, a parameter or duration_s (default: input order; min or max as the metric's name suggests, so loss lowest first, accuracy highest first)")
	fs.IntVar(&ro.top, "top", 0, "with --runs: only the first `N` runs (after --sort)")
	var metrics []string
	fs.StringArrayVar(&metrics, "metric", nil, "with --runs: a metric `NAME=REGEX` from each run's stdout, its last value (the group named value, else the first), on top of what the run reported")
	fs.Lookup("watch").NoOptDefVal = "2s"
	if code, ok := parseFlags(ctx, fs, statusUsage, watchValue(args), stdout, stderr); !ok {
		return code
	}
	if fs.NArg() != 1 {
		return usageErrorf(stderr, "status", "want one DIR, got %d arguments", fs.NArg())
	}
	if *watch < 0 {
		return usageErrorf(stderr, "status", "--watch %v: must not be negative", *watch)
	}
	dir, ok := outputArg(stderr, "status", fs.Arg(0))
	if !ok {
		return exitUsage
	}
	if *runs {
		if *asJSON {
			// --json is JSON here too: the table as an array of objects.
			if ro.format != "" && ro.format != "json" {
				return usageErrorf(stderr, "status", "--json and --format %s: want one of them (--json is --format json)", ro.format)
			}
			ro.format = "json"
		}
		ro.dir, ro.metrics = dir, metrics
		return printRuns(stdout, stderr, ro)
	}
	clear := false
	if f, ok := terminalOf(stdout); ok && *watch > 0 && !*asJSON && term.IsTerminal(int(f.Fd())) {
		clear = true
	}
	for {
		doc, err := submit.Status(ctx, dir)
		if err != nil {
			return usageErrorf(stderr, "status", "%v", err)
		}
		if clear {
			fmt.Fprint(stdout, "\x1b[H\x1b[2J")
		}
		if *asJSON {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			enc.Encode(doc)
		} else if *failedOnly {
			printFailures(stdout, doc.Status)
		} else {
			printStatus(stdout, dir, doc)
		}
		if *watch == 0 {
			if doc.Counts.Failed > 0 {
				return exitFailed
			}
			return exitOK
		}
		select {
		case <-ctx.Done():
			return exitOK
		case <-time.After(*watch):
		}
		if !clear && !*asJSON {
			fmt.Fprintln(stdout)
		}
	}
}

// watchValue joins "--watch D" into "--watch=D": --watch alone means 2s,
// so pflag would take D for the directory. D joins when it reads as a
// duration and another argument is left for the directory.
func watchValue(args []string) []string {
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "--" {
			break
		}
		if args[i] != "--watch" {
			continue
		}
		if _, err := time.ParseDuration(args[i+1]); err != nil {
			continue
		}
		rest := 0
		for _, a := range append(slices.Clone(args[:i]), args[i+2:]...) {
			if !strings.HasPrefix(a, "-") {
				rest++
			}
		}
		if rest > 0 {
			joined := append(slices.Clone(args[:i]), "--watch="+args[i+1])
			return append(joined, args[i+2:]...)
		}
	}
	return args
}

// printStatus prints doc for a terminal, and how to submit again what a
// lost task left.
func printStatus(w io.Writer, dir string, doc *submit.Doc) {
	if doc.WriteText(w) {
		fmt.Fprintf(w, "  nodepack resubmit %s submits what is left\n", shellWord(dir))
	}
}

// printFailures is status --failed: the failed runs, what failed them,
// and what to do next.
func printFailures(w io.Writer, doc *results.Status) {
	doc.WriteFailures(w)
	for _, hint := range nextSteps(doc.Classes, doc.Dir) {
		fmt.Fprintln(w, termSafe(hint))
	}
}

// runsOptions are status --runs' flags.
type runsOptions struct {
	dir, format, sort string
	top               int
	metrics           []string
}

// streamRuns is status --runs as CSV or JSON, for pandas and jq:
// streamed, without holding the table (a million runs in the memory of a
// login node).
func streamRuns(stdout, stderr io.Writer, dir string, o results.TableOptions) int {
	info, err := results.WriteTable(stdout, dir, o)
	if err != nil {
		// Nothing is written before the columns are known: an error
		// reading the sweep is exit 2, one while writing exit 1.
		if !info.Started {
			if errors.Is(err, results.ErrNoColumn) {
				return usageErrorf(stderr, "status", "--sort: %v", err)
			}
			return usageErrorf(stderr, "status", "%v", err)
		}
		fmt.Fprintf(stderr, "nodepack status: %s\n", termSafe(err.Error()))
		return exitFailed
	}
	if judged := judgedOut(info.Pruned, info.Paused); judged != "" && info.Metric {
		fmt.Fprintf(stderr, "nodepack status: %s ranked by their %s when they were stopped, at their last rung, beside the finished runs' last\n", judged, termSafe(o.Sort))
	}
	return exitOK
}

// judgedOut names the judged-out runs whose values a ranking puts beside
// the finished runs'; "" for none.
func judgedOut(pruned, paused int) string {
	switch {
	case pruned+paused == 0:
		return ""
	case paused == 0:
		return countWord(pruned, "pruned run")
	case pruned == 0:
		return countWord(paused, "paused run")
	}
	return fmt.Sprintf("%d pruned and %d paused runs", pruned, paused)
}

// printRuns prints the results table of dir: for a person on a terminal,
// else as CSV or JSON.
func printRuns(stdout, stderr io.Writer, o runsOptions) int {
	patterns, err := flagvalue.MetricPatterns(o.metrics)
	if err != nil {
		return usageErrorf(stderr, "status", "--%v", err)
	}
	width := 0
	if f, ok := terminalOf(stdout); ok && term.IsTerminal(int(f.Fd())) {
		if w, _, err := term.GetSize(int(f.Fd())); err == nil {
			width = w
		}
		if o.format == "" {
			o.format = "table"
		}
	}
	switch o.format {
	case "":
		o.format = "csv"
	case "table", "csv", "json":
	default:
		return usageErrorf(stderr, "status", "--format %q: want table, csv or json", o.format)
	}
	if o.top < 0 {
		return usageErrorf(stderr, "status", "--top %d: must not be negative", o.top)
	}
	var order, column string
	var desc bool
	if o.sort != "" {
		var ok bool
		if column, desc, ok = metrics.ParseRank(o.sort); !ok {
			return usageErrorf(stderr, "status", "--sort %q: want COLUMN, COLUMN:min or COLUMN:max", o.sort)
		}
	}
	if o.format != "table" {
		return streamRuns(stdout, stderr, o.dir, results.TableOptions{Patterns: patterns, JSON: o.format == "json", Sort: column, Desc: desc, Top: o.top})
	}
	table, err := results.Read(o.dir, patterns)
	if err != nil {
		return usageErrorf(stderr, "status", "%v", err)
	}
	if o.sort != "" {
		if err := table.Sort(column, desc); err != nil {
			return usageErrorf(stderr, "status", "--sort: %v", err)
		}
		order = fmt.Sprintf("sorted by %s, %s first", column, map[bool]string{false: "lowest", true: "highest"}[desc])
		if pruned, paused := table.PrunedWith(column); slices.Contains(table.Metrics, column) && pruned+paused > 0 {
			order += "; " + judgedOut(pruned, paused) + fmt.Sprintf(" ranked by their %s when they were stopped, at their last rung, beside the finished runs' last", column)
		}
	}
	total := len(table.Rows)
	if o.top > 0 && o.top < total {
		table.Rows = table.Rows[:o.top]
	}
	curve := column
	if curve == "" {
		curve = table.DefaultMetric()
	}
	if cut := table.WriteText(stdout, width, curve); len(cut) > 0 {
		fmt.Fprintf(stdout, "(%d more columns, cut to the terminal's %d characters: %s; --format csv has them all)\n", len(cut), width, strings.Join(cut, ", "))
	}
	note := fmt.Sprintf("%d of %d runs", len(table.Rows), total)
	if len(table.Rows) == total {
		note = fmt.Sprintf("%d runs", total)
	}
	fmt.Fprintf(stdout, "(%s, %s)\n", note, cmp.Or(termSafe(order), "in input order"))
	return exitOK
}
