package main

import (
	"github.com/nodepack/nodepack/cmd/internal/clidoc"
	"github.com/nodepack/nodepack/runner/failure"
)

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
	groups  []clidoc.Group
	details string
}{
	"run": {groups: runFlagGroups, details: runDetails},
}

// runFlagGroups are run's flags: the ones most runs need first.
var runFlagGroups = []clidoc.Group{
	{Title: "Flags most runs need", Flags: []string{"output", "parallel", "gpus-per-run", "runs-per-gpu", "cpus-per-run", "sweep", "grid", "params", "reps", "timeout", "retries", "restart", "quiet", "dry-run"}},
	{Title: "What each run gets (per run: '#nodepack gpus=2 cpus=16' task-file lines, a params line's \"nodepack\" object, --request)", Flags: []string{"gpu-mem-per-run", "mem-per-run", "request", "enforce-mem", "mps", "mps-compute", "gpu-ids", "render", "no-thread-caps", "env", "wrap"},
		Examples: []string{"nodepack run --gpus-per-run 0.25 --sweep --request 'model=big: gpus=2' -- python train.py model=small,big seed=1,2"}},
	{Title: "When runs start", Flags: []string{"backfill-wait", "settle-timeout", "stagger", "min-start-interval", "density-window"}},
	{Title: "Resuming (rerun the same command: done runs are skipped)", Flags: []string{"retry-failed", "retry-class", "retry-run"}},
	{Title: "Stopping bad runs early (successive halving: the runs append {\"step\": 200, \"loss\": 0.41} lines to $NODEPACK_METRICS)", Flags: []string{"prune", "prune-prior"},
		Examples: []string{"nodepack run --prune loss:min,first=100,max=2700 --params runs.jsonl -- python train.py",
			"nodepack run --prune loss:min,max=10 --prune-prior results -o results2 --params runs.jsonl -- python train.py   # learns from the earlier sweep in results"}},
	{Title: "Search (a searcher proposes the runs as lanes free, and is told how each ended: docs/search.md)", Flags: []string{"search", "search-timeout"},
		Examples: []string{"nodepack run --search 'python3 examples/search/random_search.py 8' -o searched -- python3 examples/search/train.py"}},
	{Title: "Failures", Flags: []string{"retry", "retry-backoff", "fail-pattern", "max-failures", "fail-fast", "grace", "checkpoint-signal"},
		Examples: []string{"nodepack run --runs-per-gpu 2 --timeout 2h --retries 1 sweep.txt"}},
	{Title: "Batch jobs (Slurm, Grid Engine, PBS, LSF)", Flags: []string{"requeue", "stop-before", "shard", "runs-per-shard", "pool", "lease"},
		Examples: []string{"nodepack run --stop-before 10m -o sweep1 sweep.txt   # in sbatch, with --requeue"}},
	{Title: "Output", Flags: []string{"live", "metric", "sample-interval", "json"}},
	{Title: "The node (detected unless said)", Flags: []string{"inventory", "gpus", "cpus"}},
}
