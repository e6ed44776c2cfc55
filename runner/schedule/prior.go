package schedule

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/nodepack/nodepack/runner/run"
)

// The prior (Pruner.UsePrior): the runs of earlier sweeps of the same
// metric. The forecast rule learns from their finished runs as it learns
// from the sweep's own, once the sweep's own runs have checked them, and
// the sweep's own runs go on checking them all along. See the package
// doc's rule "The prior".

// Prior is the runs of one earlier sweep, as its output directory holds
// them: each run's values of the policy's metric by step.
type Prior struct {
	// MaxStep is the earlier sweep's last step (its pruning policy's
	// max); zero when it had none: the last step most of its runs that
	// ended by themselves reached.
	MaxStep float64
	Runs    []PriorRun
}

// PriorRun is one run of an earlier sweep: its values of the metric by
// step (steps rising; values that are not finite numbers are passed
// over), and whether it ended by itself (it succeeded, rather than being
// pruned, stopped or failing): with a value at the prior's last step, it
// is a finished run.
type PriorRun struct {
	Points [][2]float64
	Ended  bool
}

// PriorUse says what the forecast rule took of one prior: its last step,
// how many of its runs reported the metric (Runs), and how many of them
// it learns from (Finished: they reached the last step).
type PriorUse struct {
	MaxStep        float64
	Runs, Finished int
}

// Settings of the prior.
const (
	// maxPriorRuns bounds the prior's finished runs the forecast learns
	// from (an even spread of them by final), maxPriorValues the values
	// per rung its checks compare with.
	maxPriorRuns   = 256
	maxPriorValues = 4096
	// priorAlpha: with a prior, 1-priorAlpha of the finished runs end
	// inside the intervals made for them at every rung at once (joint).
	priorAlpha = 0.1
	// The evidence before the prior helps judge: this many of the
	// sweep's own runs with a value at the first rung, and this many of
	// its own runs finished, their finals where the prior's forecasts
	// said (priorOn).
	priorRuns     = 4
	priorFinished = 2
	// priorTrustZ: the sweep's finished runs must not end better than
	// the prior's forecasts said by this many standard errors for the
	// prior to be used; priorDropZ drops it for good. priorScaleZ and
	// priorProgressZ bound the scale and the progress checks' statistics,
	// priorTail the outer tails the scale check counts in, and priorP how
	// unlikely a count of tail values or of missed runs may be.
	priorTrustZ    = 1.5
	priorDropZ     = 3
	priorScaleZ    = 3
	priorProgressZ = 3
	priorTail      = 0.05
	priorP         = 1e-3
)

// priorState is the prior as the pruner holds it, and what the sweep's
// own runs said of it so far.
type priorState struct {
	uses []PriorUse
	// runs are its finished runs on this policy's rungs (lower better),
	// at0 every run's value at the first rung (sorted), and steps, per
	// rung but the last two, its runs that reached it and the next, by
	// their best value so far there, with what they gained to the next.
	runs  []finishedRun
	at0   []float64
	steps [][]stood
	// alone forecasts from the prior's runs alone. missRate is the share
	// of its runs whose finals its intervals miss, each forecast from the
	// others; biasMean and biasSD the mean and spread of their residuals
	// (residual).
	alone            forecaster
	missRate         float64
	biasMean, biasSD float64
	scale            sums // the scale check: own values' places at the first rung
	low, high        int  // of them, in the prior's lower and upper tails
	seen             map[string]bool
	progress         sums // the progress check: each own run's mean place
	moving           map[string]sums
	finished, missed int    // own finished runs the prior forecast; those it missed
	bias             sums   // their residuals
	dropped          string // why the prior was dropped; "" while it is not
	stopped          int    // runs stopped by forecasts that learnt from it
	note             string // a drop to say with the judgement being made
}

// sums is a count and a sum.
type sums struct {
	n   int
	sum float64
}

