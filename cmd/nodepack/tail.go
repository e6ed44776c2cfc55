package main

import (
	"context"
	"io"

	"github.com/nodepack/nodepack/runner/results"
	"github.com/spf13/pflag"
)

const tailUsage = `Usage: nodepack tail [-n N] [--failed] [--running] DIR [RUN]...

Follows the logs of runs of the sweep in the output directory DIR, as
tail -f would follow the right files: each line of a run's stdout and
stderr, prefixed with where the run came from ([tasks.txt:12], or its id),
from its last N lines until the runs end. RUN is a run's id, a prefix of
one, or its origin (tasks.txt:12, as the failure lines print it);
--failed adds the failed runs, --running the running ones; with none of
them, the running runs. A run that ended shows its last lines and is done. What a terminal would
act on in the runs' lines (escape sequences, carriage returns, other
control characters) is shown escaped, as \x1b; --raw writes the bytes.
Exit status 0, or 2 when DIR holds no ledger or nothing matches.

Examples:
  nodepack tail nodepack-out tasks.txt:2`

func runTail(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("tail", pflag.ContinueOnError)
	var o results.FollowOptions
	fs.BoolVar(&o.Failed, "failed", false, "follow the failed runs")
	fs.BoolVar(&o.Running, "running", false, "follow the running runs (the default when no run is named)")
	fs.IntVarP(&o.Lines, "lines", "n", 10, "show the last `N` lines each log has first")
	raw := fs.Bool("raw", false, "write the runs' bytes as they are, control characters and escape sequences included (by default they are shown escaped, \\x1b)")
	if code, ok := parseFlags(ctx, fs, tailUsage, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() < 1 {
		return usageErrorf(stderr, "tail", "want DIR and, optionally, runs")
	}
	if o.Lines == 0 {
		o.Lines = -1 // -n 0: none of what was written before
	}
	o.Runs = fs.Args()[1:]
	if !*raw {
		o.Line = termSafe
	}
	dir, ok := outputArg(stderr, "tail", fs.Arg(0))
	if !ok {
		return exitUsage
	}
	if err := results.Follow(ctx, dir, o, stdout); err != nil {
		return usageErrorf(stderr, "tail", "%v", err)
	}
	return exitOK
}
