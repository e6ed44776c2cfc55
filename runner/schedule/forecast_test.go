package schedule

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/nodepack/nodepack/runner/run"
)

// finishedRuns are the reports of n runs "_0", "_1", … that each ran to
// step last without noise: value final + 0.5/step at every step, finals
// from 0.1 up by 0.01, the best last, so that no rank rung stops one (a
// run stopped for good is forgotten).
func finishedRuns(n int, last float64) []report {
	var out []report
	for k := range n {
		for s := 1.0; s <= last; s++ {
			out = append(out, report{fmt.Sprintf("_%d", k), s, 0.1 + 0.01*float64(n-1-k) + 0.5/s})
		}
	}
	return out
}

// negated is reports with their values negated: a loss made an accuracy.
func negated(reports []report) []report {
	out := make([]report, len(reports))
	for i, r := range reports {
		out[i] = report{r.run, r.step, -r.value}
	}
	return out
}

// TestForecastRule: the forecast rule (Prune.Forecast) as table cases,
// each a sequence of reports and the judgements it must give of the runs
// whose names do not start with "_", written run@step:value/verdict (the
// rung's step, not its index). Runs "a" and "e" are in the cautious
// cohort (cautious), the others are not.
func TestForecastRule(t *testing.T) {
	cfg := Prune{Metric: "loss", FirstStep: 3, MaxStep: 10, Forecast: true} // rungs 1 2 3 4 6 8 9 10; rank at 3 and 9
	tests := []struct {
		description string
		prune       Prune
		reports     []report
		want        string
	}{
		{"before any run finished: the rank rule at its rungs (3 and 9), the rungs between go on",
			cfg,
			[]report{{"b", 1, 0.5}, {"c", 1, 0.9}, {"b", 2, 0.5}, {"c", 2, 0.9}, {"b", 3, 0.5}, {"c", 3, 0.9}},
			"b@1:0.5/go c@1:0.9/go b@2:0.5/go c@2:0.9/go b@3:0.5/go c@3:0.9/stop"},
		{"the cautious cohort: a run in it is not judged before a third of the last step",
			cfg,
			[]report{{"b", 3, 0.5}, {"a", 3, 0.9}, {"b", 9, 0.4}, {"a", 9, 0.9}},
			"b@1:0.5/go b@2:0.5/go b@3:0.5/go a@1:0.9/go a@2:0.9/go a@3:0.9/go b@4:0.4/go b@6:0.4/go b@8:0.4/go b@9:0.4/go a@4:0.9/go a@6:0.9/go a@8:0.9/go a@9:0.9/stop"},
		{"with 19 finished runs the forecast judges between the rank rungs: stopped when even the optimistic end of its interval is worse than the best final, else on",
			cfg,
			append(finishedRuns(19, 10), report{"b", 1, 2.0}, report{"c", 1, 0.55}),
			"b@1:2/stop c@1:0.55/go"},
		{"higher is better (an accuracy): the same judgements, mirrored",
			Prune{Metric: "acc", Max: true, FirstStep: 3, MaxStep: 10, Forecast: true},
			append(negated(finishedRuns(19, 10)), report{"b", 1, -2.0}, report{"c", 1, -0.55}),
			"b@1:-2/stop c@1:-0.55/go"},
		{"18 finished runs are too few for a 95% bound: no forecast, and no rank rung at step 1",
			cfg,
			append(finishedRuns(18, 10), report{"b", 1, 2.0}),
			"b@1:2/go"},
		{"a forecast that lets a run go on leaves it to the rank rule at a rank rung",
			cfg,
			append(finishedRuns(19, 10), report{"c", 2, 0.2}, report{"c", 3, 0.5}),
			// The forecast is made from c's best so far (0.2, of those
			// that gained 0.17 more from there: 0.03); the rank rule
			// judges its value at the rung, 0.5, outside the best third
			// of the finished runs' there (0.27 to 0.45: cutoff 0.33).
			"c@1:0.2/go c@2:0.2/go c@3:0.5/stop"},
		{"a NaN stops its run; the last step never stops one (its budget is spent) and makes it a finished run",
			cfg,
			[]report{{"b", 1, math.NaN()}, {"c", 10, 5}},
			"b@1:NaN/stop c@1:5/go c@2:5/go c@3:5/go c@4:5/go c@6:5/go c@8:5/go c@9:5/go c@10:5/go"},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			got := judgements(t, tc.prune, tc.reports, func(j run.Judgement) string {
				return fmt.Sprintf("%s@%v:%v", j.Run, j.Step, j.Value)
			})
			if got != tc.want {
				t.Errorf("judgements\n  %s\nwant\n  %s", got, tc.want)
			}
		})
	}
}

