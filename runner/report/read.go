package report

import (
	"bytes"
	"cmp"
	"encoding/json"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/runner/ledger"
	"github.com/nodepack/nodepack/runner/metrics"
	"github.com/nodepack/nodepack/runner/run"
)

// The store holds a sweep's runs and attempts as the ledgers' records tell
// them, in little memory: numbers and indexes into dictionaries rather
// than records, maps and times, so that a report of a million runs holds
// a few hundred bytes a run (ledger.Stream keeps little more).

// dict numbers distinct texts: 0 is none, i the i-th text given.
type dict struct {
	ids   map[string]uint32
	texts []string
}

func (d *dict) id(s string) uint32 {
	if s == "" {
		return 0
	}
	if i, ok := d.ids[s]; ok {
		return i
	}
	if d.ids == nil {
		d.ids, d.texts = map[string]uint32{}, []string{""}
	}
	d.texts = append(d.texts, s)
	d.ids[s] = uint32(len(d.texts) - 1)
	return uint32(len(d.texts) - 1)
}

func (d *dict) text(i uint32) string {
	if i == 0 {
		return ""
	}
	return d.texts[i]
}

// chunked is a list that grows in chunks, so that a million elements
// are never copied to grow, nor leave a quarter of their room unused.
type chunked[T any] struct {
	chunks [][]T
	n      int
}

const chunkSize = 1 << 16

// add appends a zero element and returns its index.
func (c *chunked[T]) add() int {
	if c.n%chunkSize == 0 {
		c.chunks = append(c.chunks, make([]T, 0, chunkSize))
	}
	last := &c.chunks[len(c.chunks)-1]
	var zero T
	*last = append(*last, zero)
	c.n++
	return c.n - 1
}

func (c *chunked[T]) at(i int) *T { return &c.chunks[i/chunkSize][i%chunkSize] }

func (c *chunked[T]) len() int { return c.n }

// runData is what the report keeps of one run (store.runs).
type runData struct {
	index int32
	// The origin is originFile:originLine when it reads so (originFile a
	// text), else store.originTexts has it.
	originFile uint32
	originLine int32
	start, end int64 // its last attempt's, ms since the epoch; 0 none
	seconds    float64
	rss        uint64
	gpuMem     uint64
	gpus, cpus uint32 // texts
	class      uint32 // text
	signal     uint32 // text
	exit       int32
	pos        int32 // its row on the page; -1 not part of the sweep
	tries      int32
	// curve is where its last finished record is in its ledger, for its
	// curves; -1 none. The curves themselves are in store.curves at
	// curveAt, curveLen long, while the store keeps them (curveBudget).
	curve             int64
	curveAt, curveLen uint32
	// logs is its run directory, relative to the output directory, in
	// store.logs.
	logsAt  uint32
	logsLen uint16
	state   uint8 // in states
	file    uint8 // in store.files (also past 255: then the page's lanes only are off)
	hasExit bool
	// paramsRead and metricsRead say its records held its params and
	// metrics (a ledger from before they did, or a run without a finished
	// record, has its files read).
	paramsRead, metricsRead bool
}

// states are the states a runData's state numbers.
var states = []ledger.State{ledger.StatePending, ledger.StateRunning, ledger.StateSucceeded, ledger.StateFailed, ledger.StateInterrupted, ledger.StatePruned}

func stateCode(st ledger.State) uint8 { return uint8(max(slices.Index(states, st), 0)) }

// attempt is one attempt as the ledgers tell it.
type attempt struct {
	run        int32 // in store.runs
	n          int32
	start, end int64   // ms since the epoch
	gpus       uint32  // the UUIDs, comma-separated: a text
	gpuShare   float32 // GPUs held: whole ones, or the share of one
	session    int32   // in nodeInfo.Sessions
	lane       int16
	cpus       int16
	state      uint8 // in store.reasons: a reason, or running or interrupted at the end
	class      uint8 // in store.reasons
	ended      bool
}

// rungMark is one judgement of the pruning policy, for the chart of runs
// by rung.
type rungMark struct {
	run    int32 // in store.runs
	rung   int32
	step   float64
	value  float64
	pruned bool
}

// fileRuns are one ledger's runs: where each is in store.runs, at the
// place of the run among its ledger's (ledger.Log.At).
type fileRuns struct {
	name string
	runs []int32
}

