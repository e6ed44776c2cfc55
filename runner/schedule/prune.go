package schedule

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/nodepack/nodepack/runner/run"
)

// Prune is the early-stopping policy: successive halving in the
// asynchronous stopping form of ASHA (Li et al., MLSys 2020), over the
// per-step metric the runs report. Its rungs are the steps FirstStep,
// FirstStep×Eta, FirstStep×Eta², … below MaxStep. When a run reports the
// metric at a step that reaches a rung it was not judged at yet, its
// value is compared with the values every run that reached that rung
// before recorded there: outside the best 1/Eta of them (worse than their
// (1-1/Eta) quantile, in the metric's better direction) it is stopped;
// either way its value joins the rung's. No rung waits to fill: the first
// run at a rung always goes on. With Median, the cutoff is the median of
// the rung's values instead (the median stopping rule).
//
// A value that is not a finite number (a loss that went NaN) is worse
// than any: the run stops at its rung. A run that never reports the
// metric is never judged.
//
// A run judged out that keeps checkpoints is paused, not lost (the
// caller says which, Pause): no judgement of it is final while it can be
// resumed. Promote, called when a place would otherwise idle (nothing
// waits to start), gives the paused run that may still win, best first;
// the caller resumes it from its checkpoint, and it is judged again at
// its next rung like any run (asynchronous: no rung waits to fill). A
// paused run may still win when, against the rung it was paused at as
// that rung is now (more runs reached it since):
//   - the rank rule: its value is within the best 1/Eta of the rung's (or
//     the median), where it was not when judged;
//   - the curve rule: its optimistic forecast is within the best 1/Eta of
//     the forecasts made there; a run paused with too few points for a
//     forecast may still win until it has them, so it is promoted once
//     to its next rung, where it has more.
//
// Best first is the smallest share of the rung's values (forecasts) that
// are better than its own; then the furthest rung; then the first
// paused. A value that is not a finite number never wins.
//
// A run that ended by itself before its values were judged (a short run,
// read between two polls) still counts: its values join the rungs they
// reach (Finish), judged against the runs before as any value, and never
// stopping it, since it ended; runs that come later are judged against
// them.
type Prune struct {
	Metric string
	// Max says higher values are better (an accuracy); else lower (a
	// loss).
	Max bool
	// Eta is the reduction factor, at least 2; zero means 3.
	Eta int
	// FirstStep is the first rung's step, more than 0; zero means 1.
	FirstStep float64
	// MaxStep is a run's last step, its budget: no rung at or past it.
	// Zero means no limit.
	MaxStep float64
	// Median judges by the median of the rung's values, not its best
	// 1/Eta.
	Median bool
	// Curve judges a run by where its curve is going, not where it is: at
	// a rung its points so far are fitted (a saturating exponential and a
	// power law, see Forecast) and it is stopped only when even the
	// optimistic forecast of its value at MaxStep is outside the best
	// 1/Eta of the forecasts the runs before it had there. With fewer
	// than six points, or no forecast before it at the rung, the rank
	// rule judges. It needs MaxStep.
	Curve bool
	// Forecast adds to the rank rule a forecast of each run's value at
	// MaxStep learnt from the sweep's finished runs, judged at rungs
	// between the rank rule's, and a cautious cohort judged late: see
	// the package doc and forecast.go. It needs MaxStep; its FirstStep
	// defaults to an eighth of MaxStep, rounded, at least 1.
	Forecast bool
}

// Pruner is the state of a Prune policy: the values recorded at each
// rung, and the rungs each run was judged at. It keys runs by their ids,
// so that a resumed sweep replays the judgements of its earlier sessions
// (Replay) and judges the same way. Like a Scheduler, a Pruner is not
// safe for concurrent use.
type Pruner struct {
	cfg    Prune
	rungs  []float64   // their steps
	values [][]float64 // per rung, the values recorded there, sorted
	finals [][]float64 // per rung, the forecasts recorded there (Curve), sorted, lower better
	judged map[string]int
	curves map[string][][2]float64 // Curve: each running run's points, thinned, lower better
	// paused holds the paused runs, candidates for promotion, with the
	// judgement that paused each and the order they were paused in;
	// replayed the pausing judgements of earlier sessions (Replay), for
	// Repause.
	paused   map[string]pause
	replayed map[string]run.Judgement
	pauses   int
	// changed says a rung's values or the paused runs changed since
	// Promote last found none that may win: until then it need not look
	// again (the caller asks at every turn of its loop).
	changed bool
	// The forecast rule: which rungs are the rank rule's, each running
	// run's best value at its rungs so far (lower better, NaN where not
	// judged), the highest optimistic forecast made for it, the finished
	// runs, and how their forecasts held.
	rank       []bool
	tracks     map[string][]float64
	optimistic map[string]float64
	fc         forecaster
	coverage   Coverage
	// The prior (UsePrior): its state, and each running run's latest
	// pessimistic forecast while the prior is in use (lower better).
	prior *priorState
	pess  map[string]float64
}

