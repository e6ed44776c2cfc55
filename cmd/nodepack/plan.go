package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/nodepack/nodepack/cmd/internal/clidoc"
	"github.com/nodepack/nodepack/cmd/internal/flagvalue"
	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/runner"
	"github.com/nodepack/nodepack/runner/sweep"
	"github.com/spf13/pflag"
)

const planUsage = `Usage: nodepack plan [--inventory FILE] [--parallel N] [--gpus-per-run G | --runs-per-gpu K] [--cpus-per-run C] [--json]
                     [--gpu-mem-per-run SIZE] [--mem-per-run SIZE] [--runs-per-shard M]
                     [TASKFILE | --sweep|--grid FILE|--params FILE [--request 'MATCH: REQ']… -- COMMAND…]

Shows the first wave of a sweep without running anything: which GPUs and
CPUs each of the concurrent slots gets, and what stays idle. Without
--inventory it plans for this node.

By default there is one run per GPU (or MIG device), or one per physical
core on a node without GPUs, and the allowed CPUs are split evenly in whole
cores, local to each run's GPUs.

Given a source (a task file, or --sweep, --grid or --params with the
command after --), it also counts the runs, tallied by what they ask for
(#nodepack lines of a task file, "nodepack" objects of a params file,
--request rules), and refuses a run that could never fit the node. When
the runs ask for different things, it shows where the first wave goes
(the runs that start at once, as nodepack run places them) instead of
the default request's slots. With --runs-per-shard M it prints the array
to submit so that each array task (one nodepack each, --shard auto) gets
about M runs. NUMA is the NUMA node of a slot's or run's GPUs and CPUs;
- where they span nodes or the node does not say.

Examples:
  nodepack plan
  nodepack plan --inventory dgx.json --parallel 16 --runs-per-gpu 2
  nodepack plan --inventory dgx.json --gpus-per-run 2 --cpus-per-run 16 --json
  nodepack plan --inventory dgx.json --gpus-per-run 0.25 --sweep --request 'model=big: gpus=2' -- python train.py model=small,big seed=1,2
  nodepack plan --runs-per-shard 8 --grid params.yml -- python train_mnist.py`

// packOptions are the flags that shape the slots; plan and run share them.
type packOptions struct {
	pack.Options
}

// optionFlags names the flag AddFlags binds to each field of
// pack.Options, for wording pack's settings (pack.Setting) as flags.
var optionFlags = map[string]string{
	"Parallel":       "--parallel",
	"GPUsPerRun":     "--gpus-per-run",
	"GPUShare":       "--gpus-per-run",
	"RunsPerGPU":     "--runs-per-gpu",
	"AutoRunsPerGPU": "--runs-per-gpu",
	"GPUMem":         "--gpu-mem-per-run",
	"CPUsPerRun":     "--cpus-per-run",
	"Mem":            "--mem-per-run",
}

// flagWord words a setting of pack.Options as the flag that gives it:
// "--parallel 12".
func flagWord(s pack.Setting) string {
	f, ok := optionFlags[s.Field]
	if !ok {
		f = s.Field
	}
	if s.Value == "" {
		return f
	}
	return f + " " + s.Value
}

// newPlan is pack.NewPlan worded for the command line: a *pack.FitError
// and the plan's warnings name flags.
func newPlan(topo pack.Topology, opts pack.Options) (pack.Plan, error) {
	plan, err := pack.NewPlan(topo, opts)
	var fe *pack.FitError
	if errors.As(err, &fe) {
		return plan, errors.New(strings.Replace(err.Error(), fe.Error(), fe.Words(flagWord), 1))
	}
	for i, w := range plan.Warnings {
		plan.Warnings[i] = wordedNote(w.Words(flagWord))
	}
	return plan, err
}

// wordedNote is a note for the plan's warnings whose words are all
// written in: it opens no setting.
func wordedNote(text string) pack.Note {
	return pack.Note{Text: strings.ReplaceAll(text, "%", "%%")}
}

// noteTexts returns the notes as text, as newPlan worded them.
func noteTexts(notes []pack.Note) []string {
	texts := make([]string, len(notes))
	for i, n := range notes {
		texts[i] = n.String()
	}
	return texts
}

