package schedule

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/nodepack/nodepack/runner/run"
)

// The prior's policy in these tests: rungs 1 2 3 4 6 8 9 10, rank at 3
// and 9; runs "a" and "e" are in the cautious cohort.
var priorPolicy = Prune{Metric: "loss", FirstStep: 3, MaxStep: 10, Forecast: true}

// family is run k of a family of curves, value final + gain/step at
// every step to last: finals from 0.1 up by 0.01, gains 0.4, 0.5 and
// 0.6 in turn; scale and shift make another task's (value × scale +
// shift), and speed one that learns speed times as fast (its value at
// step s is the family's at speed·s).
func family(k int, last, scale, shift, speed float64) [][2]float64 {
	var pts [][2]float64
	for s := 1.0; s <= last; s++ {
		at := min(s*speed, last)
		v := 0.1 + 0.01*float64(k) + []float64{0.4, 0.5, 0.6}[k%3]/at
		pts = append(pts, [2]float64{s, v*scale + shift})
	}
	return pts
}

// priorOf is n runs of the family that ran to last, as a prior.
func priorOf(n int, last, scale, shift, speed float64) Prior {
	var p Prior
	for k := range n {
		p.Runs = append(p.Runs, PriorRun{Points: family(k, last, scale, shift, speed), Ended: true})
	}
	return p
}

// reportsOf is run id's reports of family member k to step upTo.
func reportsOf(id string, k int, upTo float64) []report {
	var out []report
	for _, pt := range family(k, 10, 1, 0, 1) {
		if pt[0] <= upTo {
			out = append(out, report{id, pt[0], pt[1]})
		}
	}
	return out
}

// priorJudgements hands reports to a Pruner of policy given priors, and
// writes the judgements of the runs whose names do not start with "_"
// (run@step:verdict, "+prior" where the forecast learnt from the prior)
// and, where one dropped the prior, "dropped".
func priorJudgements(t *testing.T, policy Prune, priors []Prior, reports []report) (string, *Pruner) {
	t.Helper()
	p, err := NewPruner(policy)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UsePrior(priors); err != nil {
		t.Fatal(err)
	}
	var got []string
	stopped := map[string]bool{}
	for _, r := range reports {
		if stopped[r.run] {
			continue // a stopped run reports no more
		}
		for _, j := range p.Judge(r.run, r.step, r.value, nil) {
			stopped[j.Run] = stopped[j.Run] || j.Stop
			if j.PriorDropped != "" {
				got = append(got, "dropped")
			}
			if strings.HasPrefix(j.Run, "_") {
				continue
			}
			s := fmt.Sprintf("%s@%v:%s", j.Run, j.Step, map[bool]string{true: "stop", false: "go"}[j.Stop])
			if j.Prior {
				s += "+prior"
			}
			got = append(got, s)
		}
	}
	return strings.Join(got, " "), p
}

// own is the sweep's own first four runs, "_0" to "_3", each better than
// the one before at every rung, to their last step.
func own() []report { return ownOf(30, 20, 12, 6) }

// ownOf is the sweep's own runs "_0", "_1", … as family members ks, to
// their last step.
func ownOf(ks ...int) []report {
	var out []report
	for i, k := range ks {
		out = append(out, reportsOf(fmt.Sprintf("_%d", i), k, 10)...)
	}
	return out
}

