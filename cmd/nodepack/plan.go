package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/pack/schedule"
	"github.com/nodepack/nodepack/resources/batch"
	"github.com/nodepack/nodepack/runner/execute"
	"github.com/nodepack/nodepack/runner/run"
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
	"Parallel":   "--parallel",
	"GPUsPerRun": "--gpus-per-run",
	"GPUShare":   "--gpus-per-run",
	"RunsPerGPU": "--runs-per-gpu",
	"GPUMem":     "--gpu-mem-per-run",
	"CPUsPerRun": "--cpus-per-run",
	"Mem":        "--mem-per-run",
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
	fs.Var(gpusValue{&o.Options}, "gpus-per-run", "GPUs each run gets: a number `G` of its own, or a share of one such as 0.25 or 1/4 (default 1 when there are GPUs)")
	fs.IntVar(&o.RunsPerGPU, "runs-per-gpu", 0, "runs that share one GPU, `K` of them: --gpus-per-run 1/K (default 1)")
	fs.Var(gpuMemValue{&o.Options}, "gpu-mem-per-run", "GPU memory each run needs, `SIZE` such as 12GiB: runs share GPUs while their memory fits; auto measures the first run of each command shape")
	fs.IntVar(&o.CPUsPerRun, "cpus-per-run", 0, "CPUs each run gets (default: the allowed CPUs split evenly, whole cores first)")
	fs.Var(sizeValue{&o.Mem}, "mem-per-run", "host memory each run needs, `SIZE` such as 32GiB: runs start while their memory fits the job's (cgroup limit, else what is available)")
}

// gpusValue binds --gpus-per-run to pack.Options: a whole number of GPUs
// of the run's own, or a share of one.
type gpusValue struct{ o *pack.Options }

func (v gpusValue) Type() string { return "G" }

func (v gpusValue) String() string {
	if v.o.GPUShare > 0 {
		return strconv.FormatFloat(float64(v.o.GPUShare)/pack.GPUWhole, 'f', -1, 64)
	}
	return strconv.Itoa(v.o.GPUsPerRun)
}

func (v gpusValue) Set(s string) error {
	if s == "0" {
		v.o.GPUsPerRun, v.o.GPUShare = 0, 0
		return nil
	}
	r, err := pack.ParseRequest("gpus="+s, pack.Request{}, 0)
	if err != nil {
		return errors.New(strings.TrimPrefix(err.Error(), "gpus="+s+": "))
	}
	v.o.GPUsPerRun, v.o.GPUShare = r.GPUs, r.GPUShare
	return nil
}

// gpuMemValue binds --gpu-mem-per-run: a size, or auto.
type gpuMemValue struct{ o *pack.Options }

func (v gpuMemValue) Type() string { return "SIZE" }

func (v gpuMemValue) String() string {
	switch {
	case v.o.AutoGPUMem:
		return "auto"
	case v.o.GPUMem == 0:
		return ""
	}
	return pack.FormatSize(v.o.GPUMem)
}

func (v gpuMemValue) Set(s string) error {
	if s == "auto" {
		v.o.GPUMem, v.o.AutoGPUMem = 0, true
		return nil
	}
	size, err := pack.ParseSize(s)
	if err != nil {
		return err
	}
	v.o.GPUMem, v.o.AutoGPUMem = size, false
	return nil
}

// sizeValue binds a flag to a size in bytes.
type sizeValue struct{ bytes *uint64 }

func (v sizeValue) Type() string { return "SIZE" }

func (v sizeValue) String() string {
	if *v.bytes == 0 {
		return ""
	}
	return pack.FormatSize(*v.bytes)
}

