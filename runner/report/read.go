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

// chunks holds bytes in chunks of chunkBytes, so that they are never
// copied to grow: a text is at an offset in all of them, never across
// two chunks.
type chunks struct {
	list [][]byte
	n    int // bytes held
}

const chunkBytes = 1 << 20

// add keeps b and returns where it is.
func (c *chunks) add(b []byte) uint32 {
	last := len(c.list) - 1
	if last < 0 || len(c.list[last])+len(b) > cap(c.list[last]) {
		c.list = append(c.list, make([]byte, 0, max(chunkBytes, len(b))))
		last++
	}
	at := uint32(last)<<24 | uint32(len(c.list[last]))
	c.list[last] = append(c.list[last], b...)
	c.n += len(b)
	return at
}

// at returns the n bytes kept at.
func (c *chunks) at(at, n uint32) []byte {
	chunk, off := at>>24, at&(1<<24-1)
	return c.list[chunk][off : off+n]
}

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
	energyWh   float32 // its share of its GPUs' energy; 0 none counted
	gpus, cpus uint32  // texts
	class      uint32  // text
	signal     uint32  // text
	exit       int32
	pos        int32 // its row on the page; -1 not part of the sweep
	tries      int32
	// place is where it is among its ledger's runs (ledger.Log.At);
	// hasCurves says its last finished record has curves, which are in
	// store.curves (curveAt, curveLen) while the store keeps them
	// (curveBudget), else read again from the ledger for the best runs.
	place             int32
	curveAt, curveLen uint32
	hasCurves         bool
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
var states = []ledger.State{ledger.StatePending, ledger.StateRunning, ledger.StateSucceeded, ledger.StateFailed, ledger.StateInterrupted, ledger.StatePruned, ledger.StatePaused}

func stateCode(st ledger.State) uint8 { return uint8(max(slices.Index(states, st), 0)) }

// attempt is one attempt as the fold tells it (ledger.Log.Attempts),
// with its run and session numbered across the sweep's ledgers.
type attempt struct {
	*ledger.Attempt
	run     int32  // in store.runs
	session int32  // in nodeInfo.Sessions
	GPUs    string // the UUIDs of its GPUs, comma-separated
}

