package main

import (
	"bufio"
	"fmt"
	"io"
	"iter"
	"os"

	"github.com/nodepack/nodepack/runner"
	"github.com/spf13/pflag"
)

// sourceOptions say where the runs come from. For now: one task file (or
// - for standard input) as the only argument.
type sourceOptions struct {
	DryRun bool // list the runs, start nothing
}

func (o *sourceOptions) AddFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.DryRun, "dry-run", false, "list the runs (id and command) and start nothing")
}

// printDryRun lists the runs and returns the exit code.
func (o *sourceOptions) printDryRun(args []string, stdout, stderr io.Writer) int {
	runs, closeRuns := o.open(args)
	defer closeRuns()
	for run, err := range runs {
		if err != nil {
			fmt.Fprintf(stderr, "nodepack run: %v\n", err)
			return exitUsage
		}
		fmt.Fprintf(stdout, "%s\t%q\n", run.ID, run.Args)
	}
	return exitOK
}

// check validates every run before anything starts, so bad input is
// reported as file:line and nothing runs; it returns the number of runs,
// or -1 when that cannot be known up front (standard input).
func (o *sourceOptions) check(args []string) (int, error) {
	if len(args) != 1 {
		return 0, fmt.Errorf("want one TASKFILE (or - for standard input), got %d arguments", len(args))
	}
	return checkTaskFile(args[0])
}

// open streams the runs; the returned function releases what open holds.
func (o *sourceOptions) open(args []string) (iter.Seq2[runner.Run, error], func()) {
	return openTaskFile(args[0])
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