// store gathers the records of a sweep's ledgers (ledger.Stream's each).
type store struct {
	opts        Options
	dir         string
	total, done int64
	files       []*fileRuns
	byName      map[string]int
	node        nodeInfo
	newest      int64
	texts       dict
	reasons     dict     // attempts' reasons and classes: few
	raws        [][]byte // parameter values and metric texts, as JSON
	rawIDs      map[string]uint32
	params      dict // parameter names, in the order first seen
	metrics     dict // metric names
	runs        chunked[runData]
	att         chunked[attempt]
	// paramCols holds, per parameter, each run's value (a raw; 0 none);
	// metricCols per metric each run's number (NaN none), or in
	// metricTexts a raw.
	paramCols   [][]uint32
	metricCols  [][]float64
	metricTexts map[[2]uint32]uint32 // (run, metric) → raw
	originTexts map[int32]string     // run → an origin not of the file:line form
	cpuCounts   map[uint32]int16     // CPU list text → how many
	// sessionLive says a session has not been followed by another in its
	// ledger; sessionEnd is when it wrote its end record (0 none).
	sessionLive []bool
	sessionEnd  []int64
	// curves holds the runs' curves, while they fit curveBudget; past it
	// the store keeps no more (curvesDropped), and the page has the best
	// runs' curves only.
	curves        []byte
	curvesDropped bool
	// rungs are the pruning policy's judgements, rungMetric its metric.
	rungs      []rungMark
	rungMetric string
	withCurves int    // runs whose curves were seen
	logs       []byte // the runs' directories (runData.logsAt)
	// The file being read: its attempts not finished yet, its last
	// session in node.Sessions, and where the next record starts.
	cur       int
	open      map[[2]int32]int // (run, attempt) → att
	sessionAt int
	offset    int64
}

func newStore(dir string, opts Options) *store {
	return &store{dir: dir, opts: opts, byName: map[string]int{}, rawIDs: map[string]uint32{}, raws: [][]byte{nil},
		cpuCounts: map[uint32]int16{}, metricTexts: map[[2]uint32]uint32{}, originTexts: map[int32]string{}}
}

// raw numbers a JSON text of a value.
func (s *store) raw(b []byte) uint32 {
	if i, ok := s.rawIDs[string(b)]; ok {
		return i
	}
	s.raws = append(s.raws, append([]byte(nil), b...))
	s.rawIDs[string(b)] = uint32(len(s.raws) - 1)
	return uint32(len(s.raws) - 1)
}