// TestPriorRule: the prior (Pruner.UsePrior) as table cases, one for each
// rule and guard of the package doc's "The prior": the reports of the
// sweep's own runs ("_0" to "_3" are own(), not shown) and the judgements
// of run b, the worst of the family, which the prior's forecast stops at
// step 1, where no rank rung is, once the sweep's own runs agree with the
// prior; "dropped" where a judgement dropped the prior.
func TestPriorRule(t *testing.T) {
	same := priorOf(40, 10, 1, 0, 1)
	b := reportsOf("b", 39, 10)
	tests := []struct {
		description string
		prior       Prior
		reports     []report
		want        string
		why         string // what the drop says, in part
	}{
		{"before the sweep's own runs agree with the prior it stops nothing: the sweep's first run, worse than every run of the prior, goes on to its end",
			same, b, "b@1:go b@2:go b@3:go b@4:go b@6:go b@8:go b@9:go b@10:go", ""},
		{"with 4 of the sweep's runs at the first rung and 2 finished where the prior's forecasts said, the forecast learns from the prior: b is stopped at step 1, where no rank rung is",
			same, append(own(), b...), "b@1:stop+prior", ""},
		{"the trust gate: while the sweep's runs stand 1.5 standard errors off the middle of the prior's values at the first rung (here better: family members 15, 12, 9 and 6 of its 40), the prior is not used, nor dropped: b is judged as without a prior",
			same, append(ownOf(15, 12, 9, 6), b...), "b@1:go b@2:go b@3:stop", ""},
		{"a prior that ran to step 20 maps onto this sweep's 10 by the fraction of the last step: the same prior, the same judgement",
			priorOf(40, 20, 1, 0, 0.5), append(own(), b...), "b@1:stop+prior", ""},
		{"an easier task's prior (values × 0.6) is dropped at the first rung: the sweep's values there lie in its outer tail; b is judged as without a prior (the rank rule at step 3)",
			priorOf(40, 10, 0.6, 0, 1), append(own(), b...), "dropped b@1:go b@2:go b@3:stop", "beyond the prior's outer 2.5%"},
		{"a harder task's prior (values × 1.5 + 0.1) is dropped at the first rung: the sweep's values there are better than the prior's on the whole",
			priorOf(40, 10, 1.5, 0.1, 1), append(own(), b...), "dropped b@1:go b@2:go b@3:stop", "better than the prior's at step 1"},
		{"a prior that learnt twice as fast is dropped: the sweep's first finished run ended far better than its forecasts",
			priorOf(40, 10, 1, 0, 2), append(own(), b...), "dropped b@1:go b@2:go b@3:stop", "ended better than the prior's forecasts said"},
		{"a prior that learnt twice as slowly is dropped at the first rung",
			priorOf(40, 10, 1, 0, 0.5), append(own(), b...), "dropped b@1:go b@2:go b@3:stop", "beyond the prior's outer 2.5%"},
		{"the scale check: the sweep's values at the first rung better than the prior's on the whole (their mean place 3 standard errors below a half) drop it",
			priorOf(40, 10, 1, 0, 1), interleaved(1, func(float64, float64) float64 { return 0.55 }, 1, 2, 3, 4), "dropped", "better than the prior's at step 1 (4 runs, z 3.0)"},
		{"the progress check: runs of the same values at the first rung that learn faster from one rung to the next than the prior's drop it (each run counted once)",
			exactPrior(func(f, s float64) float64 { return f + 0.5/math.Sqrt(s) }), interleaved(2, func(f, s float64) float64 { return f + 0.5/s }, 0.4, 0.35, 0.3, 0.25, 0.2),
			"dropped", "learn faster than the prior's from one rung to the next (4 runs"},
		{"the coverage check: runs that end worse than the prior's intervals said, more of them than its own miss rate makes likely, drop it",
			exactPrior(func(f, s float64) float64 { return f + 0.5/s }), interleaved(10, func(f, s float64) float64 { return f + 0.5/min(s, 5) }, 0.4, 0.35, 0.3, 0.25, 0.2, 0.15),
			"dropped", "the prior's forecasts missed 4 of this sweep's 4 finished runs"},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			got, p := priorJudgements(t, priorPolicy, []Prior{tc.prior}, tc.reports)
			if got != tc.want {
				t.Errorf("judgements\n  %s\nwant\n  %s", got, tc.want)
			}
			if why := p.Prior().Dropped; tc.why == "" && why != "" || !strings.Contains(why, tc.why) {
				t.Errorf("dropped: %q, want %q", why, tc.why)
			}
		})
	}
}

