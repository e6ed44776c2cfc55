package schedule

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/runner/failure"
)

// Defaults of the density rule (gpus=auto, --runs-per-gpu auto).
const (
	// DefaultDensityMargin is how much more a GPU's progress must be with
	// one more run on it for the rule to try one more again: 5%.
	DefaultDensityMargin = 0.05
	// DefaultDensityWindow is how long a run's progress is measured for
	// one reading: its steps over at least that long, with no run joining
	// or leaving its GPU meanwhile.
	DefaultDensityWindow = 20 * time.Second
)

// readingsKept bounds the readings kept per shape and number of runs on a
// GPU: the newest are the ones that count.
const readingsKept = 64

// DensityChange is a decision of the density rule: the runs of Shape now
// take 1/To of a GPU each, where they took 1/From. At says what was
// measured: the GPU's progress in the shape's steps per second with each
// number of runs on it so far.
type DensityChange struct {
	Shape    string
	From, To int
	// Final: the rule stops trying more runs per GPU for this shape; it
	// may still step back if progress falls.
	Final bool
	At    []DensityReading
	// Why says what the rule saw, in words: "2 runs: 1.8× of 1".
	Why string
}

// DensityReading is a shape's measured progress with Runs runs on a GPU:
// the mean of Readings readings of one run's steps per second, times Runs.
type DensityReading struct {
	Runs        int
	StepsPerSec float64
	Readings    int
}

// density is the rule's state for one shape.
type density struct {
	shape   string
	level   int // runs per GPU its runs take a share for
	most    int
	final   bool
	decided time.Time
	// at holds the readings with each number of runs on a GPU: one run's
	// steps per second over a window, and when it was taken. pairs holds,
	// for runs read with a runs on their GPU and then with b, the logs of
	// the ratio of the two readings (summed, and counted), keyed a<b: a
	// run's own slowdown, whatever its own speed.
	at    map[int][]reading
	pairs map[[2]int]*pairSum
}

type pairSum struct {
	logs float64 // the sum of log(rate with b / rate with a)
	n    int
}

type reading struct {
	rate float64
	at   time.Time
}

// mark is a run's step at a time.
type mark struct {
	t    time.Time
	step float64
}

// window is a placed run's reading under way: its first and last marks
// since the runs on its GPU last changed, at that number of runs.
type window struct {
	runs       int
	from, last mark
	has        bool
	reported   bool            // the run has reported a step: it counts on its GPU
	crowd      int             // the most gpus=auto runs on its GPU while it ran
	rates      map[int]float64 // its newest reading with each number of runs
}

// densityOf returns the rule's state for shape, made at level 1 (or
// where an earlier session left it: Resume).
func (s *Scheduler) densityOf(shape string) *density {
	d := s.dens[shape]
	if d == nil {
		d = &density{shape: shape, level: 1, most: pack.AutoRunsPerGPU, at: map[int][]reading{}, pairs: map[[2]int]*pairSum{}}
		if st, ok := s.resumed[strings.ReplaceAll(shape, "\x00", " ")]; ok && st.Level >= 1 {
			// Where an earlier session of the sweep left it.
			d.level, d.final = min(st.Level, pack.AutoRunsPerGPU), st.Final
		}
		s.dens[shape] = d
	}
	return d
}