// pause is a paused run: the judgement that paused it, and its order.
type pause struct {
	j   run.Judgement
	seq int
}

// maxCurvePoints bounds a run's points the curve rule keeps: past it,
// every other one is dropped.
const maxCurvePoints = 128

// NewPruner returns the state of policy p, with no value recorded.
func NewPruner(p Prune) (*Pruner, error) {
	if p.Eta == 0 {
		p.Eta = 3
	}
	if p.FirstStep == 0 {
		p.FirstStep = 1
		if p.Forecast && !math.IsInf(p.MaxStep, 0) {
			p.FirstStep = max(1, math.Round(p.MaxStep/8))
		}
	}
	switch {
	case p.Metric == "":
		return nil, errors.New("prune: no metric to judge runs by")
	case p.Eta < 2:
		return nil, fmt.Errorf("prune: eta %d: want at least 2", p.Eta)
	case p.FirstStep < 0 || math.IsNaN(p.FirstStep) || math.IsInf(p.FirstStep, 0):
		return nil, fmt.Errorf("prune: first rung at step %v: want a step above 0", p.FirstStep)
	case math.IsNaN(p.MaxStep) || math.IsInf(p.MaxStep, 0) || p.MaxStep < 0 || p.MaxStep != 0 && p.MaxStep <= p.FirstStep:
		return nil, fmt.Errorf("prune: last step %v: want one past the first rung's step %v", p.MaxStep, p.FirstStep)
	case p.Curve && p.MaxStep == 0:
		return nil, errors.New("prune: the curve rule forecasts each run's value at its last step: it needs that step")
	case p.Forecast && p.MaxStep == 0:
		return nil, errors.New("prune: the forecast rule forecasts each run's value at its last step: it needs that step")
	case p.Forecast && (p.Curve || p.Median):
		return nil, errors.New("prune: the forecast rule excludes the curve and the median rules")
	case p.Curve && p.Median:
		return nil, errors.New("prune: the curve rule and the median rule exclude each other")
	}
	pr := &Pruner{cfg: p, judged: map[string]int{}, curves: map[string][][2]float64{}, paused: map[string]pause{}, replayed: map[string]run.Judgement{},
		tracks: map[string][]float64{}, optimistic: map[string]float64{}, pess: map[string]float64{}}
	if p.Forecast {
		pr.rungs, pr.rank = forecastRungs(p.FirstStep, p.MaxStep, p.Eta)
	} else {
		for step := p.FirstStep; (p.MaxStep == 0 || step < p.MaxStep) && !math.IsInf(step, 0) && len(pr.rungs) < 64; step *= float64(p.Eta) {
			pr.rungs = append(pr.rungs, step)
		}
	}
	pr.values = make([][]float64, len(pr.rungs))
	pr.finals = make([][]float64, len(pr.rungs))
	return pr, nil
}

// Config returns the policy, its defaults filled in.
func (p *Pruner) Config() Prune { return p.cfg }

// Rungs returns the rungs' steps.
func (p *Pruner) Rungs() []float64 { return slices.Clone(p.rungs) }

// Judge takes run id's value of the metric at step and judges it at every
// rung the step reaches that it was not judged at yet, in order, until
// one stops it. It returns those judgements; none when the step reaches
// no new rung (a step reported twice, or between rungs). A judgement that
// stops a run that keeps checkpoints pauses it (Judgement.Pause): keeps,
// asked only then (nil: it keeps none), says whether it does.
func (p *Pruner) Judge(id string, step, value float64, keeps func() bool) []run.Judgement {
	out := p.take(id, step, value, true)
	if n := len(out); n > 0 && out[n-1].Stop && keeps != nil {
		out[n-1].Pause = keeps()
	}
	if n := len(out); n > 0 && out[n-1].Stop && !out[n-1].Pause {
		p.forget(id) // pruned for good
	}
	return out
}

// Finish takes the value of a run that has ended, at step, as Judge
// does, except that none of its judgements stops it: it ended by itself,
// and its value joins the rungs it reached for the runs after it.
func (p *Pruner) Finish(id string, step, value float64) []run.Judgement {
	return p.take(id, step, value, false)
}