// UsePrior gives the forecast rule the runs of earlier sweeps (see the
// package doc): each run that reached its prior's last step is a finished
// run the forecast may learn from, its steps mapped onto this policy's by
// their fraction of the last step (step s of a prior that ended at step L
// is step s·MaxStep/L here); every run's values check this sweep's. The
// prior's best final is never a bar. Call it before Resume; it returns
// what it took of each prior. An error says a prior is of no use: a rule
// other than the forecast, a prior none of whose runs reported the
// metric, or none of whose runs reached its last step.
func (p *Pruner) UsePrior(priors []Prior) ([]PriorUse, error) {
	if len(priors) == 0 {
		return nil, nil
	}
	if !p.cfg.Forecast {
		return nil, fmt.Errorf("prune: %w", errPriorRule)
	}
	st := &priorState{seen: map[string]bool{}, moving: map[string]sums{}, steps: make([][]stood, max(len(p.rungs)-2, 0))}
	for k, pr := range priors {
		use, runs, tracks := p.mapPrior(pr)
		if err := use.check(p.cfg.Metric); err != nil {
			return nil, fmt.Errorf("prune: prior %d: %w", k+1, err)
		}
		for _, at := range tracks {
			if !math.IsNaN(at[0]) {
				st.at0 = append(st.at0, at[0])
			}
			for i := range st.steps {
				if !math.IsNaN(at[i]) && !math.IsNaN(at[i+1]) {
					st.steps[i] = append(st.steps[i], stood{value: at[i], gain: at[i+1] - at[i]})
				}
			}
		}
		st.uses = append(st.uses, use)
		st.runs = append(st.runs, runs...)
	}
	st.runs = spread(st.runs, maxPriorRuns, func(r finishedRun) float64 { return r.final })
	st.at0 = spread(st.at0, maxPriorValues, func(v float64) float64 { return v })
	for i := range st.steps {
		st.steps[i] = spread(st.steps[i], maxPriorValues, func(s stood) float64 { return s.value })
	}
	st.alone.alone = true
	for _, r := range st.runs {
		st.alone.add(r)
	}
	var rs []float64
	missed := 0
	for k := range st.alone.count() {
		r := st.alone.run(k)
		v, miss, ok := st.alone.check(r.at, r.final, k)
		if ok {
			rs = append(rs, v)
			if miss {
				missed++
			}
		}
	}
	if len(rs) > 0 {
		st.missRate = float64(missed) / float64(len(rs))
	}
	st.biasMean, st.biasSD = meanSD(rs)
	p.prior = st
	return slices.Clone(st.uses), nil
}

// errPriorRule is the error for a prior given to another rule than the
// forecast.
var errPriorRule = errors.New("earlier sweeps inform the forecast rule only")

// CheckPrior says what UsePrior would take of pr, without taking it:
// its last step, its runs that reported the metric and those that
// finished; an error when UsePrior would refuse it (the words name no
// prior: the caller says which).
func (p *Pruner) CheckPrior(pr Prior) (PriorUse, error) {
	if !p.cfg.Forecast {
		return PriorUse{}, errPriorRule
	}
	use, _, _ := p.mapPrior(pr)
	return use, use.check(p.cfg.Metric)
}

// check says whether a prior of which the forecast took use is of use:
// some of its runs reported metric, and some reached its last step.
func (use PriorUse) check(metric string) error {
	switch {
	case use.Runs == 0:
		return fmt.Errorf("no run reported %s", metric)
	case use.Finished == 0:
		return fmt.Errorf("none of its %d runs that reported %s reached its last step, %v", use.Runs, metric, use.MaxStep)
	}
	return nil
}

// spread returns at most n of xs, evenly spread over them by key (the
// first and the last included), in key order.
func spread[T any](xs []T, n int, key func(T) float64) []T {
	slices.SortStableFunc(xs, func(a, b T) int { return cmp.Compare(key(a), key(b)) })
	if len(xs) <= n {
		return xs
	}
	out := make([]T, n)
	for i := range out {
		out[i] = xs[i*(len(xs)-1)/(n-1)]
	}
	return out
}