// Progress says run k reported step at now (its metrics): the density
// rule reads its steps per second from these. A step that goes back (a
// new attempt, a restart from a checkpoint) starts the window over.
func (s *Scheduler) Progress(k Key, step float64, now time.Time) {
	p := s.placed[k]
	if p == nil || !p.w.asked.AutoShare || len(p.as.GPUs) != 1 {
		return
	}
	w := &p.win
	if !w.reported {
		w.reported = true
		s.changed(p.as.GPUs[0].UUID, now) // it counts on its GPU from now
	}
	m := mark{now, step}
	if !w.has || step < w.last.step {
		w.from, w.last, w.has = m, m, true
		return
	}
	w.last = m
	if span := w.last.t.Sub(w.from.t); span >= s.densityWindow() && w.runs > 0 {
		d := s.densityOf(p.w.shape)
		rate := (w.last.step - w.from.step) / span.Seconds()
		d.at[w.runs] = newest(d.at[w.runs], reading{rate: rate, at: now})
		if w.rates == nil {
			w.rates = map[int]float64{}
		}
		// Each reading pairs with the run's reading before it at another
		// number of runs, once: a run read many times is still one run.
		for n, r := range w.rates {
			if n != w.runs && r > 0 && rate > 0 {
				d.pair(n, w.runs, r, rate)
			}
		}
		clear(w.rates)
		w.rates[w.runs] = rate
		w.from = w.last
	}
}

// pair records a run read at rate ra with a runs on its GPU, then at rate
// rb with b.
func (d *density) pair(a, b int, ra, rb float64) {
	if a > b {
		a, b, ra, rb = b, a, rb, ra
	}
	p := d.pairs[[2]int{a, b}]
	if p == nil {
		p = &pairSum{}
		d.pairs[[2]int{a, b}] = p
	}
	p.logs += math.Log(rb / ra)
	p.n++
}

// slowdowns solves the pairs for how fast one run goes with each number
// of runs on its GPU, relative to with from: x[n] = log(speed with n /
// speed with from), by least squares over every pair that joins n to
// from, directly or through other numbers (each pair weighed by how many
// runs made it). It returns the numbers it could join, and how many pairs
// touch each.
func (d *density) slowdowns(from int) (x map[int]float64, touch map[int]int) {
	touch = map[int]int{}
	adj := map[int][]int{}
	keys := slices.SortedFunc(maps.Keys(d.pairs), func(a, b [2]int) int { return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1])) })
	for _, k := range keys { // in one order: the sums below round alike every time
		p := d.pairs[k]
		touch[k[0]] += p.n
		touch[k[1]] += p.n
		adj[k[0]] = append(adj[k[0]], k[1])
		adj[k[1]] = append(adj[k[1]], k[0])
	}
	// The numbers joined to from.
	var nodes []int
	seen := map[int]bool{from: true}
	for queue := []int{from}; len(queue) > 0; queue = queue[1:] {
		for _, m := range adj[queue[0]] {
			if !seen[m] {
				seen[m] = true
				nodes = append(nodes, m)
				queue = append(queue, m)
			}
		}
	}
	slices.Sort(nodes)
	idx := map[int]int{}
	for i, n := range nodes {
		idx[n] = i
	}
	// Normal equations: for each pair (a, b), n·(x_b - x_a - mean)².
	k := len(nodes)
	a := make([][]float64, k)
	for i := range a {
		a[i] = make([]float64, k+1)
	}
	add := func(i, j int, v float64) {
		if i >= 0 && j >= 0 {
			a[i][j] += v
		}
	}
	at := func(n int) int {
		if i, ok := idx[n]; ok {
			return i
		}
		return -1 // from: fixed at 0
	}
	for _, key := range keys {
		p := d.pairs[key]
		if !seen[key[0]] || !seen[key[1]] {
			continue
		}
		i, j, w, m := at(key[0]), at(key[1]), float64(p.n), p.logs/float64(p.n)
		add(i, i, w)
		add(j, j, w)
		add(i, j, -w)
		add(j, i, -w)
		if i >= 0 {
			a[i][k] -= w * m
		}
		if j >= 0 {
			a[j][k] += w * m
		}
	}
	// Gauss-Jordan: the system is small (at most AutoRunsPerGPU) and,
	// every node joined to from, positive definite.
	for c := range k {
		piv := c
		for r := c + 1; r < k; r++ {
			if math.Abs(a[r][c]) > math.Abs(a[piv][c]) {
				piv = r
			}
		}
		a[c], a[piv] = a[piv], a[c]
		if a[c][c] == 0 {
			return map[int]float64{from: 0}, touch
		}
		for r := range k {
			if r != c {
				f := a[r][c] / a[c][c]
				for q := c; q <= k; q++ {
					a[r][q] -= f * a[c][q]
				}
			}
		}
	}
	x = map[int]float64{from: 0}
	for i, n := range nodes {
		x[n] = a[i][k] / a[i][i]
	}
	return x, touch
}

