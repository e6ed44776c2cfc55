// Package report writes a sweep's output directory as one self-contained
// HTML page: a timeline of every attempt on the node's GPUs and CPU lanes,
// the share of GPUs and CPUs in use over time, the headline numbers, and a
// sortable, filterable table of the runs with their parameters, metrics
// and logs. The page makes no network request of any kind (its
// Content-Security-Policy forbids it), so it opens on an offline cluster
// and on a laptop after scp.
package report

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/runner/ledger"
	"github.com/nodepack/nodepack/runner/metrics"
	"github.com/nodepack/nodepack/runner/results"
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

// attempt is one attempt as the ledgers tell it.
type attempt struct {
	run          string
	n            int
	start, end   time.Time
	lane         int
	gpus         []string
	cpus         int
	gpuShare     float64 // GPUs held: whole ones, or the share of one
	state, class string
	ended        bool
	file         string
	sessionEnd   time.Time // when its session ended, if it did
	sessionLive  bool
	session      int // its session in nodeInfo.Sessions
}

// Write writes the report of the sweep in dir to w.
func Write(w io.Writer, dir string, opts Options) (Summary, error) {
	if opts.Now.IsZero() {
		opts.Now = time.Now()
	}
	r := &reader{opts: opts, total: ledgerBytes(dir)}
	// One read of the ledgers gives the table and, record by record, the
	// attempts.
	table, err := results.ReadEach(dir, opts.Metrics, r.record)
	if err != nil {
		return Summary{}, err // it names dir, or the ledger and line
	}
	if opts.Progress != nil {
		opts.Progress(r.total, r.total)
	}
	attempts := r.finish(table)
	rank, err := rankBy(table, opts.Rank)
	if err != nil {
		return Summary{}, err
	}
	doc := build(table, attempts, r.node, opts)
	doc.Rank = rank
	doc.Best = best(table, rank, bestRuns)
	for _, i := range doc.Best {
		doc.BestCurves = append(doc.BestCurves, bestCurve(dir, table.Rows[i], rank.Metric, opts.Metrics))
	}
	doc.Curves, doc.AllCurves = hoverCurves(table, rank.Metric, doc.Best)
	data, err := json.Marshal(doc) // escapes <, > and &: safe inside <script>
	if err != nil {
		return Summary{}, fmt.Errorf("report data: %w", err)
	}
	cw := &countingWriter{w: w}
	bw := bufio.NewWriter(cw)
	head, tail, _ := strings.Cut(page, "/*DATA*/")
	bw.WriteString(strings.ReplaceAll(head, "TITLE", html.EscapeString(filepath.Base(dir))))
	bw.Write(data)
	bw.WriteString(tail)
	if err := bw.Flush(); err != nil {
		return Summary{}, fmt.Errorf("write report: %w", err)
	}
	return Summary{Runs: len(table.Rows), Attempts: len(attempts), Bytes: cw.n}, nil
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
	// Sessions are when a nodepack ran the sweep (any shard): from its
	// header to its end record, or to its last record when it was killed,
	// or to now while it runs.
	Sessions [][2]time.Time
}

// reader gathers the attempts from the ledgers' records, file by file.
type reader struct {
	opts        Options
	total, done int64
	all         []*attempt
	node        nodeInfo
	newest      time.Time
	// The file being read: its attempts not finished yet, its last
	// session's attempts, and that session in node.Sessions.
	file      string
	open      map[attemptKey]*attempt
	session   []*attempt
	sessionAt int
}

