package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nodepack/nodepack/cmd/internal/clidoc"
	"github.com/nodepack/nodepack/cmd/internal/flagvalue"
	"github.com/nodepack/nodepack/runner/failure"
	"github.com/nodepack/nodepack/runner/ledger"
	"github.com/nodepack/nodepack/runner/results"
	"github.com/spf13/pflag"
)

const retryUsage = `Usage: nodepack retry [--class CLASS]… [--run ID]… DIR

Runs again the failed runs of the sweep in the output directory DIR — all
of them, or those of the given failure classes (cuda-oom, gpu-mem,
host-oom, gpu-error, disk-full, io-error, setup, not-found, timeout, signal, exit)
and run IDs — with the command recorded in DIR's ledger, from the
directory it ran in: nodepack run with its flags, --retry-failed and -o
DIR. Runs that
succeeded stay done, failed runs not chosen stay failed, and runs never
started or interrupted run as a resume runs them. nodepack status --failed
DIR lists the failed runs with their class. Exit status as nodepack run's;
0 with nothing to do.

Examples:
  nodepack retry --class cuda-oom flaky`

func runRetry(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("retry", pflag.ContinueOnError)
	var classes []failure.Class
	fs.Var(flagvalue.Classes(&classes), "class", "retry only the failed runs of failure class `CLASS` (repeatable)")
	clidoc.OfferChoices(fs, "class", classNames()...)
	runs := fs.StringArray("run", nil, "retry only the failed run `ID` (repeatable)")
	if code, ok := parseFlags(ctx, fs, retryUsage, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() != 1 {
		return usageErrorf(stderr, "retry", "want one DIR, got %d arguments", fs.NArg())
	}
	dir, ok := outputArg(stderr, "retry", fs.Arg(0))
	if !ok {
		return exitUsage
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return usageErrorf(stderr, "retry", "%v", err)
	}
	doc, err := results.ReadStatus(dir, time.Now())
	if err != nil {
		return usageErrorf(stderr, "retry", "%v", err)
	}
	for _, sh := range doc.Shards {
		if sh.State == results.ShardRunning {
			return usageErrorf(stderr, "retry", "%s: its nodepack (pid %d) still runs; retry once it has ended", sh.File, sh.PID)
		}
		if sh.Count > 1 {
			// One nodepack here would be another sweep than the array's
			// shards: each shard's own command must run again.
			return usageErrorf(stderr, "retry", "%s holds a sweep sharded %d ways: submit its array job again with --retry-failed (and --retry-class or --retry-run), or run each shard with --shard I/%d", dir, sh.Count, sh.Count)
		}
	}
	chosen := 0
	for _, r := range doc.Failures {
		if (len(classes) == 0 || slices.Contains(classes, failure.Class(r.Class))) && (len(*runs) == 0 || slices.Contains(*runs, r.ID)) {
			chosen++
		}
	}
	for _, id := range *runs {
		if !slices.ContainsFunc(doc.Failures, func(r results.RunStatus) bool { return r.ID == id }) {
			return usageErrorf(stderr, "retry", "run %s did not fail in %s (nodepack status --failed %s lists those that did)", id, dir, fs.Arg(0))
		}
	}
	if chosen == 0 {
		fmt.Fprintf(stderr, "nodepack retry: no failed runs to retry in %s", termSafe(dir))
		if len(classes) > 0 {
			fmt.Fprintf(stderr, " of class %s (failed: %s)", failure.JoinClasses(classes), orNone(failure.Counts(doc.Classes)))
		}
		fmt.Fprintln(stderr)
		return exitOK
	}
	command, cwd, err := recordedCommand(dir)
	if err != nil {
		return usageErrorf(stderr, "retry", "%v", err)
	}
	extra := []string{"--retry-failed", "-o", dir}
	for _, c := range classes {
		extra = append(extra, "--retry-class", string(c))
	}
	for _, id := range *runs {
		extra = append(extra, "--retry-run", id)
	}
	runArgs := retryArgs(command, extra)
	words := make([]string, len(runArgs))
	for i, a := range runArgs {
		words[i] = shellWord(a)
	}
	fmt.Fprintf(stderr, "nodepack retry: %s of %s, in %s: nodepack run %s\n", countWord(chosen, "failed run"), countWord(len(doc.Failures), "failed run"), shellWord(cwd), strings.Join(words, " "))
	if cwd != "" {
		here, err := os.Getwd()
		if err != nil {
			return usageErrorf(stderr, "retry", "%v", err)
		}
		if err := os.Chdir(cwd); err != nil {
			return usageErrorf(stderr, "retry", "the sweep ran in %s: %v", cwd, err)
		}
		defer os.Chdir(here)
	}
	return runRun(ctx, runArgs, stdout, stderr)
}

// recordedCommand returns the nodepack run command of the newest header in
// dir's ledgers and the directory it ran in ("" when the ledger is older
// than that record: then it runs from here).
func recordedCommand(dir string) (command []string, cwd string, err error) {
	d, err := ledger.ReadDir(dir, ledger.ReadOptions{})
	if err != nil {
		return nil, "", err
	}
	newest := d.Current
	if newest == nil || len(newest.Command) < 2 || newest.Command[1] != "run" {
		return nil, "", fmt.Errorf("%s: its ledger records no nodepack run command to repeat", dir)
	}
	if newest.Sweep != nil && newest.Sweep.Source == "-" {
		return nil, "", fmt.Errorf("%s: the sweep read its task file from standard input, which cannot be read again: feed it the same way to nodepack run --retry-failed -o %s -", dir, dir)
	}
	return newest.Command[2:], newest.Cwd, nil
}

// retryArgs is the recorded run's arguments without --restart (a retry
// resumes) and without the output and retry choices of an earlier retry
// (the header records the last session's command), with extra added before
// the command after "--".
func retryArgs(recorded, extra []string) []string {
	var args []string
	for i := 0; i < len(recorded); i++ {
		a := recorded[i]
		if a == "--" {
			return append(append(args, extra...), recorded[i:]...)
		}
		name, _, hasValue := strings.Cut(a, "=")
		switch name {
		case "--restart", "--retry-failed":
			continue
		case "-o", "--output", "--retry-class", "--retry-run":
			if !hasValue {
				i++ // the value is the next argument
			}
			continue
		}
		args = append(args, a)
	}
	// After the task file: pflag takes flags anywhere before "--".
	return append(args, extra...)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
