package schedule

import (
	"cmp"
	"hash/fnv"
	"math"
	"slices"

	"github.com/nodepack/nodepack/runner/run"
)

// The forecast rule (Prune.Forecast): the rank rule at its rungs, and
// between them a forecast learnt from the sweep's own finished runs. See
// Prune.

// Settings of the forecast rule.
const (
	// forecastAlpha is the share of finished runs' finals the optimistic
	// end of a forecast may miss: its coverage is 1-forecastAlpha.
	forecastAlpha = 0.05
	// forecastNeighbours is how many finished runs, the nearest in value
	// at the rung, a forecast is made from (at least; a quarter of them
	// when more, up to maxNeighbours).
	forecastNeighbours = 7
	maxNeighbours      = 32
	// maxCalibration bounds the finished runs a calibration forecasts
	// at each rung: the most recent ones.
	maxCalibration = 64
	// maxFinished bounds the finished runs the forecast learns from: the
	// most recent ones.
	maxFinished = 256
	// cautiousShare: one run in cautiousShare (by its id) is judged only
	// from a third of the last step on.
	cautiousShare = 4
	// denseGrowth is the ratio of consecutive forecast rungs.
	denseGrowth = math.Sqrt2
)

// finishedRun is a run that reached the policy's last step: its best
// value so far at each rung (NaN where it was not judged there), and its
// value at the last step; lower is better.
type finishedRun struct {
	at    []float64
	final float64
}

// forecaster holds the finished runs the forecast rule learns from, and
// the calibration of its intervals on them: the prior's (earlier sweeps',
// while in use) and the sweep's own.
type forecaster struct {
	prior []finishedRun // the prior's finished runs, in use; nil without
	done  []finishedRun // the sweep's own, the most recent maxFinished, oldest first
	best  float64       // the best final of the sweep's own finished runs; +Inf before one
	// byValue is, per rung, the finished runs that were judged there,
	// by their best value so far there, with what they gained from there
	// to their final.
	byValue [][]stood
	// margin is, per rung, how far below its likeliest value a run's
	// final may lie: the split-conformal quantile of the finished runs'
	// misses (their forecast, made from the others, less their final);
	// +Inf while too few runs finished for a 1-forecastAlpha bound.
	// marginHi is how far above it may lie, the same way, with a prior
	// (or alone); +Inf without, where nothing asks for it.
	margin, marginHi []float64
	// calibrated is how many runs had finished when the margins were
	// last calibrated.
	calibrated int
	gains      []float64 // likeliest's, reused
	// alone says the forecaster holds a prior's runs alone (the prior's
	// checks): it calibrates as one with a prior does.
	alone bool
	// adds counts the finished runs added; kept holds, with the prior
	// and without, the last full calibration (swap) while no run was
	// added since.
	adds int
	kept [2]*calibration
}

// calibration is what rebuild(true) made of the finished runs, when
// adds was at.
type calibration struct {
	at               int
	byValue          [][]stood
	margin, marginHi []float64
}

// swap puts prior (nil: none) among the runs the forecaster learns from
// and calibrates in full, or takes back the full calibration it had with
// them when no run was added since: a prior that goes in and out of use
// from one judgement to the next costs no recalibration each time. A
// kept calibration holds the buffers it was made in; the forecaster
// leaves them to it, and works in others, while it is in the other state.
func (f *forecaster) swap(prior []finishedRun) {
	from, to := boolIndex(f.prior != nil), boolIndex(prior != nil)
	for _, k := range []int{from, to} {
		if c := f.kept[k]; c != nil && c.at != f.adds {
			f.kept[k] = nil // runs were added since: no longer a full calibration
		}
	}
	f.prior = prior
	if c := f.kept[to]; c != nil {
		f.byValue, f.margin, f.marginHi, f.calibrated = c.byValue, c.margin, c.marginHi, f.count()
		return
	}
	if f.kept[from] != nil {
		f.byValue, f.margin, f.marginHi = nil, nil, nil // the kept one's buffers stay its own
	}
	f.rebuild(true)
	f.kept[to] = &calibration{at: f.adds, byValue: f.byValue, margin: f.margin, marginHi: f.marginHi}
}

func boolIndex(b bool) int {
	if b {
		return 1
	}
	return 0
}

// stood is a finished run at a rung: its best value so far there, what
// it gained from there to its final, and its place among the finished
// runs (the prior's first, then the sweep's own: see run).
type stood struct {
	value, gain float64
	run         int
}

// count is how many finished runs the forecaster learns from.
func (f *forecaster) count() int { return len(f.prior) + len(f.done) }