// record takes the next record of file (results.ReadEach's each).
func (r *reader) record(file string, rec *ledger.Record, size int) {
	r.done += int64(size)
	if r.opts.Progress != nil && r.done%(1<<20) < int64(size) {
		r.opts.Progress(r.done, r.total)
	}
	if file != r.file {
		r.file, r.open, r.session, r.sessionAt = file, map[attemptKey]*attempt{}, nil, -1
	}
	if r.sessionAt >= 0 && rec.Type != ledger.TypeHeader && rec.Time.After(r.node.Sessions[r.sessionAt][1]) {
		r.node.Sessions[r.sessionAt][1] = rec.Time
	}
	switch rec.Type {
	case ledger.TypeHeader:
		r.node.Sessions = append(r.node.Sessions, [2]time.Time{rec.Time, rec.Time})
		r.sessionAt = len(r.node.Sessions) - 1
		for _, a := range r.session {
			a.sessionLive = false // a later session: this one was killed
		}
		r.session, r.open = nil, map[attemptKey]*attempt{}
		if rec.Time.After(r.newest) {
			r.newest = rec.Time
			sessions := r.node.Sessions
			r.node = nodeOf(*rec)
			r.node.Sessions = sessions
		}
	case ledger.TypeStarted:
		a := &attempt{run: rec.ID, n: rec.Attempt, start: rec.Time, gpus: rec.GPUs, file: file, sessionLive: true, session: r.sessionAt}
		if rec.Lane != nil {
			a.lane = *rec.Lane
		}
		if ids, err := pack.ParseCPUList(rec.CPUs); err == nil {
			a.cpus = len(ids)
		}
		a.cpus = max(a.cpus, 1)
		a.gpuShare = float64(len(rec.GPUs))
		if q, err := pack.ParseRequest(rec.Request, pack.Request{}, 0); err == nil && q.GPUs == 0 && q.GPUShare > 0 && len(rec.GPUs) == 1 {
			a.gpuShare = float64(q.GPUShare) / pack.GPUWhole
		}
		r.open[attemptKey{rec.ID, rec.Attempt}] = a
		r.session = append(r.session, a)
		r.all = append(r.all, a)
	case ledger.TypeFinished:
		k := attemptKey{rec.ID, rec.Attempt}
		if a := r.open[k]; a != nil {
			delete(r.open, k)
			a.end, a.ended = rec.Time, true
			a.state, a.class = string(rec.Reason), string(rec.Class)
		}
	case ledger.TypeEnd:
		for _, a := range r.session {
			a.sessionLive = false
			a.sessionEnd = rec.Time
		}
	}
}

// finish returns the attempts of the table's runs (those of the sweep's
// ledgers, not retired), each with an end: an attempt its session left
// unfinished ended with that session, or runs on while the table says its
// run runs (its nodepack is live).
func (r *reader) finish(table *results.Table) []*attempt {
	state := make(map[string]ledger.State, len(table.Rows))
	for _, row := range table.Rows {
		state[row.ID] = row.State
	}
	var out []*attempt
	for _, a := range r.all {
		s, ok := state[a.run]
		if !ok || !slices.Contains(table.Files, a.file) {
			continue // another sweep's, or a run its sweep left
		}
		out = append(out, a)
		if a.ended {
			continue
		}
		switch {
		case a.sessionLive && s == ledger.StateRunning:
			a.state, a.end = "running", r.opts.Now
			r.node.Sessions[a.session][1] = r.opts.Now // it runs on
		case !a.sessionEnd.IsZero():
			a.state, a.end = "interrupted", a.sessionEnd
		default:
			// Its nodepack was killed: it ended by the session's last record.
			a.state, a.end = "interrupted", r.node.Sessions[a.session][1]
		}
	}
	return out
}

// attemptKey names an attempt among a ledger's.
type attemptKey struct {
	run string
	n   int
}

