package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/nodepack/nodepack/cmd/internal/flagvalue"
	pagereport "github.com/nodepack/nodepack/runner/report"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/pflag"
	"golang.org/x/term"
)

const reportUsage = `Usage: nodepack report [-o FILE.html] [--metric NAME[:min|max]] [--metric NAME=REGEX]... DIR

Writes the sweep in the output directory DIR as one self-contained HTML
page (DIR/report.html unless -o says otherwise). First, which config won:
the best runs by a metric (--metric loss:min, or one the page chooses and
names: a validation loss, a loss, else the first metric the runs report),
with their parameters and their learning curves (the metric against its
step, read whole from their metrics files; hover any run elsewhere for
its own); for each parameter, the metric against its values (a scatter
for numbers, log-scaled where they span decades, a strip per value for
categories); and a parallel-coordinates view of every run's parameters
and metric. The page switches metric and direction itself, and its
address can name a view (report.html#metric=acc:max&sort=lr:desc&filter=adam).
Then how the node was used: a timeline with one lane
per GPU (or MIG device) and per CPU lane and one bar per attempt, coloured
by outcome and failure class (hover for the run, its parameters, exit and
duration; a dashed line links a retry to the attempt before); the share of
GPUs and CPUs in use over time; makespan, how busy the node was, time lost
to failed attempts, runs per state and failure class, the slowest and
fastest runs; and the table of every run (as nodepack status --runs gives
it), sortable and filterable, linking to each run's logs. The page loads
nothing from anywhere (no network request of any kind), so it opens on an
offline cluster, and after scp -r of DIR on a laptop. It only reads DIR.
Exit status 0, or 2 when DIR holds no ledger or a ledger is corrupt.

Examples:
  nodepack report nodepack-out
  nodepack report --metric loss:min results
  nodepack report -o /tmp/sweep.html --metric 'loss=loss=(\S+)' nodepack-out`

// reportMemoryLimit is the soft memory limit report runs under (unless
// GOMEMLIMIT says otherwise).
const reportMemoryLimit = 400 << 20

func runReport(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("report", pflag.ContinueOnError)
	out := fs.StringP("output", "o", "", "write the page to `FILE` (default DIR/report.html)")
	var metricFlags []string
	fs.StringArrayVar(&metricFlags, "metric", nil, "`NAME[:min|max]`: rank the runs by that metric, lowest or highest first (default: a validation loss, a loss, else the first metric, as its name suggests); NAME=REGEX: a per-step metric from each run's stdout (repeatable)")
	if code, ok := parseFlags(ctx, fs, reportUsage, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() != 1 {
		return usageErrorf(stderr, "report", "want one DIR, got %d arguments", fs.NArg())
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		// The report holds a few hundred bytes a run and makes garbage of
		// a kilobyte a record: a soft limit has the collector keep a
		// million runs under half a gigabyte rather than twice what they
		// hold.
		defer debug.SetMemoryLimit(debug.SetMemoryLimit(reportMemoryLimit))
	}
	dir, ok := outputArg(stderr, "report", fs.Arg(0))
	if !ok {
		return exitUsage
	}
	var opts pagereport.Options
	var patterns []string
	for _, f := range metricFlags {
		if strings.Contains(f, "=") {
			patterns = append(patterns, f)
			continue
		}
		if opts.Rank != "" {
			return usageErrorf(stderr, "report", "--metric %s and --metric %s: the page ranks the runs by one metric", opts.Rank, f)
		}
		opts.Rank = f
	}
	var err error
	if opts.Metrics, err = flagvalue.MetricPatterns(patterns); err != nil {
		return usageErrorf(stderr, "report", "--%v", err)
	}
	if *out == "" {
		*out = filepath.Join(dir, "report.html")
	}
	if f, ok := terminalOf(stderr); ok && term.IsTerminal(int(f.Fd())) {
		var bar *progressbar.ProgressBar
		opts.Progress = func(done, total int64) {
			if bar == nil {
				bar = progressbar.NewOptions64(total, progressbar.OptionSetWriter(stderr), progressbar.OptionSetDescription("reading the ledgers"),
					progressbar.OptionShowBytes(true), progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
			}
			bar.Set64(done)
		}
	}
	sum, err := pagereport.WriteFile(*out, dir, opts)
	if err != nil {
		return usageErrorf(stderr, "report", "%v", err)
	}
	size := fmt.Sprintf("%.1f MB", float64(sum.Bytes)/1e6)
	if sum.Bytes < 1e6 {
		size = fmt.Sprintf("%.0f kB", float64(sum.Bytes)/1e3)
	}
	fmt.Fprintf(stderr, "nodepack report: %s: %s, %s, %s\n", termSafe(*out), countWord(sum.Runs, "run"), countWord(sum.Attempts, "attempt"), size)
	return exitOK
}