func (v sizeValue) Set(s string) error {
	size, err := pack.ParseSize(s)
	if err == nil {
		*v.bytes = size
	}
	return err
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
	var runs *runsPlanDoc
	if hasSource {
		total, requests, first, err := o.countRuns(fs.Args(), node.Topology(), plan.Request)
		if err != nil {
			return usageErrorf(stderr, "plan", "%v", err)
		}
		runs = runsPlan(total, o.RunsPerShard)
		runs.Requests = requests
		if len(requests) > 1 || len(requests) == 1 && requests[0].Request != plan.Request.String() {
			if runs.FirstWave, err = firstWave(node.Topology(), plan.Request, o.Parallel, first); err != nil {
				return usageErrorf(stderr, "plan", "%v", err)
			}
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
		printPlan(stdout, plan)
	}
	if runs != nil {
		printRunsPlan(stdout, runs)
	}
	fmt.Fprintln(stdout, "NUMA: the NUMA node of a run's GPUs and CPUs; - where they span nodes or the node does not say")
	return exitOK
}

// firstWave is where the first runs (their origins and requests, in
// input order) go when a sweep starts: what nodepack run's scheduler
// starts at once on topo, as it would (backfill, the default cap, the
// parallel cap), before any ends.
func firstWave(topo pack.Topology, base pack.Request, parallel int, first []waveRun) ([]waveDoc, error) {
	start := time.Unix(0, 0)
	s, err := schedule.New(schedule.Config{Topology: topo, Request: base, Parallel: parallel, Measured: true}, start)
	if err != nil {
		return nil, err
	}
	for _, r := range first {
		if _, err := s.Add(r.req, ""); err != nil {
			return nil, fmt.Errorf("%s: %w", r.origin, err)
		}
	}
	plan, err := s.Next(start)
	if err != nil {
		return nil, err
	}
	wave := []waveDoc{}
	for _, st := range plan.Starts {
		r := first[st.Key]
		d := waveDoc{Origin: r.origin, Request: st.Place.Request.String(), GPUs: []string{}, CPUs: pack.FormatCPUList(st.Place.CPUs), NUMA: st.Place.NUMA, Shared: st.Place.SharedGPUs}
		for _, g := range st.Place.GPUs {
			d.GPUs = append(d.GPUs, fmt.Sprintf("%d:%s", g.Index, g.UUID))
		}
		wave = append(wave, d)
	}
	return wave, nil
}

// waveRun is a run as firstWave takes it.
type waveRun struct {
	origin string
	req    pack.Request
}

// countRuns counts the runs of the source in args, checking every one,
// and tallies them by what they ask for (base unless they say otherwise),
// in the order the requests first appear. A request that can never fit
// topo is an error naming the run's origin.
func (o *planOptions) countRuns(args []string, topo pack.Topology, base pack.Request) (int, []requestDoc, []waveRun, error) {
	if err := sourceArgs(&o.Source, args); err != nil {
		return 0, nil, nil, err
	}
	o.Source.Request, o.Source.GPUMemory = base, topo.GPUMemory()
	src, err := o.Source.Open()
	if err != nil {
		return 0, nil, nil, err
	}
	defer src.Close()
	alloc := pack.NewAllocator(topo)
	defaults := execute.Options{Request: base}
	var requests []requestDoc
	var first []waveRun
	seen := map[pack.Request]int{} // request → its index in requests
	err = src.Scan(func(run run.Run) error {
		req := defaults.RequestOf(run)
		if len(first) < firstWaveRuns {
			first = append(first, waveRun{run.Origin, req})
		}
		i, ok := seen[req]
		if !ok {
			if err := alloc.Check(req); err != nil {
				return fmt.Errorf("%s: %w", run.Origin, err)
			}
			i = len(requests)
			seen[req] = i
			requests = append(requests, requestDoc{Request: req.String(), Class: req.Class()})
		}
		requests[i].Runs++
		return nil
	})
	if err != nil {
		return 0, nil, nil, err
	}
	return src.Total(), requests, first, nil
}

// planDoc is plan --json's document: the plan's, and with a source, its
// runs and shards.
type planDoc struct {
	pack.PlanDoc
	Runs *runsPlanDoc `json:"runs,omitempty"`
}

// runsPlanDoc is how a sweep splits into array tasks (--runs-per-shard).
type runsPlanDoc struct {
	Total        int          `json:"total"`
	RunsPerShard int          `json:"runs_per_shard,omitempty"`
	Shards       int          `json:"shards,omitempty"`
	SlurmArray   string       `json:"slurm_array,omitempty"` // the value of sbatch --array
	Requests     []requestDoc `json:"requests"`
	// FirstWave, for runs whose requests differ from the default one, is
	// where the runs that start at once go, as nodepack run's scheduler
	// places them.
	FirstWave []waveDoc `json:"first_wave,omitempty"`
}

// waveDoc is a run of the first wave and where it goes.
type waveDoc struct {
	Origin  string   `json:"origin"`
	Request string   `json:"request"`
	GPUs    []string `json:"gpus"` // index:UUID
	CPUs    string   `json:"cpus"`
	NUMA    int      `json:"numa"` // -1 when its GPUs and CPUs span nodes, or the node does not say
	Shared  bool     `json:"shared_gpu,omitempty"`
}

// firstWaveRuns bounds the runs plan hands the scheduler for the first
// wave: no node starts more at once.
const firstWaveRuns = 10000

// requestDoc is how many runs ask for one request.
type requestDoc struct {
	Request string `json:"request"` // as --request writes it: "gpus=2 cpus=16"
	Class   string `json:"class"`   // its kind of placement: "2 GPUs"
	Runs    int    `json:"runs"`
}

func runsPlan(total, perShard int) *runsPlanDoc {
	doc := &runsPlanDoc{Total: total}
	if perShard <= 0 {
		return doc
	}
	doc.RunsPerShard = perShard
	doc.Shards = max((total+perShard-1)/perShard, 1)
	doc.SlurmArray = fmt.Sprintf("0-%d", doc.Shards-1)
	return doc
}

func printRunsPlan(w io.Writer, r *runsPlanDoc) {
	fmt.Fprintf(w, "runs: %d, by request\n", r.Total)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, q := range r.Requests {
		fmt.Fprintf(tw, "  %d\t%s\t(%s)\n", q.Runs, q.Request, q.Class)
	}
	tw.Flush()
	if r.FirstWave != nil {
		fmt.Fprintf(w, "first wave: %s start at once (in input order as they fit; the rest start as these end)\n", countWord(len(r.FirstWave), "run"))
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "RUN\tREQUEST\tGPUS\tCPUS\tNUMA\n")
		for _, d := range r.FirstWave {
			gpus := orDash(strings.Join(d.GPUs, ","))
			if d.Shared {
				gpus += " (shared)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", termSafe(d.Origin), d.Request, gpus, orDash(d.CPUs), numaString(d.NUMA))
		}
		tw.Flush()
	}
	if r.Shards > 0 {
		fmt.Fprintf(w, "shards: %d of up to %d runs; submit %s, each running nodepack run --shard auto with the same source\n",
			r.Shards, r.RunsPerShard, batch.SubmitLine(r.Shards))
	}
}

