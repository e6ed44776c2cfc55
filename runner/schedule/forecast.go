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
// the calibration of its intervals on them.
type forecaster struct {
	done []finishedRun // the most recent maxFinished, oldest first
	best float64       // the best final of all the finished runs
	// byValue is, per rung, the finished runs that were judged there,
	// by their best value so far there, with what they gained from there
	// to their final.
	byValue [][]stood
	// margin is, per rung, how far below its likeliest value a run's
	// final may lie: the split-conformal quantile of the finished runs'
	// misses (their forecast, made from the others, less their final);
	// +Inf while too few runs finished for a 1-forecastAlpha bound.
	margin []float64
	// calibrated is how many runs had finished when the margins were
	// last calibrated.
	calibrated int
	gains      []float64 // likeliest's, reused
}

// stood is a finished run at a rung: its best value so far there, what
// it gained from there to its final, and its place in done.
type stood struct {
	value, gain float64
	run         int
}

// add takes a finished run, and calibrates the margins again while few
// runs have finished, then once in every sixteenth of those that have:
// each calibration forecasts every finished run from the others.
func (f *forecaster) add(r finishedRun) {
	if len(f.done) == 0 || r.final < f.best {
		f.best = r.final
	}
	if len(f.done) == maxFinished {
		f.done = slices.Delete(f.done, 0, 1)
	}
	f.done = append(f.done, r)
	n := len(r.at)
	f.byValue = slices.Grow(f.byValue[:0], n)[:n]
	for i := range f.byValue {
		at := f.byValue[i][:0]
		for k, d := range f.done {
			if !math.IsNaN(d.at[i]) {
				at = append(at, stood{d.at[i], d.final - d.at[i], k})
			}
		}
		slices.SortFunc(at, func(a, b stood) int { return cmp.Compare(a.value, b.value) })
		f.byValue[i] = at
	}
	if len(f.margin) == n && len(f.done)-f.calibrated < max(1, len(f.done)/16) {
		return
	}
	f.calibrated = len(f.done)
	f.margin = slices.Grow(f.margin[:0], n)[:n]
	var misses []float64
	recent := len(f.done) - maxCalibration
	for i := range f.margin {
		misses = misses[:0]
		for _, d := range f.byValue[i] {
			if d.run < recent {
				continue
			}
			if point, ok := f.likeliest(i, d.value, d.run); ok {
				misses = append(misses, point-f.done[d.run].final)
			}
		}
		f.margin[i] = conformal(misses, forecastAlpha)
	}
}

// conformal is the ceil((n+1)(1-alpha))-th smallest of the n misses (at
// least 0), or +Inf when there are too few for it.
func conformal(misses []float64, alpha float64) float64 {
	slices.Sort(misses)
	at := int(math.Ceil(float64(len(misses)+1)*(1-alpha))) - 1
	if at >= len(misses) {
		return math.Inf(1)
	}
	return max(misses[at], 0)
}

// likeliest is where a run whose best value so far at rung i is b ends,
// as the finished runs that stood nearest to it there ended: b plus the
// median of what they gained from there. skip is a finished run left out
// (calibration), -1 for none. ok is false with none to learn from.
func (f *forecaster) likeliest(i int, b float64, skip int) (float64, bool) {
	at := f.byValue[i]
	n := len(at)
	if skip >= 0 {
		n--
	}
	if n <= 0 {
		return 0, false
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
	return b + quantile(gains, 0.5), true
}

// forecast is where a run whose best value so far at rung i is b ends:
// the likeliest value and the optimistic end of its interval; ok is false
// while the rung has no calibrated margin.
func (f *forecaster) forecast(i int, b float64) (point, optimistic float64, ok bool) {
	if i >= len(f.margin) || math.IsInf(f.margin[i], 1) || len(f.byValue[i]) == 0 {
		return 0, 0, false
	}
	point, ok = f.likeliest(i, b, -1)
	return point, point - f.margin[i], ok
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
	case last || cautious(id) && p.rungs[i] < p.cfg.MaxStep/3:
	default:
		if point, opt, ok := p.fc.forecast(i, p.bestSoFar(id, i, v)); ok {
			j.Forecasted, j.Forecast, j.Optimistic = true, p.better(point), p.better(opt)
			j.Cutoff, j.Others = p.better(p.fc.best), len(p.fc.done)
			j.Stop = opt > p.fc.best
			if was, ok := p.optimistic[id]; !ok || opt > was {
				p.optimistic[id] = opt
			}
		}
		if !j.Stop && p.rank[i] && len(p.values[i]) > 0 {
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
	if p.rank[i] && len(vals) > 0 {
		ok = v <= p.better(p.cutoff(vals))
	}
	if point, opt, fc := p.fc.forecast(i, p.bestSoFar(j.Run, i+1, v)); fc {
		score, ok = point, ok && opt <= p.fc.best
	}
	return score, ok
}
