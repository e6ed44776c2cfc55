package schedule

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/nodepack/nodepack/runner/run"
)

// curvePoints samples y(step) at steps 1..upto, with noise of sigma.
func curvePoints(y func(float64) float64, upto int, sigma float64, seed uint64) [][2]float64 {
	rng := rand.New(rand.NewPCG(seed, 7))
	var pts [][2]float64
	for s := 1; s <= upto; s++ {
		pts = append(pts, [2]float64{float64(s), y(float64(s)) + sigma*rng.NormFloat64()})
	}
	return pts
}

// TestForecast: where a curve is going, from its first points, against
// where it truly goes: a fast curve's end is forecast close; a slow
// starter's optimistic bound is below its true end (it is not ruled
// out); a flat curve is forecast flat; too few points forecast nothing.
func TestForecast(t *testing.T) {
	tests := []struct {
		name      string
		y         func(float64) float64
		upto      int
		sigma     float64
		at        float64
		near      float64 // |Final - truth| at most; 0: not checked
		keepsTrue bool    // Optimistic at or below the truth
		ok        bool
	}{
		{"fast, exact", func(s float64) float64 { return 0.3 + 1.5*math.Exp(-s/5) }, 27, 0, 81, 0.02, true, true},
		{"fast, noisy", func(s float64) float64 { return 0.3 + 1.5*math.Exp(-s/5) }, 27, 0.02, 81, 0.05, true, true},
		{"slow starter", func(s float64) float64 { return 0.1 + 1.5*math.Exp(-s/40) }, 9, 0.01, 81, 0, true, true},
		{"slow starter, noisy", func(s float64) float64 { return 0.1 + 1.5*math.Exp(-s/40) }, 27, 0.05, 81, 0, true, true},
		{"power law", func(s float64) float64 { return 0.2 + 2/math.Sqrt(s) }, 27, 0.01, 243, 0.05, true, true},
		{"flat", func(s float64) float64 { return 0.8 }, 27, 0.01, 81, 0.03, true, true},
		{"too few points", func(s float64) float64 { return 1 / s }, 5, 0, 81, 0, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := forecastAt(curvePoints(tc.y, tc.upto, tc.sigma, 1), tc.at)
			truth := tc.y(tc.at)
			t.Logf("truth %.3f: forecast %+v", truth, got)
			if got.OK != tc.ok {
				t.Fatalf("OK %v, want %v", got.OK, tc.ok)
			}
			if !tc.ok {
				return
			}
			if tc.near > 0 && math.Abs(got.Final-truth) > tc.near {
				t.Errorf("final %.3f, truth %.3f: off by more than %v", got.Final, truth, tc.near)
			}
			if tc.keepsTrue && got.Optimistic > truth {
				t.Errorf("optimistic %.3f above the truth %.3f: the curve's end is ruled out", got.Optimistic, truth)
			}
			if got.Optimistic > got.Final {
				t.Errorf("optimistic %.3f worse than final %.3f", got.Optimistic, got.Final)
			}
		})
	}
}

// curveRun is a run of a curve-rule table case: its loss at each step,
// and when it starts, in steps of the sweep's clock.
type curveRun struct {
	name  string
	loss  func(step float64) float64
	start int
}

// prunedAt runs the runs through a Pruner of p in the sweep's clock: at
// each tick every started run that is not stopped reports its next step
// (with Gaussian noise of sigma), up to MaxStep, and each ends with its
// last (Finish). It returns where each stopped run was stopped, "run@step".
func prunedAt(t *testing.T, p Prune, runs []curveRun, sigma float64) []string {
	t.Helper()
	pr, err := NewPruner(p)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	stopped := map[string]bool{}
	var out []string
	last := int(p.MaxStep)
	for tick := 0; ; tick++ {
		active := false
		for _, r := range runs {
			step := tick - r.start + 1
			if step < 1 || step > last || stopped[r.name] {
				continue
			}
			active = true
			v := r.loss(float64(step)) + sigma*rng.NormFloat64()
			var js []run.Judgement
			if step == last {
				js = pr.Finish(r.name, float64(step), v)
			} else {
				js = pr.Judge(r.name, float64(step), v, nil)
			}
			for _, j := range js {
				if j.Stop {
					stopped[r.name] = true
					out = append(out, fmt.Sprintf("%s@%v", r.name, j.Step))
				}
			}
		}
		if !active && tick > 0 {
			return out
		}
	}
}