// exact is a run of a family whose every curve is final + 0.5/step: a
// prior of it forecasts a run's final from any step, to within rounding.
func exact(id string, final, upTo float64) []report {
	var out []report
	for s := 1.0; s <= upTo; s++ {
		out = append(out, report{id, s, final + 0.5/s})
	}
	return out
}

// TestPriorBar: while the prior is in use, the bar a run's optimistic end
// must reach is the sweep's own: the best final of its finished runs, and
// the pessimistic end of another running run's latest forecast. Of the
// exact family, forecast to within rounding: c, the best there is, goes
// on, and d, worse than c will end but better than every finished run,
// is stopped once c runs; without c it goes on.
func TestPriorBar(t *testing.T) {
	var prior Prior
	for k := range 40 {
		var pts [][2]float64
		for _, r := range exact("", 0.1+0.01*float64(k), 10) {
			pts = append(pts, [2]float64{r.step, r.value})
		}
		prior.Runs = append(prior.Runs, PriorRun{Points: pts, Ended: true})
	}
	var mine []report
	for i, f := range []float64{0.4, 0.35, 0.3, 0.25} { // the middle of the prior's, each better than the one before
		mine = append(mine, exact(fmt.Sprintf("_%d", i), f, 10)...)
	}
	withC := append(append(slices.Clone(mine), exact("c", 0.1, 1)...), exact("d", 0.12, 1)...)
	if got, _ := priorJudgements(t, priorPolicy, []Prior{prior}, withC); got != "c@1:go+prior d@1:stop+prior" {
		t.Errorf("with c running: %s, want c on and d stopped by c's forecast", got)
	}
	if got, _ := priorJudgements(t, priorPolicy, []Prior{prior}, append(slices.Clone(mine), exact("d", 0.12, 1)...)); got != "d@1:go+prior" {
		t.Errorf("without c: %s, want d on: it may beat every finished run", got)
	}
}

// curveOf is a run's reports to step upTo of value(step).
func curveOf(id string, upTo float64, value func(s float64) float64) []report {
	var out []report
	for s := 1.0; s <= upTo; s++ {
		out = append(out, report{id, s, value(s)})
	}
	return out
}

// interleaved is the sweep's own runs "_0", "_1", … of value(final, step)
// with the finals given, step by step to upTo: every run's step 1, then
// every run's step 2, …
func interleaved(upTo float64, value func(final, s float64) float64, finals ...float64) []report {
	var out []report
	for s := 1.0; s <= upTo; s++ {
		for i, f := range finals {
			out = append(out, report{fmt.Sprintf("_%d", i), s, value(f, s)})
		}
	}
	return out
}

// exactPrior is 40 runs of a family value(final, step), their finals from
// 0.1 up by 0.01.
func exactPrior(value func(final, s float64) float64) Prior {
	var p Prior
	for k := range 40 {
		var pts [][2]float64
		for s := 1.0; s <= 10; s++ {
			pts = append(pts, [2]float64{s, value(0.1+0.01*float64(k), s)})
		}
		p.Runs = append(p.Runs, PriorRun{Points: pts, Ended: true})
	}
	return p
}

