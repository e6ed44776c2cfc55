package report

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/nodepack/nodepack/runner/metrics"
	"github.com/nodepack/nodepack/runner/results"
)

// bestRuns is how many runs the best-runs panel shows, with their curves
// read whole from their metrics files.
const bestRuns = 10

// bestCurvePoints bounds each best run's curve on the page.
const bestCurvePoints = 400

// hoverCurveBudget bounds the points of the curves the page holds for a
// hover over any run: past it, only the best runs' have theirs.
// hoverCurvePoints is how many a run's record holds (execute's
// curvePoints).
// curveBudget bounds the bytes of curves the report holds while it reads.
const (
	hoverCurveBudget = 3_000_000
	hoverCurvePoints = 12
	curveBudget      = 64 << 20
)

// ranking is the metric the page ranks the runs by, which way, and why it
// is that one.
type ranking struct {
	Metric string `json:"metric"`
	Desc   bool   `json:"desc"` // higher is better
	Why    string `json:"why"`
}

// rankBy chooses the ranking: the one asked for ("loss", "loss:min",
// "acc:max"), else a validation loss, a loss, else the first metric with
// a number, in the direction its name suggests.
func (s *store) rankBy(asked string) (ranking, error) {
	names := s.metrics.texts[min(len(s.metrics.texts), 1):]
	if asked != "" {
		name, desc, ok := metrics.ParseRank(asked)
		if !slices.Contains(names, name) {
			return ranking{}, fmt.Errorf("report: rank by %q: the runs report no such metric (they report %s)", name, cmp.Or(strings.Join(names, ", "), "none"))
		}
		if !ok {
			return ranking{}, fmt.Errorf("report: rank by %q: want NAME, NAME:min or NAME:max", asked)
		}
		return ranking{Metric: name, Desc: desc, Why: "as asked"}, nil
	}
	numeric := map[string]bool{}
	for col, c := range s.metricCols {
		for _, v := range c {
			if !math.IsNaN(v) && !math.IsInf(v, 0) {
				numeric[s.metrics.text(uint32(col+1))] = true
				break
			}
		}
	}
	m, why := results.PickMetric(names, func(name string) bool { return numeric[name] })
	if m == "" {
		return ranking{}, nil
	}
	return ranking{Metric: m, Desc: metrics.HigherIsBetter(m), Why: why}, nil
}

// best returns the rows with the best values of the ranking's metric,
// best first, at most n; ties keep input order.
func (s *store) best(rows []row, r ranking, n int) []int {
	if r.Metric == "" {
		return nil
	}
	col := int(s.metrics.id(r.Metric))
	type scored struct {
		row int
		v   float64
	}
	var top []scored // the best n so far, best first
	for i, rw := range rows {
		v, ok := s.metric(rw.g, col)
		if !ok {
			continue
		}
		better := func(a, b float64) bool {
			if r.Desc {
				return a > b
			}
			return a < b
		}
		if len(top) == n && !better(v, top[n-1].v) {
			continue
		}
		at := len(top)
		for at > 0 && better(v, top[at-1].v) {
			at--
		}
		top = slices.Insert(top, at, scored{i, v})
		if len(top) > n {
			top = top[:n]
		}
	}
	out := make([]int, 0, len(top))
	for _, x := range top {
		out = append(out, x.row)
	}
	return out
}
