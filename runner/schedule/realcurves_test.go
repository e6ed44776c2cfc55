package schedule

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// realCurve is one configuration of ../shared/data/lc-cifar10: its
// validation error after each epoch and when each epoch ended.
type realCurve struct {
	ID int // its file's number: config_ID.json
	// Run is its run's id in a replay, when not its ID (the id the
	// binary gave it, so that the same runs are in the cautious cohort).
	Run   string
	Error []float64 `json:"learning_curve"`
	At    []float64 `json:"time_steps"` // cumulative seconds
}

// last is its value at its last step.
func (c realCurve) last() float64 { return c.Error[len(c.Error)-1] }

// realCurves reads the real learning curves (test data outside the
// product tree, see its README); nil when they are not there.
func realCurves(tb testing.TB) []realCurve {
	return readCurves(tb, "../../../shared/data/lc-cifar10")
}

// readCurves reads the curves of dir's config_*.json, as many steps each
// as the first has.
func readCurves(tb testing.TB, dir string) []realCurve {
	files, _ := filepath.Glob(filepath.Join(dir, "config_*.json"))
	var curves []realCurve
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		var c realCurve
		if err := json.Unmarshal(b, &c); err != nil {
			tb.Fatalf("%s: %v", f, err)
		}
		// Keyed by its file's name: two files of the set carry the same
		// config_id (config_5.json and config_62.json).
		if _, err := fmt.Sscanf(filepath.Base(f), "config_%d.json", &c.ID); err != nil {
			tb.Fatalf("%s: %v", f, err)
		}
		if len(c.Error) == 0 || len(c.At) != len(c.Error) || len(curves) > 0 && len(c.Error) != len(curves[0].Error) {
			tb.Fatalf("%s: %d values, %d times: want as many of each as every curve has", f, len(c.Error), len(c.At))
		}
		curves = append(curves, c)
	}
	return curves
}

// replayOutcome is what a pruning policy did to one draw of runs.
type replayOutcome struct {
	epochs     int     // epochs run, of all the runs
	winnerDone bool    // the draw's best final error ran to its last epoch
	top3Done   bool    // one of the draw's three best ran to its last epoch
	regret     float64 // the best final error that ran to its last epoch, less the draw's best
	finished   []int   // the configurations that did, by ID
	// runs is what each run reported, as a later sweep's prior reads it
	// (in draw order).
	runs  []PriorRun
	prior PriorState // what the prior did
}

// replayDraw runs the configurations of draw, slots at a time in draw
// order, in virtual time: each epoch ends when its curve says, its error
// is judged at once (no stop latency), and a run judged out stops there
// and gives its slot to the next; with keeps, it keeps checkpoints: it is
// paused, and promoted (Pruner.Promote) once no run waits to start.
func replayDraw(tb testing.TB, p Prune, draw []realCurve, slots int, keeps bool, priors ...Prior) replayOutcome {
	pr, err := NewPruner(p)
	if err != nil {
		tb.Fatal(err)
	}
	if len(priors) > 0 {
		if _, err := pr.UsePrior(priors); err != nil {
			tb.Fatal(err)
		}
	}
	type running struct {
		c     realCurve
		epoch int     // epochs done
		began float64 // when it started
	}
	var out replayOutcome
	out.runs = make([]PriorRun, len(draw))
	place := map[string]int{}
	winner := 0
	for i, c := range draw {
		if c.last() < draw[winner].last() {
			winner = i
		}
	}
	next, now := 0, 0.0
	lanes := make([]*running, slots)
	paused := map[string]*running{}
	start := func(i int) {
		lanes[i] = nil
		if next < len(draw) {
			lanes[i] = &running{c: draw[next], began: now}
			next++
		} else if id, ok := pr.Promote(); ok {
			r := paused[id]
			delete(paused, id)
			r.began = now - r.c.At[r.epoch-1] // it goes on from its epoch
			lanes[i] = r
		}
	}
	for i := range lanes {
		start(i)
	}
	for {
		lane := -1 // the lane whose epoch ends first
		for i, r := range lanes {
			if r != nil && (lane < 0 || r.began+r.c.At[r.epoch] < lanes[lane].began+lanes[lane].c.At[lanes[lane].epoch]) {
				lane = i
			}
		}
		if lane < 0 {
			for i := range lanes { // a promotion may wait for the last run to end
				start(i)
			}
			if !slices.ContainsFunc(lanes, func(r *running) bool { return r != nil }) {
				out.prior = pr.Prior()
				return out
			}
			continue
		}
		r := lanes[lane]
		now = r.began + r.c.At[r.epoch]
		r.epoch++
		out.epochs++
		id := r.c.Run
		if id == "" {
			id = fmt.Sprint(r.c.ID)
		}
		if _, ok := place[id]; !ok {
			place[id] = len(place)
		}
		pl := &out.runs[place[id]]
		pl.Points = append(pl.Points, [2]float64{float64(r.epoch), r.c.Error[r.epoch-1]})
		pl.Ended = r.epoch == len(r.c.Error)
		stopped := false
		for _, j := range pr.Judge(id, float64(r.epoch), r.c.Error[r.epoch-1], func() bool { return keeps }) {
			stopped = stopped || j.Stop
			if j.Pause {
				pr.Pause(j)
				paused[id] = r
			}
		}
		if r.epoch == len(r.c.Error) {
			rank := 0
			for _, c := range draw {
				if c.last() < r.c.last() {
					rank++
				}
			}
			out.winnerDone = out.winnerDone || rank == 0
			out.top3Done = out.top3Done || rank < 3
			if best := r.c.last() - draw[winner].last(); len(out.finished) == 0 || best < out.regret {
				out.regret = best
			}
			out.finished = append(out.finished, r.c.ID)
		}
		if stopped || r.epoch == len(r.c.Error) {
			start(lane)
		}
	}
}

