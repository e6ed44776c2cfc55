package schedule

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// realCurve is one configuration of ../shared/data/lc-cifar10: its
// validation error after each epoch and when each epoch ended.
type realCurve struct {
	ID    int       `json:"config_id"`
	Error []float64 `json:"learning_curve"`
	At    []float64 `json:"time_steps"` // cumulative seconds
}

// realCurves reads the real learning curves (test data outside the
// product tree, see its README); nil when they are not there.
func realCurves(tb testing.TB) []realCurve {
	files, _ := filepath.Glob("../../../shared/data/lc-cifar10/config_*.json")
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
		if len(c.Error) != 40 || len(c.At) != 40 {
			tb.Fatalf("%s: %d errors, %d times: want 40 each", f, len(c.Error), len(c.At))
		}
		curves = append(curves, c)
	}
	return curves
}

// replayOutcome is what a pruning policy did to one draw of runs.
type replayOutcome struct {
	epochs     int  // epochs run, of all the runs
	winnerDone bool // the draw's best final error ran to its last epoch
}

// replayDraw runs the configurations of draw, slots at a time in draw
// order, in virtual time: each epoch ends when its curve says, its error
// is judged at once (no stop latency), and a run judged out stops there
// and gives its slot to the next.
func replayDraw(tb testing.TB, p Prune, draw []realCurve, slots int) replayOutcome {
	pr, err := NewPruner(p)
	if err != nil {
		tb.Fatal(err)
	}
	type running struct {
		c     realCurve
		epoch int     // epochs done
		began float64 // when it started
	}
	var out replayOutcome
	winner := 0
	for i, c := range draw {
		if c.Error[39] < draw[winner].Error[39] {
			winner = i
		}
	}
	next, now := 0, 0.0
	lanes := make([]*running, slots)
	start := func(i int) {
		if next < len(draw) {
			lanes[i] = &running{c: draw[next], began: now}
			next++
		} else {
			lanes[i] = nil
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
			return out
		}
		r := lanes[lane]
		now = r.began + r.c.At[r.epoch]
		r.epoch++
		out.epochs++
		id := fmt.Sprint(r.c.ID)
		stopped := false
		for _, j := range pr.Judge(id, float64(r.epoch), r.c.Error[r.epoch-1], nil) {
			stopped = stopped || j.Stop
		}
		if r.epoch == 40 && r.c.ID == draw[winner].ID {
			out.winnerDone = true
		}
		if stopped || r.epoch == 40 {
			start(lane)
		}
	}
}

// BenchmarkRealCurves replays draws of 27 of the real CIFAR-10 curves,
// 40 epochs on 4 slots, through the pruning rules in virtual time, with no
// stop latency: how many times fewer epochs run than without pruning, and
// in how many draws the draw's winner reaches its last epoch. It skips
// where ../shared/data/lc-cifar10 is not.
func BenchmarkRealCurves(b *testing.B) {
	curves := realCurves(b)
	if len(curves) < 27 {
		b.Skip("no ../shared/data/lc-cifar10 beside the repository")
	}
	const draws, perDraw, slots = 200, 27, 4
	for _, rule := range []struct {
		name string
		p    Prune
	}{
		{"rank-first3", Prune{Metric: "loss", FirstStep: 3, MaxStep: 40}},
		{"rank-first9", Prune{Metric: "loss", FirstStep: 9, MaxStep: 40}},
		{"curve-first3", Prune{Metric: "loss", FirstStep: 3, MaxStep: 40, Curve: true}},
	} {
		b.Run(rule.name, func(b *testing.B) {
			var epochs, kept int
			for range b.N {
				epochs, kept = 0, 0
				for d := range draws {
					rng := rand.New(rand.NewPCG(uint64(d), 54))
					perm := rng.Perm(len(curves))
					draw := make([]realCurve, perDraw)
					for i := range draw {
						draw[i] = curves[perm[i]]
					}
					o := replayDraw(b, rule.p, draw, slots)
					epochs += o.epochs
					if o.winnerDone {
						kept++
					}
				}
			}
			b.ReportMetric(float64(draws*perDraw*40)/float64(epochs), "x-fewer-epochs")
			b.ReportMetric(100*float64(kept)/draws, "%winner-kept")
		})
	}
}