// take is Judge for a running run, Finish for one that ended.
func (p *Pruner) take(id string, step, value float64, running bool) []run.Judgement {
	delete(p.paused, id) // it runs: promoted, or started again
	if p.cfg.Curve {
		p.addPoint(id, step, value)
		if !running {
			defer delete(p.curves, id) // it ended: its curve is done
		}
	}
	var out []run.Judgement
	next, ok := p.judged[id]
	if !ok {
		next = 0
	} else {
		next++
	}
	for i := next; i < len(p.rungs) && step >= p.rungs[i]; i++ {
		j := p.judge(id, i, step, value)
		if st := p.prior; st != nil && st.note != "" {
			j.PriorDropped, st.note = st.note, "" // said once, with the judgement that dropped it
		}
		j.Stop = j.Stop && running
		p.stoppedBy(j)
		out = append(out, j)
		if j.Stop {
			delete(p.curves, id)
			break
		}
	}
	return out
}

// NextRung returns the step of the next rung run id is to be judged at;
// false when it was judged at the last.
func (p *Pruner) NextRung(id string) (float64, bool) {
	next := 0
	if i, ok := p.judged[id]; ok {
		next = i + 1
	}
	if next >= len(p.rungs) {
		return 0, false
	}
	return p.rungs[next], true
}

// judge judges run id at rung i and records its value there.
func (p *Pruner) judge(id string, i int, step, value float64) run.Judgement {
	if p.cfg.Forecast {
		return p.judgeForecast(id, i, step, value)
	}
	vals := p.values[i]
	j := run.Judgement{Run: id, Metric: p.cfg.Metric, Rung: i, Step: p.rungs[i], At: step, Value: value, Cutoff: math.NaN(), Others: len(vals)}
	finite := !math.IsNaN(value) && !math.IsInf(value, 0)
	var fc Forecast
	if p.cfg.Curve && finite {
		fc = forecastAt(p.curves[id], p.cfg.MaxStep)
	}
	if fc.OK {
		j.Forecasted, j.Forecast, j.Optimistic = true, p.better(fc.Final), p.better(fc.Optimistic)
	}
	switch {
	case !finite:
		j.Stop = true
	case fc.OK && len(p.finals[i]) > 0:
		// Where it is going against where the runs before it were going.
		q := 1 / float64(p.cfg.Eta)
		cut := quantile(p.finals[i], q)
		j.Cutoff, j.Others = p.better(cut), len(p.finals[i])
		j.Stop = fc.Optimistic > cut
	case len(vals) > 0:
		j.Cutoff = p.cutoff(vals)
		if p.cfg.Max {
			j.Stop = value < j.Cutoff
		} else {
			j.Stop = value > j.Cutoff
		}
	}
	p.record(j)
	return j
}

// cutoff is the value a run at a rung must match, given the values of the
// runs before it there (sorted): the (1-1/Eta) quantile in the better
// direction, or the median.
func (p *Pruner) cutoff(vals []float64) float64 {
	q := 0.5
	if !p.cfg.Median {
		q = 1 / float64(p.cfg.Eta) // the best 1/Eta of low values lie below it
		if p.cfg.Max {
			q = 1 - q
		}
	}
	return quantile(vals, q)
}

// quantile is the q quantile of the sorted vals, interpolated.
func quantile(vals []float64, q float64) float64 {
	pos := q * float64(len(vals)-1)
	lo := int(math.Floor(pos))
	hi := min(lo+1, len(vals)-1)
	return vals[lo] + (vals[hi]-vals[lo])*(pos-float64(lo))
}

// better turns a value of the metric into one where lower is better, and
// back: it negates a metric to maximise.
func (p *Pruner) better(v float64) float64 {
	if p.cfg.Max {
		return -v
	}
	return v
}

// addPoint keeps run id's point for the curve rule, lower better; a step
// that goes back starts the curve over (the run started again).
func (p *Pruner) addPoint(id string, step, value float64) {
	if math.IsNaN(value) || math.IsInf(value, 0) {
		return
	}
	pts := p.curves[id]
	if n := len(pts); n > 0 && step <= pts[n-1][0] {
		if step == pts[n-1][0] {
			return
		}
		// It went back: resumed from a checkpoint (or started over), its
		// new points replace those from that step on.
		at, _ := slices.BinarySearchFunc(pts, step, func(pt [2]float64, s float64) int { return cmp.Compare(pt[0], s) })
		pts = pts[:at]
	}
	if len(pts) == maxCurvePoints {
		kept := pts[:0]
		for k := 0; k < len(pts); k += 2 {
			kept = append(kept, pts[k])
		}
		pts = kept
	}
	p.curves[id] = append(pts, [2]float64{step, p.better(value)})
}

// record notes that run was judged at rung j.Rung with j.Value.
func (p *Pruner) record(j run.Judgement) {
	p.changed = true // a promotion's chances move with the rung's values
	if prev, ok := p.judged[j.Run]; !ok || j.Rung > prev {
		p.judged[j.Run] = j.Rung
	}
	if !math.IsNaN(j.Value) && !math.IsInf(j.Value, 0) {
		vals := p.values[j.Rung]
		at, _ := slices.BinarySearch(vals, j.Value)
		p.values[j.Rung] = slices.Insert(vals, at, j.Value)
	}
	if p.cfg.Forecast {
		p.priorSees(j)
		p.track(j)
	}
	if p.cfg.Curve && j.Forecasted && !math.IsNaN(j.Forecast) && !math.IsInf(j.Forecast, 0) {
		f := p.better(j.Forecast)
		at, _ := slices.BinarySearch(p.finals[j.Rung], f)
		p.finals[j.Rung] = slices.Insert(p.finals[j.Rung], at, f)
	}
}

