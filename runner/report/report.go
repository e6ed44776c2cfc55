// Package report writes a sweep's output directory as one self-contained
// HTML page: a timeline of every attempt on the node's GPUs and CPU lanes,
// the share of GPUs and CPUs in use over time, the headline numbers, and a
// sortable, filterable table of the runs with their parameters, metrics
// and logs. The page makes no network request of any kind (its
// Content-Security-Policy forbids it), so it opens on an offline cluster
// and on a laptop after scp.
package report

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/nodepack/nodepack/runner/ledger"
	"github.com/nodepack/nodepack/runner/metrics"
)

// Options says how to write a report. The zero Options links the logs as
// if the page were in the output directory.
type Options struct {
	// LogBase is the output directory as the page should reach it: a path
	// relative to where the page is saved ("" when it is in the directory).
	LogBase string
	// Metrics adds metrics from the runs' stdout, as for the results
	// table.
	Metrics []metrics.Pattern
	// Rank is the metric the page ranks the runs by: "loss", "loss:min" or
	// "acc:max"; empty chooses one (a validation loss, a loss, else the
	// first metric), in the direction its name suggests, and says why.
	Rank string
	// Progress, if not nil, is called now and then with the bytes of
	// ledger read so far and their total.
	Progress func(done, total int64)
	// Now is when the report is made (the end of the attempts still
	// running); zero means time.Now().
	Now time.Time
}

// Summary is what Write wrote.
type Summary struct {
	Runs, Attempts int
	Bytes          int64
}

// Write writes the report of the sweep in dir to w.
func Write(w io.Writer, dir string, opts Options) (Summary, error) {
	if opts.Now.IsZero() {
		opts.Now = time.Now()
	}
	s := newStore(dir, opts)
	d, err := ledger.ReadDir(dir, ledger.ReadOptions{Attempts: true, Progress: opts.Progress})
	if err != nil {
		return Summary{}, err // it names the ledger and line
	}
	logs, err := d.Sweep()
	if err != nil {
		return Summary{}, err
	}
	s.node = nodeOf(*d.Current)
	if err := s.read(logs); err != nil {
		return Summary{}, err
	}
	if opts.Progress != nil {
		total := ledgerBytes(dir)
		opts.Progress(total, total)
	}
	rows := s.rowsOf()
	attempts := s.attemptsOf(opts.Now.UnixMilli())
	doc := s.build(rows, attempts, len(logs))
	rank, err := s.rankBy(opts.Rank)
	if err != nil {
		return Summary{}, err
	}
	doc.Rank = rank
	bestRows := s.best(rows, rank, bestRuns)
	p := &page{store: s, doc: doc, rows: rows, attempts: attempts, best: bestRows}
	cw := &countingWriter{w: w}
	if err := p.write(cw, filepath.Base(dir)); err != nil {
		return Summary{}, fmt.Errorf("write report: %w", err)
	}
	return Summary{Runs: len(rows), Attempts: len(attempts), Bytes: cw.n}, nil
}

// WriteFile writes the report of the sweep in dir to the file path, whole
// or not at all: into a temporary file beside it, renamed over it once
// written, so that a reader never sees half a page. The logs are linked
// from where the page is (opts.LogBase is set from path).
func WriteFile(path, dir string, opts Options) (Summary, error) {
	// Before the temporary file: a directory without a ledger is said
	// as such, not as a file that could not be made.
	if err := ledger.HasLedger(dir); err != nil {
		return Summary{}, err
	}
	absDir, err := filepath.Abs(dir)
	if err != nil {
		return Summary{}, err
	}
	if path, err = filepath.Abs(path); err != nil {
		return Summary{}, err
	}
	if rel, err := filepath.Rel(filepath.Dir(path), absDir); err == nil && rel != "." {
		opts.LogBase = filepath.ToSlash(rel)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".report-*.html")
	if err != nil {
		return Summary{}, err
	}
	defer os.Remove(tmp.Name())
	sum, err := Write(tmp, dir, opts)
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	return sum, err
}