// TestPriorResume: a resumed sweep judges as it did. A pruner given the
// same prior that replays another's judgements (the ledger's) uses the
// prior as the first did, and judges the next run the same; one given a
// changed prior that replays the judgement that dropped it keeps it
// dropped, whatever its own checks would say.
func TestPriorResume(t *testing.T) {
	replay := func(prior Prior, reports []report) ([]run.Judgement, *Pruner) {
		p, _ := NewPruner(priorPolicy)
		if _, err := p.UsePrior([]Prior{prior}); err != nil {
			t.Fatal(err)
		}
		var js []run.Judgement
		for _, r := range reports {
			js = append(js, p.Judge(r.run, r.step, r.value, nil)...)
		}
		return js, p
	}
	same := priorOf(40, 10, 1, 0, 1)
	recorded, first := replay(same, own())
	again, _ := NewPruner(priorPolicy)
	again.UsePrior([]Prior{same})
	again.Resume(State{Judgements: recorded})
	if a, b := first.Prior(), again.Prior(); fmt.Sprint(a) != fmt.Sprint(b) || !a.On {
		t.Errorf("the prior after a replay: %+v, the first pruner's %+v; want the same, in use", b, a)
	}
	for _, r := range reportsOf("b", 39, 1) {
		if a, b := first.Judge(r.run, r.step, r.value, nil), again.Judge(r.run, r.step, r.value, nil); fmt.Sprint(a) != fmt.Sprint(b) || len(a) != 1 || !a[0].Stop || !a[0].Prior {
			t.Errorf("b judged %+v by the first pruner, %+v by the resumed one; want the same stop, by the prior", a, b)
		}
	}

	dropping, _ := replay(priorOf(40, 10, 1, 0, 2), own()) // learnt twice as fast: dropped
	if !slices.ContainsFunc(dropping, func(j run.Judgement) bool { return j.PriorDropped != "" }) {
		t.Fatal("the prior that learnt twice as fast was not dropped")
	}
	resumed, _ := NewPruner(priorPolicy)
	resumed.UsePrior([]Prior{same}) // changed since: one its checks would keep
	resumed.Resume(State{Judgements: dropping})
	if st := resumed.Prior(); st.On || !strings.Contains(st.Dropped, "ended better than the prior's forecasts") {
		t.Errorf("after replaying the drop with a changed prior: %+v, want it dropped as recorded", st)
	}
}

// TestPriorRefused: UsePrior says why a prior is of no use: a rule that
// does not learn from finished runs, a prior none of whose runs reported
// the metric (steps reported alone), or none of whose runs reached its
// last step; and what it took of one it uses, a run that did not reach
// the last step counting among the runs, not the finished ones.
func TestPriorRefused(t *testing.T) {
	asha, _ := NewPruner(Prune{Metric: "loss", FirstStep: 1, MaxStep: 10})
	if _, err := asha.UsePrior([]Prior{priorOf(3, 10, 1, 0, 1)}); err == nil || !strings.Contains(err.Error(), "forecast rule") {
		t.Errorf("the rank rule with a prior: %v, want refused: only the forecast rule learns from one", err)
	}
	if _, err := asha.CheckPrior(priorOf(3, 10, 1, 0, 1)); err == nil || !strings.Contains(err.Error(), "forecast rule") {
		t.Errorf("the rank rule, CheckPrior: %v, want refused", err)
	}
	if uses, err := asha.UsePrior(nil); err != nil || uses != nil {
		t.Errorf("the rank rule with no prior: %v %v, want nothing and no error", uses, err)
	}
	p, _ := NewPruner(priorPolicy)
	for _, tc := range []struct {
		prior Prior
		want  string
	}{
		{Prior{Runs: []PriorRun{{Ended: true}, {Points: [][2]float64{{1, math.NaN()}}, Ended: true}}}, "no run reported loss"},
		{Prior{MaxStep: 10, Runs: []PriorRun{{Points: [][2]float64{{1, 0.5}, {3, 0.4}}}}}, "none of its 1 runs that reported loss reached its last step, 10"},
	} {
		if _, err := p.UsePrior([]Prior{tc.prior}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("UsePrior(%+v): %v, want %q", tc.prior, err, tc.want)
		}
		if _, err := p.CheckPrior(tc.prior); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("CheckPrior(%+v): %v, want %q", tc.prior, err, tc.want)
		}
	}
	pr := priorOf(3, 10, 1, 0, 1)
	pr.Runs = append(pr.Runs, PriorRun{Points: family(5, 4, 1, 0, 1)}) // pruned at step 4
	if use, err := p.CheckPrior(pr); err != nil || fmt.Sprint(use) != "{10 4 3}" {
		t.Errorf("CheckPrior: %v %v, want last step 10, 4 runs, 3 finished", use, err)
	}
	uses, err := p.UsePrior([]Prior{pr})
	if err != nil || fmt.Sprint(uses) != "[{10 4 3}]" {
		t.Errorf("UsePrior: %v %v, want last step 10, 4 runs, 3 finished", uses, err)
	}
}