// Replay takes a judgement an earlier session recorded: its value joins
// its rung's, and its run is not judged at that rung again. A judgement
// of another metric, or of a rung this policy does not have (the policy
// changed between sessions), is left out: its value is no value of this
// policy's rungs.
func (p *Pruner) Replay(j run.Judgement) {
	if j.Metric != p.cfg.Metric || j.Rung < 0 || j.Rung >= len(p.rungs) || p.rungs[j.Rung] != j.Step {
		return
	}
	p.record(j)
	p.stoppedBy(j)
	if j.Stop && !j.Pause {
		p.forget(j.Run) // pruned for good
	}
	if j.Stop && j.Pause {
		p.replayed[j.Run] = j
	} else {
		delete(p.replayed, j.Run) // judged again since: promoted
	}
}

// Pause says run j.Run was paused after judgement j (its stop): it keeps
// checkpoints, and is a candidate for Promote from now on.
func (p *Pruner) Pause(j run.Judgement) {
	if !j.Stop || j.Rung < 0 || j.Rung >= len(p.rungs) {
		return
	}
	delete(p.curves, j.Run)
	delete(p.pess, j.Run)
	p.pauses++
	p.changed = true
	p.paused[j.Run] = pause{j: j, seq: p.pauses}
}

// Repause makes run id, paused in an earlier session whose judgements
// were replayed, a candidate for Promote again, and reports whether one
// of them paused it; false when none did (the policy changed since, or
// the run was judged again after its pause).
func (p *Pruner) Repause(id string) bool {
	j, ok := p.replayed[id]
	if ok {
		delete(p.replayed, id)
		p.Pause(j)
	}
	return ok
}

// PausedRuns returns how many runs are paused and not promoted.
func (p *Pruner) PausedRuns() int { return len(p.paused) }

// Promote returns the paused run that may still win, best first (see
// Prune), and takes it off the paused ones: the caller resumes it from
// its checkpoint. ok is false when no paused run may win now.
func (p *Pruner) Promote() (id string, ok bool) {
	if !p.changed {
		return "", false
	}
	best, bestScore := pause{}, math.Inf(1)
	for _, c := range p.paused {
		score, may := p.mayWin(c.j)
		if !may {
			continue
		}
		if !ok || score < bestScore || score == bestScore && (c.j.Rung > best.j.Rung || c.j.Rung == best.j.Rung && c.seq < best.seq) {
			best, bestScore, ok = c, score, true
		}
	}
	if ok {
		delete(p.paused, best.j.Run)
	} else {
		p.changed = false
	}
	return best.j.Run, ok
}

// mayWin says whether the run j paused may still win against its rung as
// it is now, and its score there: the share of the rung's values (or
// forecasts) better than its own, lower first.
func (p *Pruner) mayWin(j run.Judgement) (score float64, ok bool) {
	if math.IsNaN(j.Value) || math.IsInf(j.Value, 0) {
		return 0, false
	}
	i := j.Rung
	if p.cfg.Forecast {
		return p.mayWinForecast(j)
	}
	if p.cfg.Curve && j.Forecasted {
		o := p.better(j.Optimistic)
		finals := p.finals[i]
		if len(finals) == 0 {
			return 0, true
		}
		return better(finals, o), o <= quantile(finals, 1/float64(p.cfg.Eta))
	}
	vals := p.values[i] // the metric's own values, sorted ascending
	if len(vals) > 0 {
		if p.cfg.Max {
			// Higher is better: the values above it.
			above := len(vals) - sort.SearchFloat64s(vals, math.Nextafter(j.Value, math.Inf(1)))
			score = float64(above) / float64(len(vals))
		} else {
			score = better(vals, j.Value)
		}
	}
	if p.cfg.Curve {
		return score, true // too few points to forecast: once, to its next rung
	}
	return score, len(vals) == 0 || p.better(j.Value) <= p.better(p.cutoff(vals))
}

// better is the share of the sorted vals (lower better) below v.
func better(vals []float64, v float64) float64 {
	if len(vals) == 0 {
		return 0
	}
	at, _ := slices.BinarySearch(vals, v)
	return float64(at) / float64(len(vals))
}

// Judged returns the last rung run was judged at, and whether it was
// judged at all.
func (p *Pruner) Judged(run string) (int, bool) {
	i, ok := p.judged[run]
	return i, ok
}