// mapPrior maps the runs of pr onto this policy's rungs: every run's best
// value so far at each rung but the last (lower better; NaN from the
// first rung whose step, scaled, it did not reach), its track; and the
// finished runs, with their finals.
func (p *Pruner) mapPrior(pr Prior) (use PriorUse, runs []finishedRun, tracks [][]float64) {
	last := pr.MaxStep
	if !(last > 0) || math.IsInf(last, 0) {
		last = commonLast(pr.Runs)
	}
	use.MaxStep = last
	if !(last > 0) {
		return use, nil, nil
	}
	scale := last / p.cfg.MaxStep
	n := len(p.rungs) - 1
	for _, r := range pr.Runs {
		at := make([]float64, n)
		best, reached := math.Inf(1), false
		k := 0 // its first point at or past the rung's step
		for i := range at {
			step := p.rungs[i] * scale * (1 - 1e-9)
			for k < len(r.Points) && !(r.Points[k][0] >= step && finite(r.Points[k][1])) {
				k++
			}
			if k == len(r.Points) {
				for ; i < n; i++ {
					at[i] = math.NaN()
				}
				break
			}
			best = min(best, p.better(r.Points[k][1]))
			at[i], reached = best, true
		}
		if !reached {
			continue
		}
		use.Runs++
		tracks = append(tracks, at)
		end := slices.IndexFunc(r.Points, func(pt [2]float64) bool { return pt[0] >= last*(1-1e-9) && finite(pt[1]) })
		if r.Ended && end >= 0 {
			runs = append(runs, finishedRun{at: at, final: p.better(r.Points[end][1])})
			use.Finished++
		}
	}
	return use, runs, tracks
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// commonLast is the last step most of the runs that ended reached (the
// highest of those as common), 0 with none.
func commonLast(runs []PriorRun) float64 {
	count := map[float64]int{}
	for _, r := range runs {
		if r.Ended && len(r.Points) > 0 {
			count[r.Points[len(r.Points)-1][0]]++
		}
	}
	best, n := 0.0, 0
	for s, c := range count {
		if c > n || c == n && s > best {
			best, n = s, c
		}
	}
	return best
}

// check forecasts a finished run (its track and final, leaving out
// finished run skip; -1 for none) at every rung it was judged at: its
// residual, how far its final lies from the forecasts over the spread of
// the gains each was made from, on average; and whether its final fell
// outside an interval. ok is false with no forecast.
func (f *forecaster) check(track []float64, final float64, skip int) (residual float64, missed, ok bool) {
	n := 0
	for i, b := range track {
		if math.IsNaN(b) || i >= len(f.margin) || math.IsInf(f.margin[i], 1) || math.IsInf(f.marginHi[i], 1) {
			continue
		}
		point, spread, fine := f.likeliest(i, b, skip)
		if !fine {
			continue
		}
		residual += (final - point) / spread
		missed = missed || final < point-f.margin[i] || final > point+f.marginHi[i]
		n++
	}
	if n == 0 {
		return 0, false, false
	}
	return residual / float64(n), missed, true
}

func meanSD(xs []float64) (mean, sd float64) {
	if len(xs) < 2 {
		return 0, 1
	}
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	for _, x := range xs {
		sd += (x - mean) * (x - mean)
	}
	return mean, max(math.Sqrt(sd/float64(len(xs)-1)), 1e-9)
}

// biasZ is how far the sweep's finished runs' mean residual lies from
// the prior's own, in standard errors: below zero, they ended better
// than the prior's forecasts said.
func (st *priorState) biasZ() float64 {
	if st.bias.n == 0 {
		return 0
	}
	n := float64(st.bias.n)
	return (st.bias.sum/n - st.biasMean) / (st.biasSD / math.Sqrt(n))
}

// on says the forecast may learn from the prior: it was not dropped,
// priorRuns of the sweep's own runs have a value at the first rung, and
// priorFinished of its own finished runs ended where the prior's
// forecasts said (their misses are likely at the prior's own miss rate,
// and they did not end better than forecast).
func (st *priorState) on() bool {
	return st.dropped == "" && st.scale.n >= priorRuns && st.finished >= priorFinished &&
		binomialTail(st.missed, st.finished, max(st.missRate, priorAlpha)) >= 0.05 && st.biasZ() > -priorTrustZ &&
		math.Abs(st.progress.z()) < priorTrustZ && math.Abs(st.scale.z()) < priorTrustZ
}

// z is how far the mean of n places (each uniform in (0, 1) for a prior
// that matches) lies from a half, in standard errors: the scale check's
// (above zero: the sweep's runs are worse at the first rung than the
// prior's) and the progress check's (above zero: they learn more slowly
// from one rung to the next than the prior's runs that stood where they
// stood).
func (s sums) z() float64 {
	if s.n == 0 {
		return 0
	}
	n := float64(s.n)
	return (s.sum - n/2) / math.Sqrt(n/12)
}

// settlePrior puts the prior's runs among those the forecast learns from
// while the sweep's own evidence says so, and takes them out when it no
// longer does.
func (p *Pruner) settlePrior() {
	on := p.prior.on()
	if on == (p.fc.prior != nil) {
		return
	}
	if on {
		p.fc.swap(p.prior.runs)
	} else {
		p.fc.swap(nil)
		clear(p.pess)
	}
}

// dropPrior stops using the prior for good, saying why with the judgement
// being made.
func (p *Pruner) dropPrior(why string) {
	st := p.prior
	if st.dropped != "" {
		return
	}
	st.dropped, st.note = why, why
}

// priorSees takes judgement j, which the pruner records, into the
// prior's checks: an own run's value at the first rung (the scale
// check), a step from one rung to the next (the progress check), a
// finished run (the coverage and bias checks), or an earlier session's
// drop (Replay); then puts the prior in or out of use as they say.
func (p *Pruner) priorSees(j run.Judgement) {
	st := p.prior
	if st == nil {
		return
	}
	if j.PriorDropped != "" {
		p.dropPrior(j.PriorDropped)
		st.note = ""
	}
	if st.dropped == "" {
		v := p.better(j.Value)
		switch tr := p.tracks[j.Run]; {
		case !finite(v):
		case j.Rung == 0:
			p.checkScale(j.Run, v)
		case j.Rung == len(p.rungs)-1 && tr != nil:
			p.checkFinished(tr, v)
		case tr != nil && j.Rung < len(tr) && !math.IsNaN(tr[j.Rung-1]):
			p.checkProgress(j.Run, j.Rung-1, tr[j.Rung-1], p.bestSoFar(j.Run, j.Rung, v))
		}
	}
	p.settlePrior()
}

// stoppedBy counts judgement j, final (a live one's stop is known only
// once the pruner knows whether its run still runs), when it stopped a
// run by a forecast that learnt from the prior.
func (p *Pruner) stoppedBy(j run.Judgement) {
	if p.prior != nil && j.Stop && j.Prior {
		p.prior.stopped++
	}
}

// checkScale takes an own run's value at the first rung (lower better):
// its place among the prior's there. The prior is dropped when the
// places are unlikely for a matching task: their mean too far from a
// half, or too many in either outer tail.
func (p *Pruner) checkScale(id string, v float64) {
	st := p.prior
	if st.seen[id] || len(st.at0) == 0 {
		return
	}
	st.seen[id] = true
	m := len(st.at0)
	below, _ := slices.BinarySearch(st.at0, v)
	upTo, _ := slices.BinarySearch(st.at0, math.Nextafter(v, math.Inf(1)))
	st.scale.n++
	st.scale.sum += (float64(below+upTo)/2 + 0.5) / float64(m+1) // its mid-rank place, in (0, 1)
	// Its tails: fewer than r of the prior's values below it (above it),
	// as likely as r/(m+1) for a value of a matching task.
	r := max(1, int(priorTail/2*float64(m+1)))
	share := float64(r) / float64(m+1)
	if below < r {
		st.low++
	}
	if m-upTo < r {
		st.high++
	}
	z := st.scale.z()
	switch {
	case math.Abs(z) > priorScaleZ:
		where := "worse"
		if z < 0 {
			where = "better"
		}
		p.dropPrior(fmt.Sprintf("this sweep's runs are %s than the prior's at step %v (%d runs, z %.1f)", where, p.rungs[0], st.scale.n, math.Abs(z)))
	case binomialTail(st.high, st.scale.n, share) < priorP || binomialTail(st.low, st.scale.n, share) < priorP:
		p.dropPrior(fmt.Sprintf("%d of this sweep's %d runs at step %v are beyond the prior's outer %g%% there", max(st.high, st.low), st.scale.n, p.rungs[0], 100*priorTail/2))
	}
}

// checkProgress takes an own run's step from rung i to the next: its
// best value so far there (from) and at the next (to), lower better. Its
// gain is placed among those of the prior's runs that stood nearest to it
// at rung i. A run's steps are alike (one that learns fast does so at
// every rung), so each run counts once, by the mean place of its steps,
// whose spread is at most a uniform's; the prior is dropped when the
// runs' places are unlikely for a matching task (their mean too far from
// a half: the sweep's runs learn faster or slower than the prior's).
func (p *Pruner) checkProgress(id string, i int, from, to float64) {
	st := p.prior
	if i >= len(st.steps) || len(st.steps[i]) == 0 {
		return
	}
	at := st.steps[i]
	k := min(len(at), max(forecastNeighbours, min(len(at)/4, maxNeighbours)))
	hi, _ := slices.BinarySearchFunc(at, from, func(s stood, b float64) int { return cmp.Compare(s.value, b) })
	lo := hi - 1
	gain, place := to-from, 0.5
	for range k {
		var g float64
		if hi >= len(at) || lo >= 0 && from-at[lo].value <= at[hi].value-from {
			g, lo = at[lo].gain, lo-1
		} else {
			g, hi = at[hi].gain, hi+1
		}
		switch {
		case g < gain:
			place++
		case g == gain:
			place += 0.5
		}
	}
	place /= float64(k + 1)
	m := st.moving[id]
	if m.n > 0 {
		st.progress.sum -= m.sum / float64(m.n)
	} else {
		st.progress.n++
	}
	m.n, m.sum = m.n+1, m.sum+place
	st.moving[id] = m
	st.progress.sum += m.sum / float64(m.n)
	if z := st.progress.z(); math.Abs(z) > priorProgressZ {
		how := "faster"
		if z > 0 {
			how = "slower"
		}
		p.dropPrior(fmt.Sprintf("this sweep's runs learn %s than the prior's from one rung to the next (%d runs, z %.1f)", how, st.progress.n, math.Abs(z)))
	}
}

// checkFinished takes an own run that finished (its track and final,
// lower better), forecast from the prior's runs alone at each rung it was
// judged at: did its final fall inside the intervals (the coverage
// check), and did it end better than forecast (the bias check)? The
// prior is dropped when the misses are unlikely at the prior's own miss
// rate, or when the sweep's runs end better than forecast by priorDropZ
// standard errors: a prior that forecasts too little gain would stop
// this sweep's best runs.
func (p *Pruner) checkFinished(tr []float64, final float64) {
	st := p.prior
	residual, missed, ok := st.alone.check(tr, final, -1)
	if !ok {
		return
	}
	st.finished++
	if missed {
		st.missed++
	}
	st.bias.n++
	st.bias.sum += residual
	switch z := st.biasZ(); {
	case z < -priorDropZ:
		p.dropPrior(fmt.Sprintf("this sweep's %d finished runs ended better than the prior's forecasts said (z %.1f)", st.bias.n, -z))
	case binomialTail(st.missed, st.finished, max(st.missRate, priorAlpha)) < priorP:
		p.dropPrior(fmt.Sprintf("the prior's forecasts missed %d of this sweep's %d finished runs, where they miss %.0f%% of its own", st.missed, st.finished, 100*st.missRate))
	}
}

// binomialTail is P(X ≥ k) for X binomial(n, q). It sums the terms from
// k away from the distribution's mode (the tail itself above the mean,
// else one minus the part below k), each from the one before, and stops
// once they no longer add to the sum: some √n terms, not n, so that a
// sweep of many runs pays little for each check.
func binomialTail(k, n int, q float64) float64 {
	switch {
	case k <= 0 || q >= 1:
		return 1
	case k > n || q <= 0:
		return 0
	}
	lg := func(n int) float64 { v, _ := math.Lgamma(float64(n)); return v }
	pmf := func(i int) float64 {
		return math.Exp(lg(n+1) - lg(i+1) - lg(n-i+1) + float64(i)*math.Log(q) + float64(n-i)*math.Log1p(-q))
	}
	odds := q / (1 - q)
	sum := 0.0
	if float64(k) > float64(n)*q { // terms fall from k up
		for i, t := k, pmf(k); i <= n && t > sum*1e-17; i++ {
			sum += t
			t *= float64(n-i) / float64(i+1) * odds
		}
		return min(sum, 1)
	}
	for i, t := k-1, pmf(k-1); i >= 0 && t > sum*1e-17; i-- { // terms fall from k-1 down
		sum += t
		t *= float64(i) / float64(n-i+1) / odds
	}
	return max(1-sum, 0)
}

// PriorState is what the prior did so far: what was taken of each prior
// (nil without one), whether the forecast learns from it now (On), why it
// was dropped ("" while it was not), how many of the sweep's own runs
// checked it at the first rung and finished, and how many runs were
// stopped by forecasts that learnt from it.
type PriorState struct {
	Uses              []PriorUse
	On                bool
	Dropped           string
	Checked, Finished int
	Stopped           int
}

// Prior returns what the prior did so far; the zero PriorState without
// one.
func (p *Pruner) Prior() PriorState {
	st := p.prior
	if st == nil {
		return PriorState{}
	}
	return PriorState{Uses: slices.Clone(st.uses), On: p.fc.prior != nil, Dropped: st.dropped, Checked: st.scale.n, Finished: st.finished, Stopped: st.stopped}
}