func printPlan(w io.Writer, p pack.Plan) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "SLOT\tGPUS\tCPUS\tNUMA\n")
	for _, s := range p.Slots {
		gpus := "-"
		for i, g := range s.GPUs {
			if i == 0 {
				gpus = ""
			} else {
				gpus += ","
			}
			gpus += fmt.Sprintf("%d:%s", g.Index, g.UUID)
		}
		if s.SharedGPUs {
			gpus += " (shared)"
		}
		cpus := pack.FormatCPUList(s.CPUs)
		if s.SharedCPUs {
			cpus += " (shared)"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", s.Index, gpus, cpus, numaString(s.NUMA))
	}
	tw.Flush()
	fmt.Fprintf(w, "%s; each run: %s\n", countWord(len(p.Slots), "slot"), describeRequest(p.Request, p.RunsPerGPU))
	if len(p.IdleGPUs) == 0 && len(p.IdleCPUs) == 0 {
		fmt.Fprintln(w, "idle: nothing")
		return
	}
	idle := make([]int, len(p.IdleGPUs))
	for i, g := range p.IdleGPUs {
		idle[i] = g.Index
	}
	fmt.Fprintf(w, "idle: gpus %s, cpus %s\n", orDash(pack.FormatCPUList(idle)), orDash(pack.FormatCPUList(p.IdleCPUs)))
}

// describeRequest says what each run of a plan gets, for people:
// "1 GPU (2 runs per GPU), 16 CPUs".
func describeRequest(r pack.Request, runsPerGPU int) string {
	var gpu string
	switch {
	case r.GPUs > 0 || !r.UsesGPU():
		gpu = countWord(r.GPUs, "GPU")
	case r.GPUShare > 0 && r.GPUMem == 0 && runsPerGPU > 1 && pack.GPUWhole/runsPerGPU == r.GPUShare:
		gpu = "1 GPU"
	default:
		gpu = r.Class()
	}
	if runsPerGPU > 1 {
		gpu += fmt.Sprintf(" (%d runs per GPU)", runsPerGPU)
	}
	cpus := countWord(r.CPUs, "CPU")
	if r.CPUs == 0 {
		cpus = "1 shared CPU"
	}
	s := gpu + ", " + cpus
	if r.Mem > 0 {
		s += ", " + pack.FormatSize(r.Mem) + " of memory"
	}
	return s
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
