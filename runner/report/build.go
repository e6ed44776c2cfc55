package report

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/nodepack/nodepack/runner/ledger"
	"github.com/nodepack/nodepack/runner/metrics"
	"github.com/nodepack/nodepack/runner/results"
	"github.com/nodepack/nodepack/runner/run"
)

// build makes the page's document from the sweep's rows and attempts: all
// but the table's rows, the attempts' bars and the curves, which page.write
// streams. shards is how many ledgers the sweep has.
func (s *store) build(rows []row, attempts []attRef, shards int) *document {
	node := s.node
	doc := &document{Host: node.Host, Made: s.opts.Now.UTC(), LogBase: s.opts.LogBase, Numbers: map[string]any{}}
	var t0, t1 int64
	for _, k := range attempts {
		a := s.attempt(k)
		if t0 == 0 || a.Start < t0 {
			t0 = a.Start
		}
		t1 = max(t1, a.End)
	}
	doc.T0, doc.Span = t0, max(t1-t0, 1)
	doc.Util = utilization(s, attempts, node, max(shards, 1), t0)
	// Headline numbers.
	runStates := map[string]int{}
	for _, r := range rows {
		runStates[s.stateName(s.runs.at(int(r.g)))]++
	}
	counts := map[string]int{}
	var lost int64
	for _, k := range attempts {
		a := s.attempt(k)
		counts[s.reasonName(a)]++
		if e := run.Reason(a.Ending()); e != run.OK && e != run.Interrupted && !e.JudgedOut() && e != "running" {
			lost += a.End - a.Start
		}
	}
	doc.Numbers["runs"] = len(rows)
	doc.Numbers["attempts"] = len(attempts)
	doc.Numbers["makespan_s"] = float64(t1-t0) / 1000
	doc.Numbers["lost_to_failures_s"] = float64(lost) / 1000
	var stops ledger.Lost // the steps stops lost since the runs' last checkpoints
	for _, log := range s.ledgers {
		stops.Attempts += log.Lost.Attempts
		stops.Steps += log.Lost.Steps
		stops.GPUSeconds += log.Lost.GPUSeconds
	}
	if stops.Attempts > 0 {
		doc.Numbers["lost_to_stops"] = map[string]any{"attempts": stops.Attempts, "steps": stops.Steps, "gpu_s": stops.GPUSeconds}
	}
	doc.Numbers["runs_by_state"] = runStates
	if p := s.prior; len(p.dirs) > 0 || p.stopped > 0 || len(p.dropped) > 0 {
		doc.Numbers["prune_prior"] = map[string]any{"dirs": nonNil(p.dirs), "stopped": p.stopped, "dropped": nonNil(p.dropped)}
	}
	doc.Numbers["attempts_by_outcome"] = counts
	gpuBusy, cpuBusy := busy(doc.Util, doc.Span)
	if len(node.GPUs) > 0 {
		doc.Numbers["gpus_busy_percent"] = gpuBusy * 100
	}
	doc.Numbers["cpus_busy_percent"] = cpuBusy * 100
	doc.Numbers["gpus"], doc.Numbers["cpus"] = len(node.GPUs), node.CPUs
	doc.Numbers["slowest"], doc.Numbers["fastest"] = s.extremes(rows)
	doc.Numbers["gaps"] = gaps(doc.Util, doc.Span, node, s, attempts, t0, len(node.GPUs) > 0)
	for _, m := range s.rungs {
		if s.runs.at(int(m.run)).pos < 0 {
			continue
		}
		var v any
		if !math.IsNaN(m.value) && !math.IsInf(m.value, 0) {
			v = m.value
		}
		doc.Rungs = append(doc.Rungs, [4]any{m.step, s.runs.at(int(m.run)).pos, v, m.pruned})
	}
	doc.RungMetric = s.rungMetric
	for _, d := range s.densities {
		dd := densityDoc{T: d.Time.UnixMilli() - t0, Shape: d.Shape, From: d.From, To: d.To, Final: d.Final, Why: d.Why}
		for _, m := range d.Measured {
			dd.Measured = append(dd.Measured, [2]float64{float64(m.Runs), m.StepsPerSec})
		}
		doc.Densities = append(doc.Densities, dd)
	}
	doc.Cols = s.columns()
	doc.Params, doc.Metrics = len(s.params.texts)-min(len(s.params.texts), 1), len(s.metrics.texts)-min(len(s.metrics.texts), 1)
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

// fixedColumns are the table's columns after the parameters and metrics.
var fixedColumns = []string{"state", "class", "attempts", "duration_s", "start", "end", "exit_code", "signal", "gpus", "cpus", "peak_rss_bytes", "peak_gpu_mem_bytes", "energy_wh", "id", "logs"}

// columns are the table's columns for people: where the run comes from,
// its parameters and metrics, how it went and what it used, its id and its
// logs; parameters and metrics named as the results table names them.
func (s *store) columns() []string {
	cols := []string{"origin"}
	for _, p := range s.params.texts[min(len(s.params.texts), 1):] {
		cols = append(cols, results.ColumnName("param", p))
	}
	for _, m := range s.metrics.texts[min(len(s.metrics.texts), 1):] {
		cols = append(cols, results.ColumnName("metric", m))
	}
	return append(cols, fixedColumns...)
}

// extremes lists the slowest and the fastest succeeded runs, five each:
// origin and seconds.
func (s *store) extremes(rows []row) (slowest, fastest [][2]any) {
	const n = 5
	sec := func(r row) float64 { return s.runs.at(int(r.g)).seconds }
	// slower reports whether a comes before b among the slowest: longer,
	// then by id.
	slower := func(a, b row) bool {
		if sa, sb := sec(a), sec(b); sa != sb {
			return sa > sb
		}
		return s.id(a) < s.id(b)
	}
	var slow, fast []row // the n slowest, slowest first; the n fastest, fastest first
	keep := func(list []row, r row, before func(a, b row) bool) []row {
		if len(list) == n && !before(r, list[n-1]) {
			return list
		}
		at := len(list)
		for at > 0 && before(r, list[at-1]) {
			at--
		}
		list = slices.Insert(list, at, r)
		return list[:min(len(list), n)]
	}
	for _, r := range rows {
		if states[s.runs.at(int(r.g)).state] != ledger.StateSucceeded {
			continue
		}
		slow = keep(slow, r, slower)
		fast = keep(fast, r, func(a, b row) bool { return slower(b, a) })
	}
	name := func(r row) string {
		if o := s.origin(r.g); o != "" {
			return filepath.Base(o)
		}
		return s.id(r)
	}
	for _, r := range slow {
		slowest = append(slowest, [2]any{name(r), results.RoundMillis(sec(r))})
	}
	for _, r := range fast {
		fastest = append(fastest, [2]any{name(r), results.RoundMillis(sec(r))})
	}
	return slowest, fastest
}

// page writes a report: its document, then the big parts streamed.
type page struct {
	store    *store
	doc      *document
	rows     []row
	attempts []attRef
	best     []int // indexes into rows
}

// write writes the HTML page with the data in it: the document's JSON,
// with the attempts, the table's rows and the curves written one by one
// rather than held.
func (p *page) write(w io.Writer, title string) error {
	s, doc := p.store, p.doc
	doc.Best = p.best
	for _, i := range p.best {
		doc.BestCurves = append(doc.BestCurves, bestCurve(s.dir, s.logsOf(s.runs.at(int(p.rows[i].g))), doc.Rank.Metric, s.opts.Metrics))
	}
	curves, all := p.hoverCurves()
	doc.AllCurves = all
	// Lanes: the node's GPUs in its order, then the CPU lanes; the shards
	// of a sweep ran on nodes of their own, each with lanes of its own.
	laneOf := map[string]int{}
	lane := func(name string) int {
		if i, ok := laneOf[name]; ok {
			return i
		}
		laneOf[name] = len(doc.Lanes)
		doc.Lanes = append(doc.Lanes, name)
		return laneOf[name]
	}
	shards := len(s.files)
	if shards < 2 {
		for _, g := range s.node.GPUs {
			lane("GPU " + g)
		}
	}
	shardOf := func(a attempt) string {
		if shards < 2 {
			return ""
		}
		name := strings.TrimSuffix(strings.TrimPrefix(s.files[s.runs.at(int(a.run)).file].name, "ledger-"), ".jsonl")
		return "shard " + strings.Replace(name, "-of-", "/", 1) + " "
	}
	cpuLane := func(a attempt) string { return fmt.Sprintf("%sCPU lane %d", shardOf(a), a.Lane) }
	cpuLanes := map[string]bool{}
	for _, k := range p.attempts {
		if a := s.attempt(k); a.GPUs == "" {
			cpuLanes[cpuLane(a)] = true
		}
	}
	for _, name := range slices.SortedFunc(maps.Keys(cpuLanes), compareNatural) {
		lane(name)
	}
	lanesOf := func(a attempt) []int {
		if a.GPUs == "" {
			return []int{lane(cpuLane(a))}
		}
		var lanes []int
		for _, g := range strings.Split(a.GPUs, ",") {
			lanes = append(lanes, lane(shardOf(a)+"GPU "+g))
		}
		return lanes
	}
	// The attempts, as the page draws them: runs sharing a GPU overlap in
	// time, so each lane has as many rows as it needs, and an attempt
	// takes the first row free at its start. A first pass finds the lanes,
	// their rows and the states; a second, the same again, writes them.
	var rowEnds map[int][]int64
	place := func(l int, a attempt) int {
		ends := rowEnds[l]
		for i, e := range ends {
			if e <= a.Start {
				ends[i] = a.End
				return i
			}
		}
		rowEnds[l] = append(ends, a.End)
		return len(ends)
	}
	stateCode := map[string]int{}
	codeOf := func(a attempt) int {
		st := s.reasonName(a)
		code, ok := stateCode[st]
		if !ok {
			code = len(doc.States)
			stateCode[st] = code
			doc.States = append(doc.States, st)
		}
		return code
	}
	rowEnds = map[int][]int64{}
	for _, k := range p.attempts {
		a := s.attempt(k)
		codeOf(a)
		for _, l := range lanesOf(a) {
			place(l, a)
		}
	}
	for l := range doc.Lanes {
		doc.LaneRows = append(doc.LaneRows, max(len(rowEnds[l]), 1))
	}
	small, err := json.Marshal(doc) // escapes <, > and &: safe inside <script>
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	head, tail, _ := strings.Cut(pageHTML, "/*DATA*/")
	bw.WriteString(strings.ReplaceAll(head, "TITLE", html.EscapeString(title)))
	bw.Write(small[:len(small)-1])
	bw.WriteString(`,"att":[`)
	rowEnds = map[int][]int64{}
	var line []byte
	for n, k := range p.attempts {
		a := s.attempt(k)
		lanes := lanesOf(a)
		line = line[:0]
		if n > 0 {
			line = append(line, ',')
		}
		line = fmt.Appendf(line, "[%d,%d,%d,%d,%d,%d,%d", lanes[0], place(lanes[0], a), a.Start-doc.T0, a.End-doc.T0, codeOf(a), s.runs.at(int(a.run)).pos, a.N)
		for _, l := range lanes[1:] {
			line = fmt.Appendf(line, ",%d,%d", l, place(l, a))
		}
		bw.Write(append(line, ']'))
	}
	bw.WriteString(`],"rows":[`)
	var b jsonBuf
	for i, r := range p.rows {
		if i > 0 {
			bw.WriteByte(',')
		}
		b.Reset()
		p.writeRow(&b, r)
		bw.Write(b.Bytes())
	}
	bw.WriteString(`],"curves":[`)
	for i, c := range curves {
		if i > 0 {
			bw.WriteByte(',')
		}
		if c == nil {
			bw.WriteString("null")
		} else {
			bw.Write(c)
		}
	}
	bw.WriteString("]}")
	bw.WriteString(tail)
	return bw.Flush()
}

// stateName is how the page names a run's state: a failed run by its
// class.
func (s *store) stateName(d *runData) string {
	if states[d.state] == ledger.StateFailed && d.class != 0 {
		return "failed (" + s.texts.text(d.class) + ")"
	}
	return string(states[d.state])
}

// writeRow writes one run's cells, in the order of columns, as JSON.
func (p *page) writeRow(b *jsonBuf, r row) {
	s, doc := p.store, p.doc
	d := s.runs.at(int(r.g))
	b.WriteByte('[')
	b.text(s.origin(r.g))
	for col := 1; col <= doc.Params; col++ {
		b.WriteByte(',')
		s.cell(&b.Buffer, r.g, col, true)
	}
	for col := 1; col <= doc.Metrics; col++ {
		b.WriteByte(',')
		s.cell(&b.Buffer, r.g, col, false)
	}
	b.WriteByte(',')
	b.text(s.stateName(d))
	b.WriteByte(',')
	b.text(s.texts.text(d.class))
	fmt.Fprintf(b, ",%d,", d.tries)
	if d.end != 0 {
		b.WriteString(strconv.FormatFloat(results.RoundMillis(d.seconds), 'g', -1, 64))
	} else {
		b.WriteString("null")
	}
	for _, t := range []int64{d.start, d.end} {
		if t == 0 {
			b.WriteString(",null")
		} else {
			fmt.Fprintf(b, ",%d", t-doc.T0)
		}
	}
	if d.hasExit && d.end != 0 {
		fmt.Fprintf(b, ",%d,", d.exit)
	} else {
		b.WriteString(",null,")
	}
	b.text(s.texts.text(d.signal))
	b.WriteByte(',')
	b.text(s.texts.text(d.gpus))
	b.WriteByte(',')
	b.text(s.texts.text(d.cpus))
	for _, n := range []uint64{d.rss, d.gpuMem} {
		if n == 0 {
			b.WriteString(",null")
		} else {
			fmt.Fprintf(b, ",%d", n)
		}
	}
	if d.energyWh > 0 {
		b.WriteByte(',')
		b.WriteString(strconv.FormatFloat(float64(d.energyWh), 'g', 4, 32))
	} else {
		b.WriteString(",null")
	}
	b.WriteByte(',')
	b.text(s.id(r))
	b.WriteByte(',')
	b.text(s.logsOf(d))
	b.WriteByte(']')
}

// hoverCurves returns, per row, its record's curve of the ranked metric
// for the page to draw on a hover (nil for a row without one), and
// whether every row has its own: past hoverCurveBudget points, or when
// the store kept no more curves, only the best rows do (read from the
// ledgers again).
func (p *page) hoverCurves() ([]json.RawMessage, bool) {
	s, metric := p.store, p.doc.Rank.Metric
	out := make([]json.RawMessage, len(p.rows))
	if metric == "" {
		return out, true
	}
	n := 0
	for _, r := range p.rows {
		if s.runs.at(int(r.g)).hasCurves {
			n++
		}
	}
	if n*hoverCurvePoints <= hoverCurveBudget && !s.curvesDropped {
		for i, r := range p.rows {
			if d := s.runs.at(int(r.g)); d.curveLen > 0 {
				out[i] = metrics.Field(s.curves.at(d.curveAt, d.curveLen), metric)
			}
		}
		return out, true
	}
	// Read the best runs' last records again, one pass per ledger.
	byFile := map[uint8][]int{}
	rowOf := map[[2]int32]int{} // (file, place) → row
	for _, i := range p.best {
		if d := s.runs.at(int(p.rows[i].g)); d.hasCurves {
			byFile[d.file] = append(byFile[d.file], int(d.place))
			rowOf[[2]int32{int32(d.file), d.place}] = i
		}
	}
	for f, places := range byFile {
		err := s.ledgers[f].Last(places, func(place int, _ *ledger.Started, fin *ledger.Finished) error {
			if fin != nil {
				out[rowOf[[2]int32{int32(f), int32(place)}]] = metrics.Field(fin.Curves, metric)
			}
			return nil
		})
		if err != nil {
			return out, false
		}
	}
	return out, false
}

// bestCurve reads a run's whole curve of metric from its files: the
// metrics file, and its stdout with patterns; nil for none.
func bestCurve(dir, logs string, metric string, patterns []metrics.Pattern) [][2]float64 {
	if logs == "" || metric == "" {
		return nil
	}
	sum := metrics.Summary{Limit: bestCurvePoints}
	reader := metrics.Reader{Root: dir, Path: filepath.Join(logs, metrics.FileName)}
	reader.Read(true, sum.Add) // a run's file it cannot read leaves its curve out
	if len(patterns) > 0 {
		lr := metrics.Reader{Root: dir, Path: filepath.Join(logs, "stdout.log"), Patterns: patterns}
		lr.Read(true, sum.Add)
	}
	if m := sum.Get(metric); m != nil {
		return m.Curve(bestCurvePoints)
	}
	return nil
}

// jsonBuf builds JSON text.
type jsonBuf struct{ bytes.Buffer }

// text writes s as a JSON string as json.Marshal does (<, > and &
// escaped, safe inside <script>); null for "".
func (b *jsonBuf) text(s string) {
	if s == "" {
		b.WriteString("null")
		return
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			b.Write(q)
			return
		}
	}
	b.WriteByte('"')
	b.WriteString(s)
	b.WriteByte('"')
}

// nonNil is xs, or an empty list for none (a JSON list, not null).
func nonNil(xs []string) []string {
	if xs == nil {
		return []string{}
	}
	return xs
}