// TestPriorMax: with a metric to maximise (an accuracy), the prior's
// judgement is the same, mirrored.
func TestPriorMax(t *testing.T) {
	neg := func(rs []report) []report {
		out := make([]report, len(rs))
		for i, r := range rs {
			out[i] = report{r.run, r.step, -r.value}
		}
		return out
	}
	prior := priorOf(40, 10, -1, 0, 1)
	acc := priorPolicy
	acc.Metric, acc.Max = "acc", true
	if got, _ := priorJudgements(t, acc, []Prior{prior}, neg(append(own(), reportsOf("b", 39, 10)...))); got != "b@1:stop+prior" {
		t.Errorf("an accuracy: %s, want b stopped at step 1 by the prior", got)
	}
}

// FuzzUsePrior: a prior of any points (a ledger and metrics files are
// untrusted) never panics the pruner, which then judges runs.
func FuzzUsePrior(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8}, 10.0, true)
	f.Add([]byte{0, 0, 0, 0, 255, 255, 255, 255}, 0.0, false)
	f.Fuzz(func(t *testing.T, data []byte, last float64, ended bool) {
		var pr Prior
		pr.MaxStep = last
		var r PriorRun
		for i := 0; i+2 <= len(data); i += 2 {
			step, v := float64(data[i]%16), float64(data[i+1])/64
			if data[i] == 255 {
				v = math.NaN()
			}
			if len(r.Points) > 0 && step < r.Points[len(r.Points)-1][0] {
				pr.Runs = append(pr.Runs, r)
				r = PriorRun{Ended: ended}
			}
			r.Points = append(r.Points, [2]float64{step, v})
		}
		pr.Runs = append(pr.Runs, r)
		p, _ := NewPruner(priorPolicy)
		if _, err := p.UsePrior([]Prior{pr}); err != nil {
			return
		}
		for _, rep := range append(own(), reportsOf("b", 39, 10)...) {
			p.Judge(rep.run, rep.step, rep.value, nil)
		}
		p.Prior()
	})
}