// newest appends v to vs, keeping the newest readingsKept.
func newest[T any](vs []T, v T) []T {
	vs = append(vs, v)
	if len(vs) > readingsKept {
		vs = vs[len(vs)-readingsKept:]
	}
	return vs
}

func (s *Scheduler) densityWindow() time.Duration {
	if s.cfg.DensityWindow > 0 {
		return s.cfg.DensityWindow
	}
	return DefaultDensityWindow
}

func (s *Scheduler) margin() float64 {
	if s.cfg.DensityMargin > 0 {
		return s.cfg.DensityMargin
	}
	return DefaultDensityMargin
}

// changed says the runs on GPU uuid that count changed at (the zero time
// where the caller does not know when): every gpus=auto run on it starts
// its window over, at the new number. A run that already reported at that
// very instant starts its window from that report, so that the order in
// which runs report at one instant does not move the windows (a table
// case replays exactly).
func (s *Scheduler) changed(uuid string, at time.Time) {
	n := 0
	for _, p := range s.onGPU[uuid] {
		if p.win.reported {
			n++
		}
	}
	for _, p := range s.onGPU[uuid] {
		w := &p.win
		w.runs = n
		if w.has && !at.IsZero() && w.last.t.Equal(at) {
			w.from = w.last
			continue
		}
		w.has = false
	}
}

// join and leave keep onGPU: the gpus=auto runs on each GPU.
func (s *Scheduler) join(k Key, p *placement) {
	if !p.w.asked.AutoShare || len(p.as.GPUs) != 1 {
		return
	}
	uuid := p.as.GPUs[0].UUID
	if s.onGPU[uuid] == nil {
		s.onGPU[uuid] = map[Key]*placement{}
	}
	s.onGPU[uuid][k] = p
	p.win = window{}
	for _, q := range s.onGPU[uuid] {
		q.win.crowd = max(q.win.crowd, len(s.onGPU[uuid]))
	}
}

func (s *Scheduler) leave(k Key, p *placement) {
	if len(p.as.GPUs) != 1 || s.onGPU[p.as.GPUs[0].UUID][k] == nil {
		return
	}
	uuid := p.as.GPUs[0].UUID
	delete(s.onGPU[uuid], k)
	if p.win.reported {
		s.changed(uuid, time.Time{})
	}
}

// value is the shape's progress with n runs on a GPU: the mean of its
// readings taken since (all of them, for the zero time), times n, and how
// many readings that is.
func (d *density) value(n int, since time.Time) (float64, int) {
	sum, count := 0.0, 0
	for _, r := range d.at[n] {
		if !r.at.Before(since) {
			sum += r.rate
			count++
		}
	}
	if count == 0 {
		return 0, 0
	}
	return sum / float64(count) * float64(n), count
}

// gain is how much more progress a GPU makes with l runs than with l-1:
// from the runs read with different numbers of runs on their GPU (each
// run's own slowdown; see slowdowns), times l/(l-1), once runs were read
// with l in at least max(l-1, 2) pairs; else, where runs end before they
// are read twice, from the means of all readings, once there are four
// GPUs' worth with l and four readings with l-1 (runs of one shape differ
// in speed, batch sizes say: a few readings would say more about which
// runs they were than about l). ok is false until then.
func (d *density) gain(l int, since time.Time) (gain float64, ok bool) {
	if x, touch := d.slowdowns(l - 1); touch[l] >= max(l-1, 2) {
		if v, joined := x[l]; joined {
			return math.Exp(v) * float64(l) / float64(l-1), true
		}
	}
	here, n := d.value(l, since)
	below, m := d.value(l-1, time.Time{})
	if n < 4*l || m < 4 || below <= 0 {
		return 0, false
	}
	return here / below, true
}