// record takes the next record of file, of the run at place i among its
// ledger's (ledger.Stream's each).
func (s *store) record(file string, rec *ledger.Record, i, size int) {
	s.done += int64(size)
	if s.opts.Progress != nil && s.done%(1<<20) < int64(size) {
		s.opts.Progress(s.done, s.total)
	}
	f, ok := s.byName[file]
	if !ok {
		f = len(s.files)
		s.byName[file] = f
		s.files = append(s.files, &fileRuns{name: file})
		s.cur, s.open, s.sessionAt, s.offset = f, map[[2]int32]int{}, -1, 0
	}
	offset := s.offset
	s.offset += int64(size)
	t := rec.Time.UnixMilli()
	if s.sessionAt >= 0 && rec.Type != ledger.TypeHeader && t > s.node.Sessions[s.sessionAt][1] {
		s.node.Sessions[s.sessionAt][1] = t
	}
	fr := s.files[f]
	switch rec.Type {
	case ledger.TypeHeader:
		if s.sessionAt >= 0 {
			s.sessionLive[s.sessionAt] = false // a later session: this one was killed
		}
		s.node.Sessions = append(s.node.Sessions, [2]int64{t, t})
		s.sessionLive, s.sessionEnd = append(s.sessionLive, true), append(s.sessionEnd, 0)
		s.sessionAt = len(s.node.Sessions) - 1
		s.open = map[[2]int32]int{}
		if t > s.newest || s.newest == 0 {
			s.newest = t
			sessions := s.node.Sessions
			s.node = nodeOf(*rec)
			s.node.Sessions = sessions
		}
		return
	case ledger.TypeEnd:
		if s.sessionAt >= 0 {
			s.sessionLive[s.sessionAt], s.sessionEnd[s.sessionAt] = false, t
		}
		return
	case ledger.TypeStarted, ledger.TypeFinished:
	default:
		if rec.Rung != nil && i >= 0 && i < len(fr.runs) {
			// A judgement of the pruning policy.
			v := math.NaN()
			if rec.Value != nil {
				v = *rec.Value
			}
			s.rungs = append(s.rungs, rungMark{run: fr.runs[i], rung: int32(*rec.Rung), step: rec.RungStep, value: v, pruned: rec.Pruned})
			s.rungMetric = rec.Metric
		}
		return
	}
	for len(fr.runs) <= i {
		g := s.runs.add()
		*s.runs.at(g) = runData{curve: -1, pos: -1, file: uint8(f)}
		fr.runs = append(fr.runs, int32(g))
	}
	g := fr.runs[i]
	r := s.runs.at(int(g))
	key := [2]int32{g, int32(rec.Attempt)}
	if rec.Type == ledger.TypeStarted {
		r.index, r.start, r.end = int32(rec.Index), t, 0
		s.setOrigin(g, r, rec.Origin)
		r.gpus, r.cpus = s.texts.id(strings.Join(rec.GPUs, ",")), s.texts.id(rec.CPUs)
		if rec.Stdout != "" {
			s.setLogs(r, rec.Stdout)
		}
		if rec.Params != nil {
			s.clearParams(g)
			s.values(g, rec.Params, true)
			r.paramsRead = true
		}
		a := attempt{run: g, n: int32(rec.Attempt), start: t, gpus: r.gpus, session: int32(s.sessionAt)}
		if rec.Lane != nil {
			a.lane = int16(*rec.Lane)
		}
		n, ok := s.cpuCounts[r.cpus]
		if !ok {
			if ids, err := pack.ParseCPUList(rec.CPUs); err == nil {
				n = int16(min(len(ids), math.MaxInt16))
			}
			s.cpuCounts[r.cpus] = n
		}
		a.cpus = max(n, 1)
		a.gpuShare = float32(len(rec.GPUs))
		if len(rec.GPUs) == 1 {
			if q, err := pack.ParseRequest(rec.Request, pack.Request{}, 0); err == nil && q.GPUs == 0 && q.GPUShare > 0 {
				a.gpuShare = float32(q.GPUShare) / pack.GPUWhole
			}
		}
		k := s.att.add()
		*s.att.at(k) = a
		s.open[key] = k
		return
	}
	// Finished.
	if r.originFile == 0 && s.originTexts[g] == "" {
		r.index = int32(rec.Index)
		s.setOrigin(g, r, rec.Origin)
	}
	r.end, r.seconds, r.class, r.signal = t, rec.Seconds, s.texts.id(string(rec.Class)), s.texts.id(rec.Signal)
	if rec.ExitCode != nil {
		r.exit, r.hasExit = int32(*rec.ExitCode), true
	}
	r.rss = max(rec.TreeRSSPeak, rec.MaxRSS)
	r.gpuMem = 0
	for _, u := range rec.GPUUsage {
		r.gpuMem += u.ProcessPeakMemoryBytes
	}
	if r.logsLen == 0 && rec.Stdout != "" {
		s.setLogs(r, rec.Stdout)
	}
	if rec.Metrics != nil {
		s.clearMetrics(g)
		s.values(g, rec.Metrics, false)
		r.metricsRead = true
		r.curve, r.curveLen = -1, 0
		if rec.Curves != nil {
			r.curve = offset
			s.withCurves++
			switch {
			case s.curvesDropped:
			case len(s.curves)+len(rec.Curves) > curveBudget, s.withCurves*hoverCurvePoints > hoverCurveBudget:
				// The page will have the best runs' curves only.
				s.curves, s.curvesDropped = nil, true
			default:
				r.curveAt, r.curveLen = uint32(len(s.curves)), uint32(len(rec.Curves))
				s.curves = append(s.curves, rec.Curves...)
			}
		}
	}
	if k, ok := s.open[key]; ok {
		delete(s.open, key)
		a := s.att.at(k)
		a.end, a.ended = t, true
		a.state, a.class = uint8(s.reasons.id(string(rec.Reason))), uint8(s.reasons.id(string(rec.Class)))
	}
}

// values reads a flat JSON object of parameters or metrics of run g into
// their columns. A metric's number is kept as a number; every other value
// (and every parameter) as its JSON text.
func (s *store) values(g int32, obj json.RawMessage, params bool) {
	metrics.EachField(obj, func(k string, v json.RawMessage) {
		if params {
			s.setParam(g, int(s.params.id(k)), s.raw(v))
			return
		}
		if c := v[0]; c == '-' || '0' <= c && c <= '9' {
			if f, err := strconv.ParseFloat(string(v), 64); err == nil {
				s.setMetric(g, int(s.metrics.id(k)), f, 0)
				return
			}
		}
		s.setMetric(g, int(s.metrics.id(k)), math.NaN(), s.raw(v))
	})
}