// run is finished run k: the prior's first, then the sweep's own.
func (f *forecaster) run(k int) finishedRun {
	if k < len(f.prior) {
		return f.prior[k]
	}
	return f.done[k-len(f.prior)]
}

// add takes a finished run of the sweep's own, and calibrates the margins
// again while few runs have finished, then once in every sixteenth of
// those that have: each calibration forecasts every finished run from the
// others.
func (f *forecaster) add(r finishedRun) {
	if len(f.done) == 0 || r.final < f.best {
		f.best = r.final
	}
	if len(f.done) == maxFinished {
		f.done = slices.Delete(f.done, 0, 1)
	}
	f.done = append(f.done, r)
	f.adds++
	f.rebuild(false)
}

// rebuild sorts the finished runs by value at each rung again, and
// calibrates the margins when always is set, when few runs have finished,
// or when a sixteenth more have since the last calibration.
func (f *forecaster) rebuild(always bool) {
	all := f.count()
	if all == 0 {
		f.byValue, f.margin, f.marginHi, f.calibrated = f.byValue[:0], f.margin[:0], f.marginHi[:0], 0
		return
	}
	n := len(f.run(0).at)
	f.byValue = slices.Grow(f.byValue[:0], n)[:n]
	for i := range f.byValue {
		at := f.byValue[i][:0]
		for k := range all {
			if d := f.run(k); !math.IsNaN(d.at[i]) {
				at = append(at, stood{d.at[i], d.final - d.at[i], k})
			}
		}
		slices.SortFunc(at, func(a, b stood) int { return cmp.Compare(a.value, b.value) })
		f.byValue[i] = at
	}
	if !always && len(f.margin) == n && all-f.calibrated < max(1, all/16) {
		return
	}
	f.calibrated = all
	f.margin = slices.Grow(f.margin[:0], n)[:n]
	f.marginHi = slices.Grow(f.marginHi[:0], n)[:n]
	var misses, over []float64
	joint := f.prior != nil || f.alone
	for i := range f.margin {
		misses, over = misses[:0], over[:0]
		for _, d := range f.byValue[i] {
			if !f.calibrates(d.run) {
				continue
			}
			if point, _, ok := f.likeliest(i, d.value, d.run); ok {
				final := f.run(d.run).final
				misses = append(misses, point-final)
				if joint {
					over = append(over, final-point)
				}
			}
		}
		if !joint {
			// The pessimistic end is the prior's bar alone: none without.
			f.margin[i], f.marginHi[i] = conformal(misses, forecastAlpha), math.Inf(1)
			continue
		}
		// Only the rungs' scales: the joint bound below widens them.
		alpha := max(forecastAlpha, 1/float64(len(misses)+1))
		f.margin[i], f.marginHi[i] = conformal(misses, alpha), conformal(over, alpha)
	}
	if joint {
		f.joint()
	}
}

// calibrates says finished run k is among those the margins are
// calibrated on: the prior's, and the sweep's own most recent
// maxCalibration.
func (f *forecaster) calibrates(k int) bool {
	return k < len(f.prior) || k >= f.count()-maxCalibration
}

// joint widens the rungs' margins by one factor each side, so that
// 1-priorAlpha of the finished runs, each forecast from the others, end
// inside the intervals made for them at every rung they were judged at,
// not at each rung alone: a run is judged at a dozen rungs, and the
// run's winner must survive them all.
func (f *forecaster) joint() {
	var lo, hi []float64
	for k := range f.count() {
		if !f.calibrates(k) {
			continue
		}
		r := f.run(k)
		worstLo, worstHi, any := 0.0, 0.0, false
		for i, b := range r.at {
			if math.IsNaN(b) || math.IsInf(f.margin[i], 1) || math.IsInf(f.marginHi[i], 1) {
				continue
			}
			point, _, ok := f.likeliest(i, b, k)
			if !ok {
				continue
			}
			any = true
			worstLo = max(worstLo, (point-r.final)/max(f.margin[i], 1e-9))
			worstHi = max(worstHi, (r.final-point)/max(f.marginHi[i], 1e-9))
		}
		if any {
			lo, hi = append(lo, worstLo), append(hi, worstHi)
		}
	}
	cl, ch := max(conformal(lo, priorAlpha), 1), max(conformal(hi, priorAlpha), 1)
	for i := range f.margin {
		f.margin[i] = max(f.margin[i], 1e-9) * cl
		f.marginHi[i] = max(f.marginHi[i], 1e-9) * ch
	}
}

