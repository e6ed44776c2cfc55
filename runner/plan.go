package runner

import (
	"cmp"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/resources/batch"
	"github.com/nodepack/nodepack/runner/escape"
	"github.com/nodepack/nodepack/runner/execute"
	"github.com/nodepack/nodepack/runner/run"
	"github.com/nodepack/nodepack/runner/schedule"
	"github.com/nodepack/nodepack/runner/sweep"
)

// firstWave is where the first runs (their origins and requests, in
// input order) go when a sweep starts: what nodepack run's scheduler
// starts at once on topo, as it would (backfill, the default cap, the
// parallel cap), before any ends.
func firstWave(topo pack.Topology, base pack.Request, parallel int, first []waveRun) ([]WaveRun, error) {
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
	wave := []WaveRun{}
	for _, st := range plan.Starts {
		r := first[st.Key]
		d := WaveRun{Origin: r.origin, Request: st.Place.Request.String(), GPUs: []string{}, CPUs: pack.FormatCPUList(st.Place.CPUs), NUMA: st.Place.NUMA, Shared: st.Place.SharedGPUs}
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

// countRuns counts the runs of spec, checking every one, and tallies them
// by what they ask for (base unless they say otherwise), in the order the
// requests first appear. A request that can never fit topo is an error
// naming the run's origin.
func countRuns(spec sweep.Spec, topo pack.Topology, base pack.Request) (int, []RequestCount, []waveRun, error) {
	spec.Request, spec.GPUMemory = base, topo.GPUMemory()
	src, err := spec.Open()
	if err != nil {
		return 0, nil, nil, err
	}
	defer src.Close()
	alloc := pack.NewAllocator(topo)
	defaults := execute.Options{Policy: execute.Policy{Request: base}}
	var requests []RequestCount
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
			requests = append(requests, RequestCount{Request: req.String(), Class: req.Class()})
		}
		requests[i].Runs++
		return nil
	})
	if err != nil {
		return 0, nil, nil, err
	}
	return src.Total(), requests, first, nil
}

// RunsPlan is what a sweep's runs ask of a node: how many runs, tallied
// by request, where the first wave goes, and how they split into array
// tasks of RunsPerShard runs (nodepack plan with a source).
type RunsPlan struct {
	Total        int            `json:"total"`
	RunsPerShard int            `json:"runs_per_shard,omitempty"`
	Shards       int            `json:"shards,omitempty"`
	SlurmArray   string         `json:"slurm_array,omitempty"` // the value of sbatch --array
	Requests     []RequestCount `json:"requests"`
	// FirstWave, for runs whose requests differ from the default one, is
	// where the runs that start at once go, as nodepack run's scheduler
	// places them.
	FirstWave []WaveRun `json:"first_wave,omitempty"`
}

// WaveRun is a run of the first wave and where it goes.
type WaveRun struct {
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

// RequestCount is how many runs ask for one request.
type RequestCount struct {
	Request string `json:"request"` // as --request writes it: "gpus=2 cpus=16"
	Class   string `json:"class"`   // its kind of placement: "2 GPUs"
	Runs    int    `json:"runs"`
}

// PlanRuns reads every run of spec, checking each as a sweep would, and
// plans them on topo: tallied by request (base unless they say
// otherwise), where the first wave goes when their requests differ from
// base (as the scheduler places them, at most parallel at once; 0: as
// many as fit), and with perShard > 0 how many array tasks they make.
func PlanRuns(spec sweep.Spec, topo pack.Topology, base pack.Request, parallel, perShard int) (*RunsPlan, error) {
	total, requests, first, err := countRuns(spec, topo, base)
	if err != nil {
		return nil, err
	}
	doc := shardPlan(total, perShard)
	doc.Requests = requests
	if len(requests) > 1 || len(requests) == 1 && requests[0].Request != base.String() {
		if doc.FirstWave, err = firstWave(topo, base, parallel, first); err != nil {
			return nil, err
		}
	}
	return doc, nil
}

// shardPlan is how total runs split into tasks of perShard runs.
func shardPlan(total, perShard int) *RunsPlan {
	doc := &RunsPlan{Total: total}
	if perShard <= 0 {
		return doc
	}
	doc.RunsPerShard = perShard
	doc.Shards = max((total+perShard-1)/perShard, 1)
	doc.SlurmArray = fmt.Sprintf("0-%d", doc.Shards-1)
	return doc
}

// WriteText writes the plan for a person: the runs by request, the first
// wave's places, and the array to submit.
func (r *RunsPlan) WriteText(w io.Writer) {
	fmt.Fprintf(w, "runs: %d, by request\n", r.Total)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, q := range r.Requests {
		fmt.Fprintf(tw, "  %d\t%s\t(%s)\n", q.Runs, q.Request, q.Class)
	}
	tw.Flush()
	if r.FirstWave != nil {
		runs := strconv.Itoa(len(r.FirstWave)) + " runs"
		if len(r.FirstWave) == 1 {
			runs = "1 run"
		}
		fmt.Fprintf(w, "first wave: %s start at once (in input order as they fit; the rest start as these end)\n", runs)
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "RUN\tREQUEST\tGPUS\tCPUS\tNUMA\n")
		for _, d := range r.FirstWave {
			gpus := cmp.Or(strings.Join(d.GPUs, ","), "-")
			if d.Shared {
				gpus += " (shared)"
			}
			numa := "-"
			if d.NUMA >= 0 {
				numa = strconv.Itoa(d.NUMA)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", escape.Term(d.Origin), d.Request, gpus, cmp.Or(d.CPUs, "-"), numa)
		}
		tw.Flush()
	}
	if r.Shards > 0 {
		fmt.Fprintf(w, "shards: %d of up to %d runs; submit %s, each running nodepack run --shard auto with the same source\n",
			r.Shards, r.RunsPerShard, batch.SubmitLine(r.Shards))
	}
}