// setParam sets parameter column col of run g to raw.
func (s *store) setParam(g int32, col int, raw uint32) {
	for len(s.paramCols) < col {
		s.paramCols = append(s.paramCols, nil)
	}
	c := &s.paramCols[col-1]
	for len(*c) <= int(g) {
		*c = append(*c, 0)
	}
	(*c)[g] = raw
}

// setMetric sets metric column col of run g to num, or to raw when raw is
// not 0.
func (s *store) setMetric(g int32, col int, num float64, raw uint32) {
	for len(s.metricCols) < col {
		s.metricCols = append(s.metricCols, nil)
	}
	c := &s.metricCols[col-1]
	for len(*c) <= int(g) {
		*c = append(*c, math.NaN())
	}
	(*c)[g] = num
	key := [2]uint32{uint32(g), uint32(col)}
	if raw != 0 {
		s.metricTexts[key] = raw
	} else if len(s.metricTexts) > 0 {
		delete(s.metricTexts, key)
	}
}

// clearParams and clearMetrics forget run g's values before a record
// gives them again.
func (s *store) clearParams(g int32) {
	for _, c := range s.paramCols {
		if int(g) < len(c) {
			c[g] = 0
		}
	}
}

func (s *store) clearMetrics(g int32) {
	for col, c := range s.metricCols {
		if int(g) < len(c) {
			c[g] = math.NaN()
			if len(s.metricTexts) > 0 {
				delete(s.metricTexts, [2]uint32{uint32(g), uint32(col + 1)})
			}
		}
	}
}

// param returns run g's value of parameter column col as JSON; nil none.
func (s *store) param(g int32, col int) []byte {
	if c := s.paramCols[col-1]; int(g) < len(c) && c[g] != 0 {
		return s.raws[c[g]]
	}
	return nil
}

// metricValue returns run g's value of metric column col: a finite number
// (ok), or as JSON text (nil none).
func (s *store) metricValue(g int32, col int) (num float64, ok bool, text []byte) {
	c := s.metricCols[col-1]
	if int(g) >= len(c) {
		return 0, false, nil
	}
	if v := c[g]; !math.IsNaN(v) && !math.IsInf(v, 0) {
		return v, true, nil
	}
	if raw, has := s.metricTexts[[2]uint32{uint32(g), uint32(col)}]; has {
		return 0, false, s.raws[raw]
	}
	return 0, false, nil
}

// metric returns run g's number of metric column col, and whether it has
// one.
func (s *store) metric(g int32, col int) (float64, bool) {
	if col < 1 || col > len(s.metricCols) {
		return 0, false
	}
	v, ok, _ := s.metricValue(g, col)
	return v, ok
}

// setLogs keeps a run's directory, the one of its log stdout.
func (s *store) setLogs(r *runData, stdout string) {
	dir := filepath.ToSlash(filepath.Dir(stdout))
	if len(dir) > math.MaxUint16 {
		return
	}
	r.logsAt, r.logsLen = uint32(len(s.logs)), uint16(len(dir))
	s.logs = append(s.logs, dir...)
}

// logsOf is a run's directory; "" none.
func (s *store) logsOf(r *runData) string {
	return string(s.logs[r.logsAt : r.logsAt+uint32(r.logsLen)])
}

// setOrigin keeps a run's origin: file:line as a text and a number.
func (s *store) setOrigin(g int32, r *runData, origin string) {
	r.originFile, r.originLine = 0, 0
	if i := strings.LastIndexByte(origin, ':'); i > 0 {
		if n, err := strconv.Atoi(origin[i+1:]); err == nil && n >= 0 && n < math.MaxInt32 && strconv.Itoa(n) == origin[i+1:] {
			r.originFile, r.originLine = s.texts.id(origin[:i]), int32(n)
			delete(s.originTexts, g)
			return
		}
	}
	if origin != "" {
		s.originTexts[g] = origin
	}
}

// origin is run g's origin.
func (s *store) origin(g int32) string {
	if r := s.runs.at(int(g)); r.originFile != 0 {
		return s.texts.text(r.originFile) + ":" + strconv.Itoa(int(r.originLine))
	}
	return s.originTexts[g]
}

