package metrics

import (
	"encoding/json"
	"math"
	"strconv"
)

// defaultLimit is how many points of each metric's curve a Summary keeps
// when its Limit is zero.
const defaultLimit = 64

// MaxNames is the most metrics a Summary keeps: a run that reports more
// names (a million, one per step) has the first MaxNames, and the points
// of the others are counted in Summary.Dropped. What a run reported must
// fit its ledger record.
const MaxNames = 256

// MaxNameBytes is the longest metric name a Summary keeps; the points of
// a longer one are counted in Summary.Dropped.
const MaxNameBytes = 128

// Summary is what a run's points come to, per metric in the order first
// seen: the last value and a curve of at most Limit points, for at most
// MaxNames metrics. The zero Summary keeps 64 points per metric.
type Summary struct {
	// Limit bounds each Series' Points; zero means 64.
	Limit  int
	Series []*Series
	// Dropped counts the points of metrics left out: past MaxNames, or
	// named longer than MaxNameBytes.
	Dropped int
	byName  map[string]*Series
	// LastStep is the step of the last point, of any metric; Stepped says
	// there was one.
	LastStep float64
	Stepped  bool
}

// CheckpointKey is the metric a run reports its checkpoints by: a line
// {"checkpoint": 1200} says its state at step 1200 is saved.
const CheckpointKey = "checkpoint"

// Checkpoint returns the step of the last checkpoint reported (the last
// value of CheckpointKey), 0 when none was.
func (s *Summary) Checkpoint() float64 {
	if m := s.Get(CheckpointKey); m != nil && finite(m.Last) && m.Last > 0 {
		return m.Last
	}
	return 0
}

// Series is one metric's history. A step lower than the step before
// starts it over: the run started again (a retry, or a resume from
// scratch), and the curve is the last such stretch.
type Series struct {
	Name     string
	Last     float64 // the last value
	LastStep float64
	Min, Max float64 // over the curve's stretch
	N        int     // points in the stretch
	// Points are (step, value) pairs, evenly thinned: every Stride-th
	// point of the stretch, the last one aside (see Curve).
	Points [][2]float64
	stride int
}

// Add takes one point. A value that is not a finite number (a loss that
// went NaN) is the metric's last value, and no point of its curve.
func (s *Summary) Add(p Point) {
	if p.Name != CheckpointKey {
		s.LastStep, s.Stepped = p.Step, true
	}
	if s.byName == nil {
		s.byName = map[string]*Series{}
	}
	m := s.byName[p.Name]
	if m == nil {
		if len(s.Series) >= MaxNames || len(p.Name) > MaxNameBytes {
			s.Dropped++
			return
		}
		m = &Series{Name: p.Name}
		s.byName[p.Name] = m
		s.Series = append(s.Series, m)
	}
	if m.N > 0 && p.Step < m.LastStep {
		*m = Series{Name: m.Name} // the run started over
	}
	limit := s.Limit
	if limit <= 0 {
		limit = defaultLimit
	}
	limit = max(limit, 2)
	if !finite(p.Value) {
		m.Last, m.LastStep = p.Value, p.Step
		return
	}
	if m.N == 0 {
		m.Min, m.Max, m.stride = p.Value, p.Value, 1
	}
	m.Min, m.Max = min(m.Min, p.Value), max(m.Max, p.Value)
	if m.N%m.stride == 0 {
		if len(m.Points) == limit {
			// Full: keep every other point, and every other from now on.
			kept := m.Points[:0]
			for i := 0; i < len(m.Points); i += 2 {
				kept = append(kept, m.Points[i])
			}
			m.Points, m.stride = kept, m.stride*2
		}
		if m.N%m.stride == 0 {
			m.Points = append(m.Points, [2]float64{p.Step, p.Value})
		}
	}
	m.N++
	m.Last, m.LastStep = p.Value, p.Step
}

// Get returns the series of metric name; nil if no point had it.
func (s *Summary) Get(name string) *Series { return s.byName[name] }

// Curve returns the series' points with its last point at the end, at
// most n of them (n > 1), evenly thinned. A last value that is not a
// finite number (a loss gone NaN) is no point of it: Last says it.
func (m *Series) Curve(n int) [][2]float64 {
	pts := m.Points
	last := [2]float64{m.LastStep, m.Last}
	if finite(m.Last) && (len(pts) == 0 || pts[len(pts)-1] != last) {
		pts = append(pts[:len(pts):len(pts)], last)
	}
	if n < 2 || len(pts) <= n {
		return pts
	}
	out := make([][2]float64, 0, n)
	for i := range n - 1 {
		out = append(out, pts[i*(len(pts)-1)/(n-1)])
	}
	return append(out, pts[len(pts)-1])
}

// Final returns the last value of every metric, in the order first seen,
// as JSON: a number, or "nan", "inf" or "-inf".
func (s *Summary) Final() (names []string, values []json.RawMessage) {
	for _, m := range s.Series {
		names = append(names, m.Name)
		switch {
		case math.IsNaN(m.Last):
			values = append(values, json.RawMessage(`"nan"`))
		case math.IsInf(m.Last, 1):
			values = append(values, json.RawMessage(`"inf"`))
		case math.IsInf(m.Last, -1):
			values = append(values, json.RawMessage(`"-inf"`))
		default:
			values = append(values, json.RawMessage(strconv.FormatFloat(m.Last, 'g', -1, 64)))
		}
	}
	return names, values
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
