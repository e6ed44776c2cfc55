package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/nodepack/nodepack/runner"
	"github.com/nodepack/nodepack/runner/sweep"
	"github.com/spf13/pflag"
)

// addSourceFlags adds the flags that say what the runs are, bound to spec
// and runsPerShard; plan and run share them.
func addSourceFlags(fs *pflag.FlagSet, spec *sweep.Spec, runsPerShard *int) {
	fs.BoolVar(&spec.Hydra, "sweep", false, "run the command after -- once per combination of its Hydra sweep overrides (key=a,b key=choice(a,b) key=range(0,10,2))")
	fs.StringVar(&spec.Grid, "grid", "", "run the command after -- once per combination of the YAML grid `FILE`, appending --key=value")
	fs.StringVar(&spec.Params, "params", "", "run the command after -- once per JSON object (one a line) of `FILE` (- for standard input), appending --key=value")
	fs.StringArrayVar(&spec.Requests, "request", nil, "give the runs whose values match a request, `'MATCH: REQ'` such as 'model=big: gpus=2 cpus=16' or '*: gpus=0.5' (repeatable; the first that matches applies; --sweep, --grid, --params)")
	fs.IntVar(&spec.Reps, "reps", 1, "run everything `N` times (NODEPACK_REP and {rep} say which)")
	fs.IntVar(runsPerShard, "runs-per-shard", 0, "`M` runs per array task: plan prints the array to submit; --shard auto uses it where the scheduler does not tell the array size (PBS, LSF)")
}

// sourceArgs puts the positional arguments into spec: the task file, or,
// with --sweep, --grid or --params, the command after --.
func sourceArgs(spec *sweep.Spec, args []string) error {
	if spec.Reps < 1 {
		return fmt.Errorf("--reps %d: want at least 1", spec.Reps)
	}
	if spec.Hydra || spec.Grid != "" || spec.Params != "" || spec.Search != "" {
		if len(args) == 0 && spec.TaskFile == "" {
			kind := spec.Kind()
			if kind == sweep.KindSearch {
				return fmt.Errorf("--search needs the command after --, e.g. --search 'python3 tpe.py' -- python train.py")
			}
			return fmt.Errorf("--%s needs the command after --, e.g. --%s -- python train.py", kind, kind)
		}
		spec.Command = args
		return nil
	}
	if len(args) != 1 {
		return fmt.Errorf("want one TASKFILE (or - for standard input), got %d arguments", len(args))
	}
	spec.TaskFile = args[0]
	return nil
}

// dryRun lists the runs of this shard and returns the exit code.
func dryRun(sw *runner.Sweep, asJSON bool, stdout, stderr io.Writer) int {
	n, err := sw.WriteRuns(stdout, asJSON)
	switch {
	case errors.Is(err, runner.ErrWrite):
		fmt.Fprintf(stderr, "nodepack run: %s\n", termSafe(err.Error()))
		return exitFailed
	case err != nil:
		return usageErrorf(stderr, "run", "%v", err)
	}
	shard, _ := sw.Shard()
	_, total := sw.Total()
	fmt.Fprintf(stderr, "nodepack run: dry run: %s of shard %s (%d in all shards), output %s; nothing started\n", countWord(n, "run"), shard, total, termSafe(sw.Output()))
	return exitOK
}

// errNoRuns is the usage error of plan --runs-per-shard without runs.
var errNoRuns = errors.New("--runs-per-shard needs the runs: a TASKFILE, or --sweep, --grid or --params with the command after --")