// fill reads from their files what a run's records did not hold: its
// params.json and metrics (a ledger from before they went into records,
// or a run without a finished record), and its stdout with patterns.
func (s *store) fill(g int32, kindTasks bool) {
	r := s.runs.at(int(g))
	logs := s.logsOf(r)
	if logs == "" {
		return
	}
	if !r.paramsRead && !r.metricsRead && !kindTasks {
		if obj, keys, err := metrics.ReadObject(s.dir, filepath.Join(logs, "params.json")); err == nil && obj != nil {
			s.clearParams(g)
			for _, k := range keys {
				s.setParam(g, int(s.params.id(k)), s.raw(obj[k]))
			}
		}
	}
	if !r.metricsRead {
		final, _, _ := metrics.Report(s.dir, logs, "", nil, 0)
		if final != nil && string(final) != "{}" {
			s.clearMetrics(g)
			s.values(g, final, false)
		}
	}
	if len(s.opts.Metrics) > 0 {
		var sum metrics.Summary
		reader := metrics.Reader{Root: s.dir, Path: filepath.Join(logs, "stdout.log"), Patterns: s.opts.Metrics}
		if reader.Read(true, sum.Add) == nil {
			names, values := sum.Final()
			for k, name := range names {
				var f float64
				if json.Unmarshal(values[k], &f) == nil {
					s.setMetric(g, int(s.metrics.id(name)), f, 0)
				} else {
					s.setMetric(g, int(s.metrics.id(name)), math.NaN(), s.raw(values[k]))
				}
			}
		}
	}
}

// cell writes run g's value of a parameter (params) or metric column as
// JSON: null for none.
func (s *store) cell(b *bytes.Buffer, g int32, col int, params bool) {
	if params {
		if v := s.param(g, col); v != nil {
			b.Write(v)
			return
		}
		b.WriteString("null")
		return
	}
	switch num, ok, text := s.metricValue(g, col); {
	case ok:
		b.WriteString(strconv.FormatFloat(num, 'g', -1, 64))
	case text != nil:
		b.Write(text)
	default:
		b.WriteString("null")
	}
}

// row is one run of the sweep, in the order the page lists them: where
// it is in store.runs, and its id.
type row struct {
	g  int32
	id string
}

// rowsOf returns the runs of the sweep's ledgers (logs, from
// ledger.Stream) that are part of it, in input order, and reads what their
// records did not hold from their files.
func (s *store) rowsOf(logs []*ledger.Log) []row {
	var out []row
	for _, log := range logs {
		f, ok := s.byName[filepath.Base(log.Name)]
		if !ok {
			continue
		}
		kindTasks := log.Header().Sweep != nil && log.Header().Sweep.Kind == "tasks"
		fr := s.files[f]
		for i := range log.Len() {
			if i >= len(fr.runs) {
				break
			}
			lr := log.At(i)
			if lr.Retired {
				continue
			}
			g := fr.runs[i]
			s.fill(g, kindTasks)
			r := s.runs.at(int(g))
			r.state, r.tries = stateCode(lr.State), int32(lr.Attempts)
			out = append(out, row{g: g, id: lr.ID})
		}
	}
	slices.SortStableFunc(out, func(a, b row) int {
		return cmp.Compare(s.runs.at(int(a.g)).index, s.runs.at(int(b.g)).index)
	})
	for i, r := range out {
		s.runs.at(int(r.g)).pos = int32(i)
	}
	return out
}

// attemptsOf returns the attempts of the rows' runs, each with an end: an
// attempt its session left unfinished ended with that session, or runs on
// while its run runs (its nodepack is live).
func (s *store) attemptsOf(now int64) []int {
	running, interrupted := uint8(s.reasons.id("running")), uint8(s.reasons.id("interrupted"))
	var out []int
	for k := range s.att.len() {
		a := s.att.at(k)
		r := s.runs.at(int(a.run))
		if r.pos < 0 {
			continue // another sweep's, or a run its sweep left
		}
		out = append(out, k)
		if a.ended {
			continue
		}
		switch {
		case s.sessionLive[a.session] && states[r.state] == ledger.StateRunning:
			a.state, a.end = running, now
			s.node.Sessions[a.session][1] = now // it runs on
		case s.sessionEnd[a.session] != 0:
			a.state, a.end = interrupted, s.sessionEnd[a.session]
		default:
			// Its nodepack was killed: it ended by the session's last record.
			a.state, a.end = interrupted, s.node.Sessions[a.session][1]
		}
	}
	return out
}

// reasonName is how an attempt is drawn and counted: its failure class
// when it failed, else its state.
func (s *store) reasonName(a *attempt) string {
	state, class := s.reasons.text(uint32(a.state)), s.reasons.text(uint32(a.class))
	switch {
	case state == string(run.OK):
		return "succeeded"
	case class != "" && state != "interrupted":
		return class
	case state == "":
		return "failed"
	}
	return state
}