// conformal is the ceil((n+1)(1-alpha))-th smallest of the n misses (at
// least 0), or +Inf when there are too few for it.
func conformal(misses []float64, alpha float64) float64 {
	slices.Sort(misses)
	at := int(math.Ceil(float64(len(misses)+1)*(1-alpha))) - 1
	if at >= len(misses) || at < 0 {
		return math.Inf(1)
	}
	return max(misses[at], 0)
}

// likeliest is where a run whose best value so far at rung i is b ends,
// as the finished runs that stood nearest to it there ended: b plus the
// median of what they gained from there; spread is how widely their gains
// spread (half the span from their 10% quantile to their 90%). skip is a
// finished run left out (calibration), -1 for none. ok is false with
// none to learn from.
func (f *forecaster) likeliest(i int, b float64, skip int) (point, spread float64, ok bool) {
	at := f.byValue[i]
	n := len(at)
	if skip >= 0 {
		n--
	}
	if n <= 0 {
		return 0, 0, false
	}
	k := min(n, max(forecastNeighbours, min(n/4, maxNeighbours)))
	// The k nearest, from where b would go outwards.
	hi, _ := slices.BinarySearchFunc(at, b, func(s stood, b float64) int { return cmp.Compare(s.value, b) })
	lo := hi - 1
	gains := f.gains[:0]
	for len(gains) < k {
		switch {
		case lo >= 0 && at[lo].run == skip:
			lo--
		case hi < len(at) && at[hi].run == skip:
			hi++
		case hi >= len(at) || lo >= 0 && b-at[lo].value <= at[hi].value-b:
			gains = append(gains, at[lo].gain)
			lo--
		default:
			gains = append(gains, at[hi].gain)
			hi++
		}
	}
	f.gains = gains
	slices.Sort(gains)
	return b + quantile(gains, 0.5), (quantile(gains, 0.9)-quantile(gains, 0.1))/2 + 1e-3, true
}

// interval is likeliest's forecast at rung i with the optimistic and the
// pessimistic ends of its interval.
func (f *forecaster) interval(i int, b float64, skip int) (point, opt, pess float64, ok bool) {
	point, _, ok = f.likeliest(i, b, skip)
	return point, point - f.margin[i], point + f.marginHi[i], ok
}

// forecast is where a run whose best value so far at rung i is b ends:
// the likeliest value and the optimistic and pessimistic ends of its
// interval; ok is false while the rung has no calibrated margin.
func (f *forecaster) forecast(i int, b float64) (point, optimistic, pessimistic float64, ok bool) {
	if i >= len(f.margin) || math.IsInf(f.margin[i], 1) || len(f.byValue[i]) == 0 {
		return 0, 0, 0, false
	}
	return f.interval(i, b, -1)
}

// forecastRungs are the forecast rule's rungs: the rank rule's (first,
// first×eta, … below last), the forecast's between them (from first/eta,
// each denseGrowth times the one before), all rounded up to whole steps
// when last is one, none twice, and last itself, where a run's final
// value is taken. rank says which are the rank rule's.
func forecastRungs(first, last float64, eta int) (rungs []float64, rank []bool) {
	whole := last == math.Trunc(last)
	round := func(s float64) float64 {
		if whole {
			return math.Ceil(s - 1e-9)
		}
		return s
	}
	ranks := map[float64]bool{}
	var all []float64
	for s := first; s < last && len(ranks) < 32; s *= float64(eta) {
		if r := round(s); r < last {
			ranks[r] = true
			all = append(all, r)
		}
	}
	for k := 0; k < 96; k++ {
		r := round(first / float64(eta) * math.Pow(denseGrowth, float64(k)))
		if r >= last {
			break
		}
		for rk := range ranks { // one of the rank rule's, but for rounding
			if math.Abs(r-rk) <= 1e-9*rk {
				r = rk
			}
		}
		if r > 0 {
			all = append(all, r)
		}
	}
	slices.Sort(all)
	all = slices.Compact(all)
	for _, r := range all {
		rungs, rank = append(rungs, r), append(rank, ranks[r])
	}
	return append(rungs, last), append(rank, false)
}

// cautious says run id is in the cautious cohort.
func cautious(id string) bool {
	h := fnv.New32a()
	h.Write([]byte(id))
	return h.Sum32()%cautiousShare == 0
}

// forget drops what the forecast rule keeps of run id while it runs: it
// was pruned for good. (A run that ends short of the last step by itself
// keeps its track: Finish takes an ended run's points one at a time, and
// does not know which is its last.)
func (p *Pruner) forget(id string) {
	delete(p.tracks, id)
	delete(p.optimistic, id)
	delete(p.pess, id)
}