func (o *packOptions) AddFlags(fs *pflag.FlagSet) {
	fs.IntVarP(&o.Parallel, "parallel", "j", 0, "`N` runs at once (default: plan lays out one per GPU or MIG device, else one per physical core; run starts as many as the runs' requests fit)")
	fs.Var(flagvalue.GPUs(&o.Options), "gpus-per-run", "GPUs each run gets: a number `G` of its own, or a share of one such as 0.25 or 1/4 (default 1 when there are GPUs)")
	fs.Var(flagvalue.RunsPerGPU(&o.Options), "runs-per-gpu", "runs that share one GPU, `K` of them: --gpus-per-run 1/K (default 1); auto: 1 at first, then one more while each command shape's steps per second on a GPU (from $NODEPACK_METRICS) rise by more than 5%, up to 8 and what its measured GPU memory holds")
	clidoc.OfferChoices(fs, "runs-per-gpu", "auto")
	fs.Var(flagvalue.GPUMem(&o.Options), "gpu-mem-per-run", "GPU memory each run needs, `SIZE` such as 12GiB: runs share GPUs while their memory fits; auto measures the first run of each command shape")
	fs.IntVar(&o.CPUsPerRun, "cpus-per-run", 0, "CPUs each run gets (default: the allowed CPUs split evenly, whole cores first)")
	fs.Var(flagvalue.Size(&o.Mem), "mem-per-run", "host memory each run needs, `SIZE` such as 32GiB: runs start while their memory fits the job's (cgroup limit, else what is available)")
}

type planOptions struct {
	nodeOptions
	packOptions
	Source       sweep.Spec
	RunsPerShard int
	JSON         bool
}

func runPlan(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o planOptions
	fs := pflag.NewFlagSet("plan", pflag.ContinueOnError)
	o.packOptions.AddFlags(fs)
	o.nodeOptions.AddFlags(fs)
	fs.BoolVar(&o.JSON, "json", false, "print the plan as a JSON document (schema nodepack.plan/v1)")
	addSourceFlags(fs, &o.Source, &o.RunsPerShard)
	if code, ok := parseFlags(ctx, fs, planUsage, args, stdout, stderr); !ok {
		return code
	}
	hasSource := o.Source.Kind() != sweep.KindTasks || fs.NArg() > 0
	if !hasSource && o.RunsPerShard > 0 {
		return usageErrorf(stderr, "plan", "%v", errNoRuns)
	}
	if o.RunsPerShard < 0 {
		return usageErrorf(stderr, "plan", "--runs-per-shard %d: must not be negative", o.RunsPerShard)
	}
	node, err := o.load(ctx)
	if err != nil {
		return usageErrorf(stderr, "plan", "%v", err)
	}
	plan, err := newPlan(node.Topology(), o.Options)
	if err != nil {
		return usageErrorf(stderr, "plan", "%v", err)
	}
	var runs *runner.RunsPlan
	if hasSource {
		if err := sourceArgs(&o.Source, fs.Args()); err != nil {
			return usageErrorf(stderr, "plan", "%v", err)
		}
		if runs, err = runner.PlanRuns(o.Source, node.Topology(), plan.Request, o.Parallel, o.RunsPerShard); err != nil {
			return usageErrorf(stderr, "plan", "%v", err)
		}
		if o.RunsPerShard > 0 && o.RunsPerShard%len(plan.Slots) != 0 {
			plan.Warnings = append(plan.Warnings, wordedNote(fmt.Sprintf("%d runs per shard on %d slots: the last wave of each shard leaves slots idle; a multiple of %d keeps them busy",
				o.RunsPerShard, len(plan.Slots), len(plan.Slots))))
		}
	}
	printWarnings(stderr, noteTexts(plan.Warnings))
	if o.JSON {
		return writeJSON(stdout, stderr, planDoc{PlanDoc: plan.Doc(), Runs: runs})
	}
	if runs == nil || runs.FirstWave == nil {
		plan.WriteText(stdout)
	}
	if runs != nil {
		runs.WriteText(stdout)
	}
	fmt.Fprintln(stdout, "NUMA: the NUMA node of a run's GPUs and CPUs; - where they span nodes or the node does not say")
	return exitOK
}

// planDoc is plan --json's document: the plan's, and with a source, its
// runs and shards.
type planDoc struct {
	pack.PlanDoc
	Runs *runner.RunsPlan `json:"runs,omitempty"`
}

// writeJSON prints v indented; a failure to write is exit 1.
func writeJSON(stdout, stderr io.Writer, v any) int {
	b, err := json.MarshalIndent(v, "", "  ")
	if err == nil {
		_, err = stdout.Write(append(b, '\n'))
	}
	if err != nil {
		fmt.Fprintf(stderr, "nodepack: %v\n", err)
		return exitFailed
	}
	return exitOK
}