// TestForecastRungs: the rank rule's rungs, the forecast's between them,
// whole steps when the last is whole, and the last step.
func TestForecastRungs(t *testing.T) {
	for _, tc := range []struct {
		first, last float64
		eta         int
		want        string
	}{
		{3, 10, 3, "[1 2 3* 4 6 8 9* 10]"},
		{5, 40, 3, "[2 3 4 5* 7 10 14 15* 19 27 38 40]"},
		{0.5, 2.5, 2, "[0.25 0.3535533905932738 0.5* 0.7071067811865477 1* 1.4142135623730958 2* 2.5]"},
	} {
		rungs, rank := forecastRungs(tc.first, tc.last, tc.eta)
		var b strings.Builder
		for i, r := range rungs {
			if i > 0 {
				b.WriteString(" ")
			}
			fmt.Fprint(&b, r)
			if rank[i] {
				b.WriteString("*")
			}
		}
		if got := "[" + b.String() + "]"; got != tc.want {
			t.Errorf("forecastRungs(%v, %v, %d) = %s, want %s", tc.first, tc.last, tc.eta, got, tc.want)
		}
	}
	for last, first := range map[float64]float64{40: 5, 12: 2, 10: 1, 3: 1} {
		p, _ := NewPruner(Prune{Metric: "loss", MaxStep: last, Forecast: true})
		if p.Config().FirstStep != first {
			t.Errorf("the forecast rule's first rank rung with max %v: %v, want an eighth of it, rounded, at least 1: %v", last, p.Config().FirstStep, first)
		}
	}
}

// TestForecastResume: a pruner that replays the judgements of another
// (the ledger's, on a resumed sweep) knows the same finished runs, and
// forecasts and judges as the first would.
func TestForecastResume(t *testing.T) {
	cfg := Prune{Metric: "loss", FirstStep: 3, MaxStep: 10, Forecast: true}
	first, _ := NewPruner(cfg)
	var recorded []run.Judgement
	for _, r := range finishedRuns(19, 10) {
		recorded = append(recorded, first.Judge(r.run, r.step, r.value, nil)...)
	}
	again, _ := NewPruner(cfg)
	again.Resume(State{Judgements: recorded})
	for _, r := range []report{{"b", 1, 2.0}, {"c", 1, 0.55}, {"c", 2, 0.4}, {"d", 4, 0.3}} {
		a, b := first.Judge(r.run, r.step, r.value, nil), again.Judge(r.run, r.step, r.value, nil)
		if fmt.Sprint(a) != fmt.Sprint(b) {
			t.Errorf("after %+v: the first pruner judged %+v, the resumed one %+v", r, a, b)
		}
		if r.run == "b" && (len(a) != 1 || !a[0].Stop || !a[0].Forecasted) {
			t.Errorf("b was judged %+v: want stopped by a forecast", a)
		}
	}
}

// TestForecastCoverage: the finished runs say how the optimistic ends of
// the forecasts made for them held.
func TestForecastCoverage(t *testing.T) {
	p, _ := NewPruner(Prune{Metric: "loss", FirstStep: 3, MaxStep: 10, Forecast: true})
	for _, r := range finishedRuns(19, 10) {
		p.Judge(r.run, r.step, r.value, nil)
	}
	if got := p.Coverage(); got != (Coverage{}) {
		t.Errorf("coverage %+v before any run was forecast", got)
	}
	// c ends as its forecasts said (0.05 below the best final so far):
	// they held. d looks as good and ends far worse than forecast: a
	// final worse than the optimistic end holds too; only a better one
	// misses.
	for s := 1.0; s <= 10; s++ {
		p.Judge("c", s, 0.05+0.5/s, nil)
		v := 0.1 + 0.5/s
		if s == 10 {
			v = 0.9
		}
		p.Judge("d", s, v, nil)
	}
	if got := p.Coverage(); got != (Coverage{Forecasts: 2, Held: 2}) {
		t.Errorf("coverage %+v, want 2 forecast, 2 held", got)
	}
	// g looks like the best finished run, c, until its last step, where
	// it ends far better than any forecast for it said it could: a miss.
	for s := 1.0; s <= 10; s++ {
		v := 0.05 + 0.5/s
		if s == 10 {
			v = 0.001
		}
		p.Judge("g", s, v, nil)
	}
	if got := p.Coverage(); got.Forecasts != 3 || got.Held != 2 {
		t.Errorf("coverage %+v, want 3 forecast, 2 held", got)
	}
}

