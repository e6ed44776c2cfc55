package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/nodepack/nodepack/runner/failure"
	"github.com/spf13/pflag"
)

// flagGroup is a group of a command's flags in its --help: a title, the
// flags by name, and examples that use them (run by the tests as the
// command's other examples are).
type flagGroup struct {
	title    string
	flags    []string
	examples []string
}

// writeGroupedHelp writes a command's help: its usage text, then its
// flags group by group, then details; every flag of fs must be in one
// group (TestHelpGroupsCoverEveryFlag).
func writeGroupedHelp(w io.Writer, fs *pflag.FlagSet, usage string, groups []flagGroup, details string) {
	fmt.Fprintln(w, usage)
	for _, g := range groups {
		sub := pflag.NewFlagSet(g.title, pflag.ContinueOnError)
		sub.SortFlags = false
		for _, name := range g.flags {
			if f := fs.Lookup(name); f != nil {
				sub.AddFlag(f)
			}
		}
		fmt.Fprintf(w, "\n%s:\n%s", g.title, sub.FlagUsages())
		for _, e := range g.examples {
			fmt.Fprintf(w, "    e.g. %s\n", e)
		}
	}
	if details != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimRight(details, "\n"))
	}
}

// choicesKey annotates a flag whose value is one of a few words, which the
// completion scripts offer.
const choicesKey = "nodepack-choices"

// offerChoices marks fs's flag name as taking one of values.
func offerChoices(fs *pflag.FlagSet, name string, values ...string) {
	if err := fs.SetAnnotation(name, choicesKey, values); err != nil {
		panic(err) // a flag this package defines: a typo is a bug
	}
}

// classNames are the failure classes as --class takes them.
func classNames() []string {
	var names []string
	for _, c := range failure.Classes {
		names = append(names, string(c))
	}
	return names
}

// helpGroups are the commands whose --help groups their flags.
var helpGroups = map[string]struct {
	groups  []flagGroup
	details string
}{
	"run": {runFlagGroups, runDetails},
}

// runFlagGroups are run's flags: the ones most runs need first.
var runFlagGroups = []flagGroup{
	{"Flags most runs need", []string{"output", "parallel", "gpus-per-run", "runs-per-gpu", "cpus-per-run", "sweep", "grid", "params", "reps", "timeout", "retries", "restart", "quiet", "dry-run"}, nil},
	{"What each run gets (per run: '#nodepack gpus=2 cpus=16' task-file lines, a params line's \"nodepack\" object, --request)", []string{"gpu-mem-per-run", "mem-per-run", "request", "enforce-mem", "gpu-ids", "render", "no-thread-caps", "env", "wrap"},
		[]string{"nodepack run --gpus-per-run 0.25 --sweep --request 'model=big: gpus=2' -- python train.py model=small,big seed=1,2"}},
	{"When runs start", []string{"backfill-wait", "settle-timeout", "stagger", "min-start-interval"}, nil},
	{"Resuming (rerun the same command: done runs are skipped)", []string{"retry-failed", "retry-class", "retry-run"}, nil},
	{"Stopping bad runs early (successive halving: the runs append {\"step\": 200, \"loss\": 0.41} lines to $NODEPACK_METRICS)", []string{"prune"},
		[]string{"nodepack run --prune loss:min,first=100,max=2700 --params runs.jsonl -- python train.py"}},
	{"Failures", []string{"retry", "retry-backoff", "fail-pattern", "max-failures", "fail-fast", "grace"},
		[]string{"nodepack run --runs-per-gpu 2 --timeout 2h --retries 1 sweep.txt"}},
	{"Batch jobs (Slurm, Grid Engine, PBS, LSF)", []string{"requeue", "stop-before", "shard", "runs-per-shard"},
		[]string{"nodepack run --stop-before 10m -o sweep1 sweep.txt   # in sbatch, with --requeue"}},
	{"Output", []string{"live", "metric", "sample-interval", "json"}, nil},
	{"The node (detected unless said)", []string{"inventory", "gpus", "cpus"}, nil},
}