// nodeOf reads the node of a header: its GPUs (MIG devices where MIG is
// on) and CPU count.
func nodeOf(h ledger.Record) nodeInfo {
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
	Att     [][]int64           `json:"att"`
	Util    [][3]float64        `json:"util"` // time (ms after t0), GPU share, CPU share
	Numbers map[string]any      `json:"numbers"`
	Cols    []string            `json:"cols"`
	Rows    [][]json.RawMessage `json:"rows"`
	LogBase string              `json:"logBase"`
	Links   []int               `json:"links"` // the columns that are log paths
	Times   []int               `json:"times"` // the columns that are times, ms after T0
	// Params and Metrics are how many of the columns after the first
	// (origin) are parameters, then metrics.
	Params  int `json:"params"`
	Metrics int `json:"metrics"`
	// Rank is the metric the runs are ranked by; Best the rows of the
	// best runs, best first, and BestCurves their curves of it, read
	// whole; Curves every row's curve of it as its record has it (a few
	// points; null for none), for a hover; AllCurves false when only the
	// best rows have theirs (the page would be too big).
	Rank       ranking           `json:"rank"`
	Best       []int             `json:"best"`
	BestCurves [][][2]float64    `json:"bestCurves"`
	Curves     []json.RawMessage `json:"curves"`
	AllCurves  bool              `json:"allCurves"`
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

// stateOf is the name an attempt is drawn and counted by: its failure
// class when it failed, else its state.
func stateOf(a *attempt) string {
	switch {
	case a.state == "ok":
		return "succeeded"
	case a.class != "" && a.state != "interrupted":
		return a.class
	case a.state == "":
		return "failed"
	}
	return a.state
}

func build(table *results.Table, attempts []*attempt, node nodeInfo, opts Options) document {
	doc := document{Host: node.Host, Made: opts.Now.UTC(), LogBase: opts.LogBase, Numbers: map[string]any{}}
	rowOf := map[string]int{}
	for i, r := range table.Rows {
		rowOf[r.ID] = i
	}
	// Lanes: the node's GPUs in its order, then the CPU lanes.
	laneOf := map[string]int{}
	lane := func(name string) int {
		if i, ok := laneOf[name]; ok {
			return i
		}
		laneOf[name] = len(doc.Lanes)
		doc.Lanes = append(doc.Lanes, name)
		return laneOf[name]
	}
	// The shards of a sweep ran on nodes of their own: each has lanes of
	// its own, named after it.
	shards := len(table.Files)
	if shards < 2 {
		for _, g := range node.GPUs {
			lane("GPU " + g)
		}
	}
	stateCode := map[string]int{}
	var t0, t1 time.Time
	for _, a := range attempts {
		if t0.IsZero() || a.start.Before(t0) {
			t0 = a.start
		}
		if a.end.After(t1) {
			t1 = a.end
		}
	}
	doc.T0, doc.Span = t0.UnixMilli(), max(t1.Sub(t0).Milliseconds(), 1)
	ms := func(t time.Time) int64 { return t.Sub(t0).Milliseconds() }
	shardOf := func(a *attempt) string {
		if shards < 2 {
			return ""
		}
		name := strings.TrimSuffix(strings.TrimPrefix(a.file, "ledger-"), ".jsonl")
		return "shard " + strings.Replace(name, "-of-", "/", 1) + " "
	}
	slotName := func(a *attempt) string { return fmt.Sprintf("%sCPU lane %d", shardOf(a), a.lane) }
	gpuName := func(a *attempt, g string) string { return shardOf(a) + "GPU " + g }
	slotSet := map[string]bool{}
	for _, a := range attempts {
		if len(a.gpus) == 0 {
			slotSet[slotName(a)] = true
		}
	}
	slotNames := slices.SortedFunc(maps.Keys(slotSet), compareNatural)
	for _, name := range slotNames {
		lane(name)
	}
	// Runs sharing a GPU overlap in time: each lane has as many rows as
	// it needs, and an attempt takes the first row free at its start.
	rowEnds := map[int][]time.Time{}
	place := func(l int, a *attempt) int {
		ends := rowEnds[l]
		for i, e := range ends {
			if !e.After(a.start) {
				ends[i] = a.end
				return i
			}
		}
		rowEnds[l] = append(ends, a.end)
		return len(ends)
	}
	counts := map[string]int{}
	var lost time.Duration
	for _, a := range attempts {
		st := stateOf(a)
		code, ok := stateCode[st]
		if !ok {
			code = len(doc.States)
			stateCode[st] = code
			doc.States = append(doc.States, st)
		}
		row := int64(-1)
		if i, ok := rowOf[a.run]; ok {
			row = int64(i)
		}
		var lanes []int
		if len(a.gpus) == 0 {
			lanes = []int{lane(slotName(a))}
		} else {
			for _, g := range a.gpus {
				lanes = append(lanes, lane(gpuName(a, g)))
			}
		}
		at := []int64{int64(lanes[0]), int64(place(lanes[0], a)), ms(a.start), ms(a.end), int64(code), row, int64(a.n)}
		for _, l := range lanes[1:] {
			at = append(at, int64(l), int64(place(l, a)))
		}
		doc.Att = append(doc.Att, at)
		if a.ended && a.state != "ok" && a.state != "interrupted" {
			lost += a.end.Sub(a.start)
		}
		counts[st]++
	}
	for l := range doc.Lanes {
		doc.LaneRows = append(doc.LaneRows, max(len(rowEnds[l]), 1))
	}
	doc.Util = utilization(attempts, node, max(shards, 1), t0)
	// Headline numbers.
	runStates := map[string]int{}
	for _, r := range table.Rows {
		s := string(r.State)
		if r.State == ledger.StateFailed && r.Class != "" {
			s = "failed (" + r.Class + ")"
		}
		runStates[s]++
	}
	doc.Numbers["runs"] = len(table.Rows)
	doc.Numbers["attempts"] = len(attempts)
	doc.Numbers["makespan_s"] = t1.Sub(t0).Seconds()
	doc.Numbers["lost_to_failures_s"] = lost.Seconds()
	doc.Numbers["runs_by_state"] = runStates
	doc.Numbers["attempts_by_outcome"] = counts
	gpuBusy, cpuBusy := busy(doc.Util, doc.Span)
	if len(node.GPUs) > 0 {
		doc.Numbers["gpus_busy_percent"] = gpuBusy * 100
	}
	doc.Numbers["cpus_busy_percent"] = cpuBusy * 100
	doc.Numbers["gpus"], doc.Numbers["cpus"] = len(node.GPUs), node.CPUs
	doc.Numbers["slowest"], doc.Numbers["fastest"] = extremes(table)
	doc.Numbers["gaps"] = gaps(doc.Util, doc.Span, node, attempts, t0, len(node.GPUs) > 0)
	// The table, as the results table has it, smaller: start and end as
	// milliseconds after t0, and one column with the run's log directory
	// in place of the two log paths.
	doc.Rows, doc.Cols = tableRows(table, t0)
	doc.Params, doc.Metrics = len(table.Params), len(table.Metrics)
	for i, c := range doc.Cols {
		switch c {
		case "logs":
			doc.Links = append(doc.Links, i)
		case "start", "end":
			doc.Times = append(doc.Times, i)
		}
	}
	return doc
}

// tableRows is the table's cells, row by row, and their columns: those
// of the results table in the order tableColumns gives, with start and end
// as milliseconds after t0, and one column with the run's log directory in
// place of the two log paths.
func tableRows(t *results.Table, t0 time.Time) ([][]json.RawMessage, []string) {
	cols, from := tableColumns(t)
	rows := make([][]json.RawMessage, len(t.Rows))
	for i, r := range t.Rows {
		cells := t.Cells(r)
		row := make([]json.RawMessage, 0, len(cols))
		for j, k := range from {
			switch {
			case cols[j] == "start":
				row = append(row, sinceT0(r.Start, t0))
			case cols[j] == "end":
				row = append(row, sinceT0(r.End, t0))
			case cols[j] == "state":
				row = append(row, quoteJSON(stateName(r)))
			case k < 0: // logs
				if r.Stdout == "" {
					row = append(row, nil)
					continue
				}
				row = append(row, quoteJSON(filepath.ToSlash(filepath.Dir(r.Stdout))))
			default:
				row = append(row, cells[k])
			}
		}
		rows[i] = row
	}
	return rows, cols
}

func quoteJSON(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// sinceT0 is a time as milliseconds after t0; nil for none.
func sinceT0(t, t0 time.Time) json.RawMessage {
	if t.IsZero() {
		return nil
	}
	return json.RawMessage(strconv.FormatInt(t.Sub(t0).Milliseconds(), 10))
}

// extremes lists the slowest and the fastest succeeded runs, five each:
// origin and seconds.
func extremes(t *results.Table) (slowest, fastest [][2]any) {
	var ok []results.Row
	for _, r := range t.Rows {
		if r.State == ledger.StateSucceeded {
			ok = append(ok, r)
		}
	}
	slices.SortFunc(ok, func(a, b results.Row) int {
		switch {
		case a.Seconds > b.Seconds:
			return -1
		case a.Seconds < b.Seconds:
			return 1
		}
		return strings.Compare(a.ID, b.ID)
	})
	name := func(r results.Row) string {
		if r.Origin != "" {
			return filepath.Base(r.Origin)
		}
		return r.ID
	}
	for i := 0; i < len(ok) && i < 5; i++ {
		slowest = append(slowest, [2]any{name(ok[i]), ok[i].Seconds})
		j := len(ok) - 1 - i
		fastest = append(fastest, [2]any{name(ok[j]), ok[j].Seconds})
	}
	return slowest, fastest
}

// maxUtilPoints bounds the points of the utilization curve: each is a
// step, merged with its neighbours when there are more.
const maxUtilPoints = 2000

// utilization is the share of the GPUs and CPUs of the sweep's nodes
// (one per shard) held by attempts over time, as steps: at each point,
// the share from then on.
func utilization(attempts []*attempt, node nodeInfo, shards int, t0 time.Time) [][3]float64 {
	type change struct {
		at       int64
		gpu, cpu float64
	}
	var cs []change
	for _, a := range attempts {
		s, e := a.start.Sub(t0).Milliseconds(), a.end.Sub(t0).Milliseconds()
		cs = append(cs, change{s, a.gpuShare, float64(a.cpus)}, change{e, -a.gpuShare, -float64(a.cpus)})
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
func gaps(util [][3]float64, span int64, node nodeInfo, attempts []*attempt, t0 time.Time, byGPU bool) []gap {
	k := 2
	if byGPU {
		k = 1
	}
	minLen := max(float64(span)/50, 1000)
	var lastStart float64
	for _, a := range attempts {
		lastStart = max(lastStart, float64(a.start.Sub(t0).Milliseconds()))
	}
	live := func(from, to float64) bool {
		for _, s := range node.Sessions {
			a, b := float64(s[0].Sub(t0).Milliseconds()), float64(s[1].Sub(t0).Milliseconds())
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
				if c := float64(t.Sub(t0).Milliseconds()); c > from && c < to {
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