// attRef is where an attempt is: its ledger (in store.ledgers) and its
// place among that ledger's attempts.
type attRef struct {
	file uint16
	k    int32
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

// priorSeen is what the ledgers say the prune prior did.
type priorSeen struct {
	dirs    []string
	stopped int
	dropped []string
}

// fileRuns are one ledger's runs: where each is in store.runs, at the
// place of the run among its ledger's (ledger.Log.At).
type fileRuns struct {
	name string
	runs []int32
}

// store is the report's projection of a sweep's ledgers, as the fold
// (ledger.ReadDir) reads them: each run's last records, its attempts, the
// sessions and the pruning policy's judgements.
type store struct {
	opts    Options
	dir     string
	ledgers []*ledger.Log // the sweep's
	files   []*fileRuns
	node    nodeInfo
	texts   dict
	raws    [][]byte // parameter values and metric texts, as JSON
	rawIDs  map[string]uint32
	params  dict // parameter names, in the order first seen
	metrics dict // metric names
	runs    chunked[runData]
	// firstSession is, per ledger, where its sessions are in
	// node.Sessions.
	firstSession []int32
	// paramCols holds, per parameter, each run's value (a raw; 0 none);
	// metricCols per metric each run's number (NaN none), or in
	// metricTexts a raw.
	paramCols   [][]uint32
	metricCols  [][]float64
	metricTexts map[[2]uint32]uint32 // (run, metric) → raw
	originTexts map[int32]string     // run → an origin not of the file:line form
	cpuCounts   map[uint32]int16     // CPU list text → how many
	// curves holds the runs' curves, while they fit curveBudget; past it
	// the store keeps no more (curvesDropped), and the page has the best
	// runs' curves only.
	curves        chunks
	curvesDropped bool
	// rungs are the pruning policy's judgements, rungMetric its metric.
	rungs      []rungMark
	rungMetric string
	// prior is what the prune prior did (--prune-prior): the earlier
	// sweeps the ledgers' headers name, the runs it helped stop and why
	// it was dropped.
	prior      priorSeen
	densities  []ledger.Density // the density rule's decisions, every ledger's
	withCurves int              // runs whose curves were seen
	logs       []byte           // the runs' directories (runData.logsAt)
}

func newStore(dir string, opts Options) *store {
	return &store{dir: dir, opts: opts, rawIDs: map[string]uint32{}, raws: [][]byte{nil},
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

// read takes the sweep's ledgers into the store: each run, its last
// records, its attempts, the sessions and the judgements.
func (s *store) read(logs []*ledger.Log) error {
	s.ledgers = logs
	for f, log := range logs {
		fr := &fileRuns{name: filepath.Base(log.Name), runs: make([]int32, log.Len())}
		s.files = append(s.files, fr)
		for i := range log.Len() {
			g := s.runs.add()
			*s.runs.at(g) = runData{pos: -1, file: uint8(f), place: int32(i)}
			fr.runs[i] = int32(g)
		}
		s.firstSession = append(s.firstSession, int32(len(s.node.Sessions)))
		for _, sp := range log.Spans() {
			s.node.Sessions = append(s.node.Sessions, [2]int64{sp.Start, sp.Last})
		}
		s.densities = append(s.densities, log.Densities...)
		for _, d := range log.Header().PrunePrior {
			if !slices.Contains(s.prior.dirs, d.Dir) {
				s.prior.dirs = append(s.prior.dirs, d.Dir)
			}
		}
		for _, j := range log.Judgements() {
			if i, ok := log.Find(j.Run); ok {
				s.rungs = append(s.rungs, rungMark{run: fr.runs[i], rung: int32(j.Rung), step: j.Step, value: j.Value, pruned: j.Stop})
				s.rungMetric = j.Metric
			}
		}
		stopped, dropped, _ := log.PriorDid()
		s.prior.stopped += stopped
		s.prior.dropped = append(s.prior.dropped, dropped...)
		err := log.LastAll(func(i int, st *ledger.Started, fin *ledger.Finished) error {
			g := fr.runs[i]
			if st != nil && fin != nil && fin.Attempt < st.Attempt {
				// An attempt runs after the one that finished last.
				s.finished(g, fin)
				s.started(g, st)
			} else {
				s.started(g, st)
				s.finished(g, fin)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// started takes what the page shows of a run's last started record.
func (s *store) started(g int32, rec *ledger.Started) {
	if rec == nil {
		return
	}
	r := s.runs.at(int(g))
	r.index, r.start, r.end = int32(rec.Index), rec.Time.UnixMilli(), 0
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
}

// finished takes what the page shows of a run's last finished record.
func (s *store) finished(g int32, rec *ledger.Finished) {
	if rec == nil {
		return
	}
	r := s.runs.at(int(g))
	if r.originFile == 0 && s.originTexts[g] == "" {
		r.index = int32(rec.Index)
		s.setOrigin(g, r, rec.Origin)
	}
	r.end, r.seconds, r.class, r.signal = rec.Time.UnixMilli(), rec.Seconds, s.texts.id(string(rec.Class)), s.texts.id(rec.Signal)
	if rec.ExitCode != nil {
		r.exit, r.hasExit = int32(*rec.ExitCode), true
	}
	r.rss, r.gpuMem, r.energyWh = rec.PeakRSS(), rec.PeakGPUMemory(), float32(rec.EnergyJoules()/3600)
	if r.logsLen == 0 && rec.Stdout != "" {
		s.setLogs(r, rec.Stdout)
	}
	if rec.Metrics == nil {
		return
	}
	s.clearMetrics(g)
	s.values(g, rec.Metrics, false)
	r.metricsRead = true
	if rec.Curves == nil {
		return
	}
	r.hasCurves = true
	s.withCurves++
	switch {
	case s.curvesDropped:
	case s.curves.n+len(rec.Curves) > curveBudget, s.withCurves*hoverCurvePoints > hoverCurveBudget:
		// The page will have the best runs' curves only.
		s.curves, s.curvesDropped = chunks{}, true
	default:
		r.curveAt, r.curveLen = s.curves.add(rec.Curves), uint32(len(rec.Curves))
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
	g int32
}

// id is the row's run's id.
func (s *store) id(r row) string {
	d := s.runs.at(int(r.g))
	return s.ledgers[d.file].ID(int(d.place))
}

// rowsOf returns the runs of the sweep that are part of it (not retired),
// in input order, and reads what their records did not hold from their
// files.
func (s *store) rowsOf() []row {
	var out []row
	for f, log := range s.ledgers {
		kindTasks := log.Header().Sweep != nil && log.Header().Sweep.Kind == "tasks"
		fr := s.files[f]
		for i := range log.Len() {
			lr := log.At(i)
			if lr.Retired {
				continue
			}
			g := fr.runs[i]
			s.fill(g, kindTasks)
			r := s.runs.at(int(g))
			r.state, r.tries = stateCode(lr.State), int32(lr.Attempts)
			out = append(out, row{g: g})
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

// attempt returns the attempt at ref.
func (s *store) attempt(ref attRef) attempt {
	a := &s.ledgers[ref.file].Attempts()[ref.k]
	return attempt{Attempt: a, run: s.files[ref.file].runs[a.Run], session: s.firstSession[ref.file] + a.Session, GPUs: s.ledgers[ref.file].GPUs(a)}
}

// attemptsOf returns the attempts of the rows' runs, each with an end: an
// attempt still running ends now, and so does its session.
func (s *store) attemptsOf(now int64) []attRef {
	var out []attRef
	for f, log := range s.ledgers {
		for k := range log.Attempts() {
			ref := attRef{uint16(f), int32(k)}
			a := s.attempt(ref)
			if s.runs.at(int(a.run)).pos < 0 {
				continue // a run its sweep left
			}
			out = append(out, ref)
			if a.End == 0 {
				a.End = now
				s.node.Sessions[a.session][1] = now // it runs on
			}
		}
	}
	return out
}

// reasonName is how an attempt is drawn and counted: its failure class
// when it failed, else its state.
func (s *store) reasonName(a attempt) string {
	state, class := a.Ending(), string(a.Class())
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