// TestCurveRule: the curve rule against the rank rule, in the sweep's
// clock: each case is runs of known curves and where each rule stops
// them.
func TestCurveRule(t *testing.T) {
	ordinary := func(final float64) func(float64) float64 {
		return func(s float64) float64 { return final + 1.5*math.Exp(-s/5) }
	}
	slow := func(s float64) float64 { return 0.1 + 1.5*math.Exp(-s/30) } // the best at the end, among the worst at step 9
	rising := func(s float64) float64 { return 0.5 + 0.02*s }
	flat := func(s float64) float64 { return 1.2 }
	base := []curveRun{{"a", ordinary(0.3), 0}, {"b", ordinary(0.5), 0}, {"c", ordinary(0.7), 0}, {"d", ordinary(0.4), 2}}
	with := func(extra ...curveRun) []curveRun { return append(append([]curveRun{}, base...), extra...) }
	rank := Prune{Metric: "loss", FirstStep: 9, Eta: 3, MaxStep: 81}
	curve := rank
	curve.Curve = true
	tests := []struct {
		name       string
		runs       []curveRun
		sigma      float64
		rankStops  string // stopped by the rank rule
		curveStops string // stopped by the curve rule
		curveKeeps string // not stopped by the curve rule
		same       bool   // the two rules stop the same runs at the same rungs
	}{
		{"a slow starter: the rank rule stops it at its first rung, the curve rule sees it coming",
			with(curveRun{"slow", slow, 20}), 0.005, "slow", "c", "slow a", false},
		{"a flat curve, worse than the rest: stopped by both",
			with(curveRun{"flat", flat, 20}), 0.005, "flat", "flat c", "a", false},
		{"a curve that goes up: no fit goes down, the rank rule judges it: stopped by both",
			with(curveRun{"rising", rising, 20}), 0.005, "rising", "rising", "a", false},
		{"noisy curves (σ 0.05): the slow starter still goes on, and the best",
			with(curveRun{"slow", slow, 20}), 0.05, "slow", "", "slow a", false},
		{"a first rung with too few points (step 3): the rank rule judges there",
			with(curveRun{"slow", slow, 20}), 0.005, "slow", "slow", "", true},
	}
	names := func(stops []string) map[string]bool {
		m := map[string]bool{}
		for _, s := range stops {
			m[strings.Split(s, "@")[0]] = true
		}
		return m
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, c := rank, curve
			if i == len(tests)-1 {
				r.FirstStep, c.FirstStep = 3, 3
			}
			byRank, byCurve := prunedAt(t, r, tc.runs, tc.sigma), prunedAt(t, c, tc.runs, tc.sigma)
			t.Logf("rank rule stops %q, curve rule %q", byRank, byCurve)
			rs, cs := names(byRank), names(byCurve)
			for _, n := range strings.Fields(tc.rankStops) {
				if !rs[n] {
					t.Errorf("the rank rule does not stop %s", n)
				}
			}
			for _, n := range strings.Fields(tc.curveStops) {
				if !cs[n] {
					t.Errorf("the curve rule does not stop %s", n)
				}
			}
			for _, n := range strings.Fields(tc.curveKeeps) {
				if cs[n] {
					t.Errorf("the curve rule stops %s", n)
				}
			}
			if tc.same && strings.Join(byRank, " ") != strings.Join(byCurve, " ") {
				t.Errorf("the rules differ: %q and %q", byRank, byCurve)
			}
		})
	}
}