// BenchmarkForecastJudge: what one judgement of the forecast rule costs
// with 1,000 runs running and maxFinished finished (the most it learns
// from): a running run judged at a rung (judge), and a run that reaches
// its last step, its value at every rung at once, the last of which
// adds it to the finished runs and now and then calibrates again (finish),
// and a finish that calibrates again (recalibrate).
func BenchmarkForecastJudge(b *testing.B) {
	setup := func() *Pruner {
		p, _ := NewPruner(Prune{Metric: "loss", MaxStep: 40, Forecast: true})
		rng := rand.New(rand.NewPCG(1, 2))
		for k := range maxFinished {
			final, tau := 0.1+0.5*rng.Float64(), 1+10*rng.Float64()
			for s := 1.0; s <= 40; s++ {
				// keeps: a rank rung pauses one, which goes on here
				p.Judge(fmt.Sprintf("_%d", k), s, final+math.Exp(-s/tau)+0.01*rng.NormFloat64(), func() bool { return true })
			}
		}
		for k := range 1000 {
			p.Judge(fmt.Sprintf("r%d", k), 10, 0.2+0.5*rng.Float64(), nil)
		}
		return p
	}
	b.Run("judge", func(b *testing.B) {
		p := setup()
		b.ResetTimer()
		for i := range b.N {
			p.Judge(fmt.Sprintf("n%d", i), 2, 0.3+float64(i%100)/100, nil) // two rungs: 1 and 2
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(2*b.N), "µs/judgement")
	})
	b.Run("finish", func(b *testing.B) {
		p := setup()
		b.ResetTimer()
		for i := range b.N {
			p.Finish(fmt.Sprintf("f%d", i), 40, 0.2) // 12 rungs, the last a finish
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/finish")
	})
	b.Run("recalibrate", func(b *testing.B) { // a finish that recalibrates, the worst
		p := setup()
		b.ResetTimer()
		for range b.N {
			p.fc.calibrated = 0
			p.fc.add(p.fc.done[len(p.fc.done)-1])
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/recalibration")
	})
}

// TestForecastPromote: paused runs are promoted by their forecast as the
// sweep is now: one paused by the rank rule before any run finished may
// win once the finished runs say its optimistic end reaches the best
// final and the rung's values have risen past it; the likeliest best
// first, by forecast, not by value; a run whose optimistic end cannot reach the best final is never
// promoted.
func TestForecastPromote(t *testing.T) {
	p, _ := NewPruner(Prune{Metric: "loss", FirstStep: 3, MaxStep: 10, Forecast: true})
	pause := func(id string, v float64) {
		js := p.Judge(id, 3, v, func() bool { return true })
		if len(js) == 0 || !js[len(js)-1].Stop || !js[len(js)-1].Pause {
			t.Fatalf("%s at step 3 (%v): %+v, want paused", id, v, js)
		}
		p.Pause(js[len(js)-1])
	}
	p.Judge("b", 3, 0.30, nil) // the first at step 3 goes on
	p.Judge("c", 2, 0.2, nil)  // c was at 0.2 at step 2, and is at 0.36 at step 3
	pause("c", 0.36)
	pause("d", 0.33)
	pause("f", 3.0)
	// 19 runs finish; each gains 0.6, 0.9 or 1.2 over the steps after
	// the first: at step 3 they stand between 0.3 and 0.68.
	for k := range 19 {
		for s := 1.0; s <= 10; s++ {
			p.Judge(fmt.Sprintf("_%d", k), s, 0.1+0.01*float64(k)+[]float64{0.6, 0.9, 1.2}[k%3]/s, nil)
		}
	}
	var order []string
	for {
		id, ok := p.Promote()
		if !ok {
			break
		}
		order = append(order, id)
	}
	// c's value at the rung is worse than d's, its forecast (from its
	// best so far, 0.2) better: c first.
	if fmt.Sprint(order) != "[c d]" {
		t.Errorf("promoted %v, want c (the likelier best), then d; never f", order)
	}
}

// TestForecastCoverageMax: with a metric to maximise (an accuracy, 1 less
// the loss) the coverage counts the same: a run that ends as forecast
// holds (the optimistic ends made for it, below zero in the pruner's
// lower-better terms, are not taken for zero).
func TestForecastCoverageMax(t *testing.T) {
	p, _ := NewPruner(Prune{Metric: "acc", Max: true, FirstStep: 3, MaxStep: 10, Forecast: true})
	for _, r := range finishedRuns(19, 10) {
		p.Judge(r.run, r.step, 1-r.value, nil)
	}
	for s := 1.0; s <= 10; s++ {
		p.Judge("c", s, 1-(0.05+0.5/s), nil)
	}
	if got := p.Coverage(); got != (Coverage{Forecasts: 1, Held: 1}) {
		t.Errorf("coverage %+v, want 1 forecast, 1 held", got)
	}
}

// TestForecastForgetsPruned: what the forecast rule keeps of a running
// run goes when it is pruned for good, so that a sweep of a million runs
// does not keep a million tracks; a paused run keeps its track (its
// promotion is judged by it); a finished run's goes to the finished runs.
func TestForecastForgetsPruned(t *testing.T) {
	p, _ := NewPruner(Prune{Metric: "loss", FirstStep: 3, MaxStep: 10, Forecast: true})
	for _, r := range finishedRuns(19, 10) {
		p.Judge(r.run, r.step, r.value, nil)
	}
	for k := range 100 {
		id := fmt.Sprint("bad", k)
		js := p.Judge(id, 1, 5, nil)
		if len(js) != 1 || js[0].Stop == cautious(id) { // the cautious cohort goes on
			t.Fatalf("%s: %+v, want stopped unless cautious", id, js)
		}
		if cautious(id) {
			p.Finish(id, 10, 5) // and ends: a finished run
		}
	}
	js := p.Judge("b", 1, 5, func() bool { return true }) // b is not cautious
	p.Pause(js[len(js)-1])
	if len(p.tracks) != 1 || p.tracks["b"] == nil || len(p.optimistic) != 1 {
		t.Errorf("%d tracks, %d optimistic ends kept; want only the paused run's", len(p.tracks), len(p.optimistic))
	}
}
