package schedule

import (
	"math"
)

// Forecast is where a run's curve is going: its metric at a later step,
// as the curve's points so far say, in the direction lower is better.
// Final is the likeliest value; Optimistic the best value the points do
// not rule out (the best of the fits that explain them about as well as
// the best one, each less 1.64 standard errors: about a 95% bound on one
// side). OK is false when the points are too few to say (fewer than
// minCurvePoints) or no fit goes down.
type Forecast struct {
	Final, Optimistic float64
	OK                bool
}

// minCurvePoints is the fewest points a forecast is made from.
const minCurvePoints = 6

// curve families: y = a + b·f(u), u the step over the last step seen,
// with b ≥ 0: a saturating exponential and a power law, over a grid of
// rates each.
var curveFamilies = []struct {
	name  string
	f     func(u, c float64) float64
	rates []float64
}{
	{"exp", func(u, c float64) float64 { return math.Exp(-c * u) }, logGrid(0.05, 30, 48)},
	{"power", func(u, c float64) float64 { return math.Pow(u, -c) }, logGrid(0.05, 4, 32)},
}

func logGrid(lo, hi float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = lo * math.Pow(hi/lo, float64(i)/float64(n-1))
	}
	return out
}

// forecastAt fits points (step, value; lower is better, steps rising) and
// forecasts the value at step at.
func forecastAt(points [][2]float64, at float64) Forecast {
	n := len(points)
	if n < minCurvePoints {
		return Forecast{}
	}
	last := points[n-1][0]
	if last <= 0 || at < last {
		return Forecast{}
	}
	type fit struct {
		sse, pred, se float64
	}
	var fits []fit
	best := math.Inf(1)
	for _, fam := range curveFamilies {
		for _, c := range fam.rates {
			// Least squares of y on (1, f(u)) at this rate.
			var s1, sf, sff, sy, sfy float64
			for _, p := range points {
				f := fam.f(p[0]/last, c)
				s1++
				sf += f
				sff += f * f
				sy += p[1]
				sfy += f * p[1]
			}
			det := s1*sff - sf*sf
			if det <= 1e-12*s1*sff || math.IsNaN(det) {
				continue
			}
			b := (s1*sfy - sf*sy) / det
			a := (sy - b*sf) / s1
			if b < 0 || math.IsNaN(a) || math.IsInf(a, 0) {
				continue // a curve that goes up says nothing of where it ends
			}
			sse := 0.0
			for _, p := range points {
				r := p[1] - a - b*fam.f(p[0]/last, c)
				sse += r * r
			}
			fu := fam.f(at/last, c)
			// The prediction's variance per unit of noise: x'(X'X)^-1 x.
			v := (sff - 2*fu*sf + fu*fu*s1) / det
			fits = append(fits, fit{sse: sse, pred: a + b*fu, se: math.Sqrt(max(v, 0))})
			best = min(best, sse)
		}
	}
	if len(fits) == 0 {
		return Forecast{}
	}
	// The noise, from the best fit (three parameters: a, b and the rate);
	// fits within an F-like margin of it explain the points about as well.
	sigma := math.Sqrt(best / float64(max(n-3, 1)))
	limit := best * (1 + 4/float64(max(n-3, 1)))
	out := Forecast{Final: math.Inf(1), Optimistic: math.Inf(1), OK: true}
	bestPred := math.Inf(1)
	bestSSE := math.Inf(1)
	for _, f := range fits {
		if f.sse < bestSSE {
			bestSSE, bestPred = f.sse, f.pred
		}
		if f.sse <= limit+1e-15 {
			out.Optimistic = min(out.Optimistic, f.pred-1.64*sigma*f.se)
		}
	}
	out.Final = bestPred
	return out
}
