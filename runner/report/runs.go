package report

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"

	"github.com/nodepack/nodepack/runner/ledger"
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
const hoverCurveBudget = 3_000_000

// ranking is the metric the page ranks the runs by, which way, and why it
// is that one.
type ranking struct {
	Metric string `json:"metric"`
	Desc   bool   `json:"desc"` // higher is better
	Why    string `json:"why"`
}

// rankBy chooses the ranking: the one asked for ("loss", "loss:min",
// "acc:max"), else the table's default metric, in the direction its name
// suggests.
func rankBy(t *results.Table, asked string) (ranking, error) {
	if asked != "" {
		name, dir, _ := strings.Cut(asked, ":")
		if !slices.Contains(t.Metrics, name) {
			return ranking{}, fmt.Errorf("report: rank by %q: the runs report no such metric (they report %s)", name, cmp.Or(strings.Join(t.Metrics, ", "), "none"))
		}
		r := ranking{Metric: name, Desc: results.HigherIsBetter(name), Why: "as asked"}
		switch dir {
		case "":
		case "min", "max":
			r.Desc = dir == "max"
		default:
			return ranking{}, fmt.Errorf("report: rank by %q: want NAME, NAME:min or NAME:max", asked)
		}
		return r, nil
	}
	name := t.DefaultMetric()
	if name == "" {
		return ranking{}, nil
	}
	r := ranking{Metric: name, Desc: results.HigherIsBetter(name)}
	switch low := strings.ToLower(name); {
	case strings.Contains(low, "val") && strings.Contains(low, "loss"):
		r.Why = "the validation loss the runs report"
	case strings.Contains(low, "loss"):
		r.Why = "the loss the runs report"
	default:
		r.Why = "the first metric the runs report"
	}
	return r, nil
}

// number reads a metric's value as a finite number.
func number(v json.RawMessage) (float64, bool) {
	var f float64
	if len(v) == 0 || json.Unmarshal(v, &f) != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

// best returns the rows with the best values of the ranking's metric,
// best first, at most n; ties keep input order.
func best(t *results.Table, r ranking, n int) []int {
	if r.Metric == "" {
		return nil
	}
	type scored struct {
		row int
		v   float64
	}
	var s []scored
	for i, row := range t.Rows {
		if v, ok := number(row.Metrics[r.Metric]); ok {
			s = append(s, scored{i, v})
		}
	}
	slices.SortStableFunc(s, func(a, b scored) int {
		if r.Desc {
			return cmp.Compare(b.v, a.v)
		}
		return cmp.Compare(a.v, b.v)
	})
	out := make([]int, 0, min(n, len(s)))
	for _, x := range s[:min(n, len(s))] {
		out = append(out, x.row)
	}
	return out
}

// bestCurve reads a run's whole curve of metric from its files: the
// metrics file, and its stdout with patterns; nil for none.
func bestCurve(dir string, row results.Row, metric string, patterns []metrics.Pattern) [][2]float64 {
	if row.Stdout == "" {
		return nil
	}
	runDir := filepath.Join(dir, filepath.Dir(row.Stdout))
	s := metrics.Summary{Limit: bestCurvePoints}
	r := metrics.Reader{Path: filepath.Join(runDir, metrics.FileName)}
	r.Read(true, s.Add) // a run's file it cannot read leaves its curve out
	if len(patterns) > 0 {
		lr := metrics.Reader{Path: filepath.Join(dir, row.Stdout), Patterns: patterns}
		lr.Read(true, s.Add)
	}
	if m := s.Get(metric); m != nil {
		return m.Curve(bestCurvePoints)
	}
	return nil
}

// hoverCurves returns, per row, its record's curve of metric for the page
// to draw on a hover ({"loss": [[step, value], …]}'s list, nil for none),
// and whether every row's fitted the budget (else only the best rows have
// theirs).
func hoverCurves(t *results.Table, metric string, bestRows []int) ([]json.RawMessage, bool) {
	out := make([]json.RawMessage, len(t.Rows))
	if metric == "" {
		return out, true
	}
	points := 0
	for i, row := range t.Rows {
		if c := curveOf(row.Curves, metric); c != nil {
			out[i] = c
			points += strings.Count(string(c), "[") - 1
		}
	}
	if points <= hoverCurveBudget {
		return out, true
	}
	kept := make([]json.RawMessage, len(t.Rows))
	for _, i := range bestRows {
		kept[i] = out[i]
	}
	return kept, false
}

// curveOf is one metric's list of a record's curves.
func curveOf(curves json.RawMessage, metric string) json.RawMessage {
	if len(curves) == 0 {
		return nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(curves, &m) != nil {
		return nil
	}
	return m[metric]
}

// tableColumns orders the table's columns for people: where the run comes
// from, its parameters and metrics, how it went and what it used, its id,
// then its logs. It returns the names and, for each, the results table's
// column (-1 for logs).
func tableColumns(t *results.Table) (names []string, from []int) {
	cols := t.Columns()
	index := func(name string) int { return slices.Index(cols, name) }
	add := func(name string) {
		if i := index(name); i >= 0 && !slices.Contains(from, i) {
			names, from = append(names, name), append(from, i)
		}
	}
	add("origin")
	nParams := len(t.Params)
	for i := range nParams {
		names, from = append(names, cols[2+i]), append(from, 2+i)
	}
	firstMetric := index("peak_gpu_mem_bytes") + 1
	for i := range len(t.Metrics) {
		names, from = append(names, cols[firstMetric+i]), append(from, firstMetric+i)
	}
	for _, c := range []string{"state", "class", "attempts", "duration_s", "start", "end", "exit_code", "signal", "gpus", "cpus", "peak_rss_bytes", "peak_gpu_mem_bytes", "id"} {
		add(c)
	}
	return append(names, "logs"), append(from, -1)
}

// stateName is how the page names a run's state: a failed run by its
// class.
func stateName(r results.Row) string {
	if r.State == ledger.StateFailed && r.Class != "" {
		return "failed (" + r.Class + ")"
	}
	return string(r.State)
}