// decide is the density rule for one shape at now; it returns a change or
// nil. Its level's readings count from its last decision on. A final
// level is kept (but for a run out of memory, see outOfMemory): the runs
// that live longest are the slow ones, so later readings against earlier
// ones would see a fall that is not there.
func (s *Scheduler) decide(d *density, now time.Time) *DensityChange {
	l := d.level
	if d.final {
		return nil
	}
	if l == 1 {
		here, n := d.value(1, d.decided)
		if n < 4 || d.most < 2 {
			return nil // four readings: what 2 runs are held to
		}
		return d.move(2, false, now, fmt.Sprintf("1 run: %.3g steps/s", here))
	}
	gain, ok := d.gain(l, d.decided)
	if !ok {
		return nil
	}
	why := fmt.Sprintf("%d runs: %.2f× the progress of %d", l, gain, l-1)
	switch {
	case gain > 1+s.margin() && l < d.most:
		return d.move(l+1, false, now, why+": one more")
	case gain > 1:
		return d.move(l, true, now, why+": stays")
	}
	return d.move(l-1, true, now, why+": one fewer")
}

// move sets d's level and returns the change, with what was measured.
func (d *density) move(to int, final bool, now time.Time, why string) *DensityChange {
	c := &DensityChange{Shape: d.shape, From: d.level, To: to, Final: final, Why: why}
	for n := 1; n <= max(d.level, to)+1 && n <= pack.AutoRunsPerGPU; n++ {
		if v, k := d.value(n, time.Time{}); k > 0 {
			c.At = append(c.At, DensityReading{Runs: n, StepsPerSec: v, Readings: k})
		}
	}
	d.level, d.final, d.decided = to, final, now
	return c
}

// densities runs the rule for every shape and carries out its changes:
// the shape's waiting runs ask for the new share, and on a rise its
// placed runs shrink their claims to it, so that more join them at once.
func (s *Scheduler) densities(now time.Time) []DensityChange {
	var out []DensityChange
	for _, shape := range slices.Sorted(maps.Keys(s.dens)) { // in one order: a test replays it exactly
		d := s.dens[shape]
		if c := s.decide(d, now); c != nil {
			out = append(out, *c)
			s.relearn = true
			if c.To > c.From {
				s.shrink(d.shape)
			}
		}
	}
	return out
}

// shrink has the placed gpus=auto runs of shape claim the share its level
// gives.
func (s *Scheduler) shrink(shape string) {
	for _, runs := range s.onGPU {
		for _, p := range runs {
			if p.w.shape != shape || p.w.grown != nil || p.probe && !p.learned {
				continue
			}
			if as, err := s.alloc.Resize(p.as, s.resolve(p.w)); err == nil {
				p.as = as
			}
		}
	}
}

// outOfMemory says a gpus=auto run failed for its GPU's memory, with up
// to n gpus=auto runs on its GPU while it ran: its shape stays below n for
// good.
func (s *Scheduler) outOfMemory(p *placement, c failure.Class, now time.Time) *DensityChange {
	if !p.w.asked.AutoShare || c != failure.CUDAOOM && c != failure.GPUMem || len(p.as.GPUs) != 1 {
		return nil
	}
	n := p.win.crowd
	d := s.densityOf(p.w.shape)
	if n < 2 || d.most < n {
		return nil
	}
	d.most = n - 1
	if d.level < n {
		return nil
	}
	s.relearn = true
	return d.move(n-1, true, now, fmt.Sprintf("%d runs on a GPU: %s", n, c))
}

// share is the part of a GPU a gpus=auto run of shape takes: 1/level.
func (s *Scheduler) share(shape string) int {
	return pack.GPUWhole / s.densityOf(shape).level
}