// bestSoFar is run id's best value at its rungs before i and v, lower
// better.
func (p *Pruner) bestSoFar(id string, i int, v float64) float64 {
	for k, b := range p.tracks[id] {
		if k < i && !math.IsNaN(b) {
			v = min(v, b)
		}
	}
	return v
}

// track notes judgement j in its run's track; a judgement at the last
// step makes the run a finished one the forecast learns from, and says
// whether the forecasts made for it held.
func (p *Pruner) track(j run.Judgement) {
	v := p.better(j.Value)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return
	}
	tr := p.tracks[j.Run]
	if tr == nil {
		tr = make([]float64, len(p.rungs)-1)
		for k := range tr {
			tr[k] = math.NaN()
		}
		p.tracks[j.Run] = tr
	}
	if j.Rung < len(tr) {
		tr[j.Rung] = p.bestSoFar(j.Run, j.Rung, v)
		return
	}
	p.fc.add(finishedRun{at: tr, final: v})
	if opt, ok := p.optimistic[j.Run]; ok {
		p.coverage.Forecasts++
		if v >= opt {
			p.coverage.Held++
		}
	}
	p.forget(j.Run)
}

// bar is what a run's optimistic forecast must reach: the best final of
// the sweep's own finished runs and, while the prior is in use, the best
// pessimistic forecast of another of its running runs; +Inf with
// neither. others is how many runs it was chosen from.
func (p *Pruner) bar(id string) (bar float64, others int) {
	bar, others = math.Inf(1), len(p.fc.done)
	if len(p.fc.done) > 0 {
		bar = p.fc.best
	}
	if p.fc.prior != nil {
		for r, v := range p.pess {
			if r != id {
				bar = min(bar, v)
				others++
			}
		}
	}
	return bar, others
}

// Coverage is how the forecast rule's intervals held on the runs that
// finished: of the finished runs forecast while they ran (Forecasts), how
// many ended at or above the optimistic end of every forecast made for
// them (Held). The rule asks for 1-forecastAlpha.
type Coverage struct{ Forecasts, Held int }

// Coverage returns how the forecasts' optimistic ends held so far.
func (p *Pruner) Coverage() Coverage { return p.coverage }

// judgeForecast judges run id at rung i by the forecast rule.
func (p *Pruner) judgeForecast(id string, i int, step, value float64) run.Judgement {
	j := run.Judgement{Run: id, Metric: p.cfg.Metric, Rung: i, Step: p.rungs[i], At: step, Value: value, Cutoff: math.NaN(), Others: len(p.values[i])}
	v := p.better(value)
	last := i == len(p.rungs)-1
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		j.Stop = !last
	case last || cautious(id) && p.rungs[i] < p.cfg.MaxStep/3 && p.fc.prior == nil:
	default:
		if point, opt, pess, ok := p.fc.forecast(i, p.bestSoFar(id, i, v)); ok {
			j.Forecasted, j.Forecast, j.Optimistic = true, p.better(point), p.better(opt)
			bar, others := p.bar(id)
			if !math.IsInf(bar, 1) {
				j.Cutoff, j.Others = p.better(bar), others
			}
			j.Stop = opt > bar
			j.Prior = p.fc.prior != nil
			if was, ok := p.optimistic[id]; !ok || opt > was {
				p.optimistic[id] = opt
			}
			if p.fc.prior != nil && !math.IsInf(pess, 1) {
				p.pess[id] = pess
			}
		}
		if !j.Stop && p.rank[i] && len(p.values[i]) > 0 && p.fc.prior == nil {
			j.Cutoff, j.Others = p.cutoff(p.values[i]), len(p.values[i])
			j.Stop = v > p.better(j.Cutoff)
		}
	}
	p.record(j)
	return j
}

// mayWinForecast says whether the run j paused may still win by the
// forecast rule as the sweep is now: its optimistic forecast at its rung
// is at or below the best final (while the rung has a calibrated margin),
// and at a rank rung its value is within the best 1/Eta of the rung's.
// Its score, lower first, is its likeliest forecast, else the share of
// the rung's values better than its own.
func (p *Pruner) mayWinForecast(j run.Judgement) (float64, bool) {
	i, v := j.Rung, p.better(j.Value)
	vals := p.values[i]
	score, ok := math.Inf(1), true // with no forecast, after those with one
	if p.rank[i] && len(vals) > 0 && p.fc.prior == nil {
		ok = v <= p.better(p.cutoff(vals))
	}
	if point, opt, _, fc := p.fc.forecast(i, p.bestSoFar(j.Run, i+1, v)); fc {
		bar, _ := p.bar(j.Run)
		score, ok = point, ok && opt <= bar
	}
	return score, ok
}