// ledgerBytes is the size of the ledgers in dir, for progress.
func ledgerBytes(dir string) int64 {
	files, _ := ledger.Files(dir)
	var n int64
	for _, f := range files {
		if st, err := os.Stat(f); err == nil {
			n += st.Size()
		}
	}
	return n
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// nodeInfo is what the newest header says of the node.
type nodeInfo struct {
	GPUs []string // UUIDs, or MIG device UUIDs
	CPUs int
	Host string
	// Sessions are when a nodepack ran the sweep (any shard), in ms since
	// the epoch: from its header to its end record, or to its last record
	// when it was killed, or to now while it runs.
	Sessions [][2]int64
}

// nodeOf reads the node of a header: its GPUs (MIG devices where MIG is
// on) and CPU count.
func nodeOf(h ledger.Header) nodeInfo {
	var n struct {
		Hostname string `json:"hostname"`
		CPUs     []any  `json:"cpus"`
		GPUs     []struct {
			UUID string `json:"uuid"`
			MIG  []struct {
				UUID string `json:"uuid"`
			} `json:"mig_devices"`
		} `json:"gpus"`
	}
	json.Unmarshal(h.Node, &n)
	info := nodeInfo{CPUs: len(n.CPUs), Host: n.Hostname}
	for _, g := range n.GPUs {
		if len(g.MIG) > 0 {
			for _, m := range g.MIG {
				info.GPUs = append(info.GPUs, m.UUID)
			}
			continue
		}
		info.GPUs = append(info.GPUs, g.UUID)
	}
	return info
}

// document is the data the page draws, compact: arrays, not objects.
// densityDoc is a decision of the density rule: when (ms after T0), for
// which command shape, from and to how many runs per GPU, for good or
// not, the GPU's steps per second measured with each number of runs
// ([runs, steps/s] pairs), and why.
type densityDoc struct {
	T        int64        `json:"t"`
	Shape    string       `json:"shape"`
	From     int          `json:"from"`
	To       int          `json:"to"`
	Final    bool         `json:"final,omitempty"`
	Measured [][2]float64 `json:"measured,omitempty"`
	Why      string       `json:"why,omitempty"`
}

type document struct {
	Host     string    `json:"host"`
	Made     time.Time `json:"made"`
	T0       int64     `json:"t0"` // ms since the epoch; times below are ms after it
	Span     int64     `json:"span"`
	Lanes    []string  `json:"lanes"`
	LaneRows []int     `json:"laneRows"` // how many rows each lane has: runs that share a GPU overlap
	States   []string  `json:"states"`   // the state or class names att's codes index
	// Att: lane, row in the lane, start, end, state code, run (its row in
	// the table, -1 none), attempt number, then lane and row pairs for
	// the other GPUs of a multi-GPU run.
	// Att (written by page.write): lane, row in the lane, start, end,
	// state code, run (its row in the table, -1 none), attempt number,
	// then lane and row pairs for the other GPUs of a multi-GPU run.
	Util    [][3]float64   `json:"util"` // time (ms after t0), GPU share, CPU share
	Numbers map[string]any `json:"numbers"`
	// Cols are the table's columns; its rows (page.write) are arrays of
	// their values.
	Cols    []string `json:"cols"`
	LogBase string   `json:"logBase"`
	Links   []int    `json:"links"` // the columns that are log paths
	Times   []int    `json:"times"` // the columns that are times, ms after T0
	// Params and Metrics are how many of the columns after the first
	// (origin) are parameters, then metrics.
	Params  int `json:"params"`
	Metrics int `json:"metrics"`
	// Rungs are the pruning policy's judgements: rung step, the run's row
	// (-1 none), its value (null when not a number) and whether it was
	// stopped there; RungMetric its metric.
	Rungs      [][4]any `json:"rungs,omitempty"`
	RungMetric string   `json:"rungMetric,omitempty"`
	// Densities are the density rule's decisions (--runs-per-gpu auto),
	// oldest first.
	Densities []densityDoc `json:"densities,omitempty"`
	// Rank is the metric the runs are ranked by; Best the rows of the
	// best runs, best first, and BestCurves their curves of it, read
	// whole; curves (page.write) every row's curve of it as its record
	// has it (a few points; null for none), for a hover; AllCurves false
	// when only the best rows have theirs (the page would be too big).
	Rank       ranking        `json:"rank"`
	Best       []int          `json:"best"`
	BestCurves [][][2]float64 `json:"bestCurves"`
	AllCurves  bool           `json:"allCurves"`
}

// compareNatural orders names with numbers in them by the numbers:
// "CPU lane 2" before "CPU lane 10".
func compareNatural(a, b string) int {
	for a != "" && b != "" {
		da, db := digits(a), digits(b)
		if da > 0 && db > 0 {
			na, _ := strconv.Atoi(a[:da])
			nb, _ := strconv.Atoi(b[:db])
			if na != nb {
				return na - nb
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return int(a[0]) - int(b[0])
		}
		a, b = a[1:], b[1:]
	}
	return len(a) - len(b)
}

func digits(s string) int {
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	return n
}

// maxUtilPoints bounds the points of the utilization curve: each is a
// step, merged with its neighbours when there are more.
const maxUtilPoints = 2000

// utilization is the share of the GPUs and CPUs of the sweep's nodes
// (one per shard) held by attempts over time, as steps: at each point,
// the share from then on.
func utilization(s *store, attempts []attRef, node nodeInfo, shards int, t0 int64) [][3]float64 {
	type change struct {
		at       int64
		gpu, cpu float64
	}
	cs := make([]change, 0, 2*len(attempts))
	for _, k := range attempts {
		a := s.attempt(k)
		cs = append(cs, change{a.Start - t0, float64(a.GPUShare), float64(a.CPUs)}, change{a.End - t0, -float64(a.GPUShare), -float64(a.CPUs)})
	}
	slices.SortFunc(cs, func(a, b change) int { return cmp.Compare(a.at, b.at) })
	// The shards ran on nodes like the newest header's, one each.
	gpus, cpus := float64(max(len(node.GPUs)*shards, 1)), float64(max(node.CPUs*shards, 1))
	var out [][3]float64
	var g, c float64
	for i, ch := range cs {
		g += ch.gpu
		c += ch.cpu
		if i+1 < len(cs) && cs[i+1].at == ch.at {
			continue
		}
		out = append(out, [3]float64{float64(ch.at), min(max(g/gpus, 0), 1), min(max(c/cpus, 0), 1)})
	}
	if len(out) <= maxUtilPoints {
		return out
	}
	// Merge neighbours: each kept point holds the time-weighted mean of
	// the steps it covers.
	span := out[len(out)-1][0]
	step := span / maxUtilPoints
	var merged [][3]float64
	for i := 0; i < len(out); {
		from := out[i][0]
		var gs, css, w float64
		j := i
		for ; j < len(out) && out[j][0] < from+step; j++ {
			next := span
			if j+1 < len(out) {
				next = out[j+1][0]
			}
			d := max(next-out[j][0], 0)
			gs += out[j][1] * d
			css += out[j][2] * d
			w += d
		}
		if w == 0 {
			merged = append(merged, out[i])
		} else {
			merged = append(merged, [3]float64{from, gs / w, css / w})
		}
		i = j
	}
	return merged
}

// gap is a stretch of the sweep when the node was less than half used:
// from and to in ms after t0, and why, as far as the ledgers tell.
type gap struct {
	From  float64 `json:"from"`
	To    float64 `json:"to"`
	Cause string  `json:"cause"`
}

// maxGaps is how many gaps a report calls out: the longest.
const maxGaps = 5

// gaps finds the longest stretches, each at least 2% of the span and a
// second, when less than half the node's GPUs (CPUs on a node without
// GPUs) were in use, and names their cause: no nodepack ran the sweep
// then (between a stop and a resume or requeue), no run was left to start
// (the last runs finishing), or else fewer runs ran than would fit, which
// the ledgers do not explain further (the cap on runs at once, a large
// run's reservation, memory, retries waiting for their backoff).
func gaps(util [][3]float64, span int64, node nodeInfo, s *store, attempts []attRef, t0 int64, byGPU bool) []gap {
	k := 2
	if byGPU {
		k = 1
	}
	minLen := max(float64(span)/50, 1000)
	var lastStart float64
	for _, k := range attempts {
		lastStart = max(lastStart, float64(s.attempt(k).Start-t0))
	}
	live := func(from, to float64) bool {
		for _, s := range node.Sessions {
			a, b := float64(s[0]-t0), float64(s[1]-t0)
			if a < to && b > from {
				return true
			}
		}
		return false
	}
	var out []gap
	one := func(from, to float64) {
		if to-from < minLen {
			return
		}
		cause := "fewer runs ran than the node had room for: the cap on runs at once (the parallel setting, the CPUs), runs waiting for what others held (GPUs reserved for a large run, memory), or retries waiting"
		switch {
		case !live(from, to):
			cause = "no nodepack ran the sweep (between a stop and its resume)"
		case from >= lastStart:
			cause = "no run was left to start: the last runs finishing"
		}
		out = append(out, gap{From: from, To: to, Cause: cause})
	}
	// A stretch is cut where sessions start and end: the time between
	// sessions has a cause of its own.
	add := func(from, to float64) {
		cuts := []float64{from, to}
		for _, s := range node.Sessions {
			for _, t := range s {
				if c := float64(t - t0); c > from && c < to {
					cuts = append(cuts, c)
				}
			}
		}
		slices.Sort(cuts)
		for i := 0; i+1 < len(cuts); i++ {
			one(cuts[i], cuts[i+1])
		}
	}
	start := -1.0
	for i, p := range util {
		if p[k] < 0.5 && start < 0 {
			start = p[0]
		}
		if p[k] >= 0.5 && start >= 0 {
			add(start, p[0])
			start = -1
		}
		if i == len(util)-1 && start >= 0 {
			add(start, float64(span))
		}
	}
	slices.SortFunc(out, func(a, b gap) int {
		switch {
		case a.To-a.From > b.To-b.From:
			return -1
		case a.To-a.From < b.To-b.From:
			return 1
		}
		return 0
	})
	if len(out) > maxGaps {
		out = out[:maxGaps]
	}
	return out
}

// busy is the mean GPU and CPU share over the span.
func busy(util [][3]float64, span int64) (gpu, cpu float64) {
	for i, p := range util {
		next := float64(span)
		if i+1 < len(util) {
			next = util[i+1][0]
		}
		d := max(next-p[0], 0)
		gpu += p[1] * d
		cpu += p[2] * d
	}
	return gpu / float64(span), cpu / float64(span)
}