// BenchmarkPriorJudge: what one judgement of the forecast rule costs while
// it learns from a prior of 10,000 runs (the most it keeps of them:
// maxPriorRuns finished, maxPriorValues values a rung), with 1,000 runs
// running; and what taking the prior costs (use: mapping its runs onto the
// rungs, spreading them, calibrating its forecasts).
func BenchmarkPriorJudge(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	curve := func(final, tau float64) [][2]float64 {
		var pts [][2]float64
		for s := 1.0; s <= 40; s++ {
			pts = append(pts, [2]float64{s, final + math.Exp(-s/tau) + 0.01*rng.NormFloat64()})
		}
		return pts
	}
	var prior Prior
	for range 10000 {
		prior.Runs = append(prior.Runs, PriorRun{Points: curve(0.1+0.5*rng.Float64(), 1+10*rng.Float64()), Ended: true})
	}
	policy := Prune{Metric: "loss", MaxStep: 40, Forecast: true}
	setup := func() *Pruner {
		p, _ := NewPruner(policy)
		if _, err := p.UsePrior([]Prior{prior}); err != nil {
			b.Fatal(err)
		}
		for k := range 4 { // the sweep's own runs: the prior in use
			for _, pt := range prior.Runs[k].Points {
				p.Judge(fmt.Sprintf("_%d", k), pt[0], pt[1], nil)
			}
		}
		if !p.Prior().On {
			b.Fatalf("the prior is not in use: %+v", p.Prior())
		}
		for k := range 1000 { // 1,000 running runs, to step 10, as the prior's ran
			for _, pt := range prior.Runs[4+k].Points[:10] {
				p.Judge(fmt.Sprintf("r%d", k), pt[0], pt[1], nil)
			}
		}
		if st := p.Prior(); !st.On {
			b.Fatalf("the prior is not in use with the running runs: %+v", st)
		}
		return p
	}
	b.Run("use", func(b *testing.B) {
		for range b.N {
			p, _ := NewPruner(policy)
			if _, err := p.UsePrior([]Prior{prior}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/use")
	})
	b.Run("judge", func(b *testing.B) {
		p := setup()
		b.ResetTimer()
		judged := 0
		for i := range b.N {
			// Each a new run at the first rungs, as the prior's runs were
			// there: every judgement goes through the prior's checks.
			id := fmt.Sprintf("n%d", i)
			for _, pt := range prior.Runs[i%len(prior.Runs)].Points[:3] {
				judged += len(p.Judge(id, pt[0], pt[1], nil))
			}
			p.forget(id) // it ends: 1,000 still run
			delete(p.judged, id)
		}
		b.StopTimer()
		st := p.Prior()
		if st.Dropped != "" || st.Checked < b.N {
			b.Fatalf("the prior after %d runs: %+v; want it kept, checked by each", b.N, st)
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(judged), "µs/judgement")
		b.ReportMetric(float64(boolInt(st.On)), "prior-in-use")
	})
}

// TestBinomialTail: the tail summed from k away from the mode, stopping
// once its terms no longer count, is the tail summed over every term.
func TestBinomialTail(t *testing.T) {
	lg := func(n int) float64 { v, _ := math.Lgamma(float64(n)); return v }
	for _, n := range []int{1, 2, 5, 30, 400, 3000} {
		for _, q := range []float64{0.001, 0.025, 0.1, 0.5, 0.9} {
			for k := 0; k <= n+1; k += max(1, n/37) {
				want := 0.0
				for i := k; i <= n; i++ {
					want += math.Exp(lg(n+1) - lg(i+1) - lg(n-i+1) + float64(i)*math.Log(q) + float64(n-i)*math.Log1p(-q))
				}
				if got := binomialTail(k, n, q); math.Abs(got-min(want, 1)) > 1e-9+1e-6*want {
					t.Errorf("P(X ≥ %d), X binomial(%d, %v): %g, want %g", k, n, q, got, want)
				}
			}
		}
	}
}

// TestForecasterSwap: a prior that goes in and out of use, with runs
// added between, leaves the forecaster as a full calibration of the runs
// it then holds would: a kept calibration is taken back only while no run
// was added since, and never shares buffers with the one in use.
func TestForecasterSwap(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	run := func() finishedRun {
		final := 0.1 + 0.5*rng.Float64()
		at := make([]float64, 6)
		for i := range at {
			at[i] = final + 1/float64(i+1) + 0.02*rng.NormFloat64()
		}
		return finishedRun{at: at, final: final}
	}
	var prior []finishedRun
	for range 60 {
		prior = append(prior, run())
	}
	var f forecaster
	for range 25 {
		f.add(run())
	}
	for step, op := range []string{"on", "off", "on", "add", "off", "on", "off", "add", "add", "on", "on", "off"} {
		switch op {
		case "on":
			f.swap(prior)
		case "off":
			f.swap(nil)
		case "add":
			f.add(run())
		}
		if op == "add" {
			continue
		}
		var want forecaster
		want.prior, want.done, want.best = f.prior, slices.Clone(f.done), f.best
		want.rebuild(true)
		if !slices.Equal(f.margin, want.margin) || !slices.Equal(f.marginHi, want.marginHi) || !slices.EqualFunc(f.byValue, want.byValue, slices.Equal) {
			t.Fatalf("step %d (%s): margins %v / %v, want %v / %v", step, op, f.margin, f.marginHi, want.margin, want.marginHi)
		}
	}
}
