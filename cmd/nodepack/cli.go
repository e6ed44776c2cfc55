package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/nodepack/nodepack/cmd/internal/clidoc"
	"github.com/nodepack/nodepack/runner"
	"github.com/spf13/pflag"
)

// Exit codes. A run's own failure is exit 1; an interruption is 128+signal
// (130 for SIGINT, 143 for SIGTERM), as shells report it.
const (
	exitOK     = 0
	exitFailed = 1
	exitUsage  = 2
)

// command is one subcommand: its name, a one-line summary, the function
// that parses its flags and does the work, and what its arguments are (for
// shell completion).
type command struct {
	name, summary string
	run           func(ctx context.Context, args []string, stdout, stderr io.Writer) int
	operands      clidoc.Operands
}

func commands() []command {
	return []command{
		{"detect", "show the GPUs, CPUs and memory this allocation was given", runDetect, clidoc.NoOperands},
		{"plan", "show which GPUs and CPUs each concurrent run gets, without running", runPlan, clidoc.FileOperand},
		{"run", "run every command of a task file, each on its own GPUs and cores", runRun, clidoc.FileOperand},
		{"submit", "from a login node: start a sweep as an array job, one node per shard", runSubmit, clidoc.RunOperands},
		{"resubmit", "submit again the shards of a submitted sweep that have runs left", runResubmit, clidoc.DirOperand},
		{"status", "show a sweep's progress from its output directory, while it runs or after", runStatus, clidoc.DirOperand},
		{"retry", "run again the failed runs of an output directory, all or by failure class", runRetry, clidoc.DirOperand},
		{"report", "write a sweep's output directory as one self-contained HTML page: timeline, use, numbers, runs", runReport, clidoc.DirOperand},
		{"tail", "follow the logs of a sweep's runs, each line prefixed with the run's origin", runTail, clidoc.DirOperand},
		{"completion", "print a shell's completion script: bash, zsh or fish", runCompletion, clidoc.ShellOperand},
		{"man", "print nodepack's manual page (roff), made from every command's --help", runMan, clidoc.NoOperands},
		{"version", "print nodepack's version", runVersion, clidoc.NoOperands},
	}
}

const mainUsage = `nodepack packs many small runs onto the GPUs and cores of one node
allocation (a Slurm, Grid Engine, PBS or LSF job, or a workstation).

Usage:
  nodepack <command> [flags] [arguments]

Commands:
%s
Run 'nodepack <command> --help' for a command's flags and an example;
'nodepack --version' prints the version.
`

// program is the whole program: it returns the process exit code.
func program(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	// A reader that goes away (| head -1) ends nodepack's output, not its
	// work: SIGPIPE becomes EPIPE (Notify, not Ignore: an ignored signal
	// would be inherited by the runs), and pipeOut drops the rest.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	out := newPipeOut(stdout)
	stdout = out
	if len(args) > 0 && (args[0] == "--version" || args[0] == "-V") {
		return runVersion(ctx, nil, stdout, stderr)
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		var list strings.Builder
		for _, c := range commands() {
			fmt.Fprintf(&list, "  %-11s %s\n", c.name, c.summary)
		}
		w := stdout
		if len(args) == 0 {
			w = stderr
		}
		fmt.Fprintf(w, mainUsage, list.String())
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	for _, c := range commands() {
		if c.name == args[0] {
			if follows[c.name] {
				var cancel context.CancelFunc
				ctx, cancel = context.WithCancel(ctx)
				defer cancel()
				go func() {
					select {
					case <-out.gone:
						cancel() // nobody reads what it follows
					case <-ctx.Done():
					}
				}()
			}
			return c.run(ctx, args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "nodepack: unknown command %q (see nodepack --help)\n", args[0])
	return exitUsage
}

// describeKey is the context key under which a command, instead of
// running, hands parseFlags' flag set and usage to a *commandHelp. The
// completion scripts and the manual page read every command's help this
// way, so that it is written once.
type describeKey struct{}

// commandHelp is what a command says of itself: its flags and usage text.
type commandHelp struct {
	flags *pflag.FlagSet
	usage string
}

// describe returns c's help: c runs with a context that makes parseFlags
// stop before parsing anything.
func describe(c command) commandHelp {
	var h commandHelp
	c.run(context.WithValue(context.Background(), describeKey{}, &h), nil, io.Discard, io.Discard)
	return h
}

// parseFlags parses args into fs. It prints the help (exit 0) or one line
// naming the problem (exit 2); ok is false when the caller should return code.
func parseFlags(ctx context.Context, fs *pflag.FlagSet, usage string, args []string, stdout, stderr io.Writer) (code int, ok bool) {
	if h, ok := ctx.Value(describeKey{}).(*commandHelp); ok {
		fs.SortFlags = false // in the order --help shows them
		h.flags, h.usage = fs, usage
		return exitOK, false
	}
	fs.SetOutput(io.Discard)
	fs.SortFlags = false
	err := fs.Parse(args)
	if errors.Is(err, pflag.ErrHelp) {
		if h, ok := helpGroups[fs.Name()]; ok {
			clidoc.WriteHelp(stdout, clidoc.Command{Usage: usage, Flags: fs, Groups: h.groups, Details: h.details})
		} else {
			fmt.Fprintf(stdout, "%s\nFlags:\n%s", usage, fs.FlagUsages())
		}
		return exitOK, false
	}
	if err != nil {
		fmt.Fprintf(stderr, "nodepack %s: %v (see nodepack %s --help)\n", fs.Name(), err, fs.Name())
		return exitUsage, false
	}
	return 0, true
}

// usageErrorf prints one line for bad input and returns exit code 2.
func usageErrorf(stderr io.Writer, cmd, format string, a ...any) int {
	// One line, whatever the input it quotes holds.
	fmt.Fprintf(stderr, "nodepack %s: %s\n", cmd, termSafe(fmt.Sprintf(format, a...)))
	return exitUsage
}

// outputArg resolves the output directory a command was given (see
// runner.FindOutput: nodepack-JOBID or a bare job id finds that job's
// sweep); ok is false after it printed why it cannot (exit 2).
func outputArg(stderr io.Writer, cmd, arg string) (dir string, ok bool) {
	dir, err := runner.FindOutput(arg)
	if err != nil {
		usageErrorf(stderr, cmd, "%s: %v: name one of them", arg, err)
		return "", false
	}
	return dir, true
}