// BenchmarkRealCurves replays draws of 27 of the real CIFAR-10 curves,
// 40 epochs on 4 slots, through the pruning rules in virtual time, with no
// stop latency: how many times fewer epochs run than without pruning, in
// how many draws the draw's winner (and one of its best three) reaches its
// last epoch, and the regret (the best final error that ran to its last
// epoch, less the draw's best). It skips where ../shared/data/lc-cifar10
// is not. bench/prune.sh FAMILY=real puts the peers beside it.
func BenchmarkRealCurves(b *testing.B) {
	curves := realCurves(b)
	if len(curves) < 27 {
		b.Skip("no ../shared/data/lc-cifar10 beside the repository")
	}
	const draws, perDraw, slots = 200, 27, 4
	for _, rule := range []string{"loss:min,max=40", "loss:min,max=40+pause", "loss:min,first=3,max=40", "loss:min,first=9,max=40", "loss:min,first=3,max=40,rule=curve"} {
		spec, pause := strings.CutSuffix(rule, "+pause")
		p, _, err := ParsePrune(spec)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(rule, func(b *testing.B) {
			var epochs, kept, top3 int
			var regret float64
			for range b.N {
				epochs, kept, top3, regret = 0, 0, 0, 0
				for d := range draws {
					rng := rand.New(rand.NewPCG(uint64(d), 54))
					perm := rng.Perm(len(curves))
					draw := make([]realCurve, perDraw)
					for i := range draw {
						draw[i] = curves[perm[i]]
					}
					o := replayDraw(b, p, draw, slots, pause)
					epochs += o.epochs
					kept += boolInt(o.winnerDone)
					top3 += boolInt(o.top3Done)
					regret += o.regret
				}
			}
			b.ReportMetric(float64(draws*perDraw*40)/float64(epochs), "x-fewer-epochs")
			b.ReportMetric(100*float64(kept)/draws, "%winner-kept")
			b.ReportMetric(100*float64(top3)/draws, "%top3-kept")
			b.ReportMetric(regret/draws, "regret")
		})
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestReplayDraws replays the draws and rules bench/prune.sh hands it in
// $NODEPACK_REPLAY in virtual time: JSON {"data": the curves' folder
// (../shared/data/lc-cifar10 when not given), "draws": [[file numbers…]…],
// "rules": [SPEC or SPEC+pause…], "slots": N, "ids": [[run ids…]…] where
// the runs are to have the ids the binary gave them, "priors": [{"name",
// "dirs": [folder of config_*.json…], "pruned"}…], "of": [index into dirs
// per draw]}. With priors, each rule replays every draw without one and
// then with each (--prune-prior): draw d's prior is the curves of
// dirs[of[d]], whole (an earlier sweep run without --prune) or, with
// pruned, as that earlier sweep under the same rule (its max the curves'
// last step) left them; with finished, only its runs that reached their
// last step. It writes one JSON line per rule, prior and draw
// to $NODEPACK_REPLAY_OUT, and skips without them.
func TestReplayDraws(t *testing.T) {
	in, out := os.Getenv("NODEPACK_REPLAY"), os.Getenv("NODEPACK_REPLAY_OUT")
	if in == "" || out == "" {
		t.Skip("bench/prune.sh FAMILY=real runs it, with $NODEPACK_REPLAY and $NODEPACK_REPLAY_OUT")
	}
	var job struct {
		Data  string // the curves' folder; ../shared/data/lc-cifar10 when not given
		Draws [][]int
		Rules []string
		Slots int
		IDs   [][]string
		// Priors are the earlier sweeps; Of[d] picks draw d's folder of
		// each.
		Priors []struct {
			Name   string
			Dirs   []string
			Pruned bool
			// Finished keeps only the runs that reached their last step
			// (what a prior without its pruned runs' partial curves is).
			Finished bool
		}
		Of []int
	}
	b, err := os.ReadFile(in)
	if err == nil {
		err = json.Unmarshal(b, &job)
	}
	if err != nil {
		t.Fatal(err)
	}
	byID := map[int]realCurve{}
	curves := realCurves(t)
	if job.Data != "" {
		curves = readCurves(t, job.Data)
	}
	for _, c := range curves {
		byID[c.ID] = c
	}
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	enc := json.NewEncoder(f)
	for _, rule := range job.Rules {
		spec, pause := strings.CutSuffix(rule, "+pause")
		p, _, err := ParsePrune(spec)
		if err != nil {
			t.Fatalf("%s: %v", rule, err)
		}
		type prior struct {
			name             string
			dirs             []string
			pruned, finished bool
		}
		priors := []prior{{}}
		for _, pr := range job.Priors {
			priors = append(priors, prior{pr.Name, pr.Dirs, pr.Pruned, pr.Finished})
		}
		if len(job.Priors) > 0 && len(job.Of) != len(job.Draws) {
			t.Fatalf("%d draws, %d entries in of", len(job.Draws), len(job.Of))
		}
		for _, pr := range priors {
			label, read := rule, map[string]Prior{}
			if pr.name != "" {
				label += " · prior " + pr.name
			}
			for d, ids := range job.Draws {
				draw := make([]realCurve, len(ids))
				for i, id := range ids {
					c, ok := byID[id]
					if !ok {
						t.Fatalf("draw %d: no config_%d.json", d, id)
					}
					draw[i] = c
					if d < len(job.IDs) && i < len(job.IDs[d]) {
						draw[i].Run = job.IDs[d][i]
					}
				}
				var with []Prior
				if pr.name != "" {
					if job.Of[d] < 0 || job.Of[d] >= len(pr.dirs) {
						t.Fatalf("draw %d: prior %s has no folder %d", d, pr.name, job.Of[d])
					}
					dir := pr.dirs[job.Of[d]]
					if _, ok := read[dir]; !ok {
						read[dir] = earlierSweep(t, readCurves(t, dir), p, pr.pruned)
						if pr.finished {
							r := read[dir]
							r.Runs = slices.DeleteFunc(slices.Clone(r.Runs), func(r PriorRun) bool { return !r.Ended })
							read[dir] = r
						}
					}
					with = []Prior{read[dir]}
				}
				o := replayDraw(t, p, draw, job.Slots, pause, with...)
				row := map[string]any{"rule": label, "draw": d, "epochs": o.epochs, "finished": o.finished}
				if pr.name != "" {
					row["dropped"] = o.prior.Dropped != ""
					row["prior_stopped"] = o.prior.Stopped
				}
				if err := enc.Encode(row); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

// earlierSweep is what --prune-prior reads of an earlier sweep of curves:
// every curve whole when it ran without --prune, else what the rule p
// (its max their last step) let each run report.
func earlierSweep(tb testing.TB, curves []realCurve, p Prune, pruned bool) Prior {
	if len(curves) == 0 {
		tb.Fatal("an earlier sweep of no curves")
	}
	last := len(curves[0].Error)
	if !pruned {
		pr := Prior{MaxStep: float64(last)}
		for _, c := range curves {
			r := PriorRun{Ended: true}
			for s, v := range c.Error {
				r.Points = append(r.Points, [2]float64{float64(s + 1), v})
			}
			pr.Runs = append(pr.Runs, r)
		}
		return pr
	}
	p.MaxStep, p.FirstStep = float64(last), 0
	pp, err := NewPruner(p)
	if err != nil {
		tb.Fatal(err)
	}
	o := replayDraw(tb, pp.Config(), curves, 4, false)
	return Prior{MaxStep: float64(last), Runs: o.runs}
}
