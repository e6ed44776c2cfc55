// Package results turns a sweep's output directory into a table of its
// runs, one row each: where the run came from, its parameters, how it
// ended, what it used, and the metrics it reported. It reads the ledgers,
// each run's params.json and metrics.json, and, for the metrics asked for
// by pattern, each run's standard output. It only reads, so it works while
// the sweep runs and from any host that sees the directory.
package results

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nodepack/nodepack/runner/ledger"
	"github.com/nodepack/nodepack/runner/metrics"
)

// Row is one run.
type Row struct {
	ID       string
	Index    int // its place in the source, from 0
	Origin   string
	Params   map[string]json.RawMessage // from params.json; nil for a task-file line
	State    ledger.State
	Class    string // why its last attempt failed
	Attempts int
	// Start and End are its last attempt's; End is zero while it runs.
	Start, End time.Time
	Seconds    float64 // the last attempt's duration
	ExitCode   *int
	Signal     string
	GPUs       []string // the last attempt's, by UUID
	CPUs       string
	PeakRSS    uint64  // the largest of the sampled tree and the kernel's peak, in bytes
	PeakGPUMem uint64  // its processes' peak GPU memory, summed over its GPUs
	EnergyWh   float64 // its share of its GPUs' energy, in watt-hours; 0 where no GPU counts it
	Metrics    map[string]json.RawMessage
	// Curves are the per-step metrics' curves as its last attempt's record
	// has them, {"loss": [[step, value], …]}, a few points each; nil none.
	Curves json.RawMessage
	Stdout string // log paths, relative to the output directory
	Stderr string
	// rawParams and rawMetrics are Params and Metrics as the records hold
	// them, for a row read to be written at once (rowOf's raw): Cells
	// reads them where Params and Metrics are nil.
	rawParams, rawMetrics json.RawMessage
}

// Param returns the run's parameter key as a Go value, as encoding/json
// decodes it: a string, a float64, a bool, nil, a []any or a
// map[string]any; ok is false when the run has no such parameter.
func (r Row) Param(key string) (v any, ok bool) {
	raw, ok := r.Params[key]
	if !ok || json.Unmarshal(raw, &v) != nil {
		return nil, false
	}
	return v, true
}

// Metric returns the run's last value of metric name as a number; ok is
// false when it reported none, or a value that is not a number (text, a
// list). A non-finite value, recorded as "nan", "inf" or "-inf", comes
// back as such.
func (r Row) Metric(name string) (float64, bool) {
	raw, ok := r.Metrics[name]
	if !ok {
		return 0, false
	}
	var f float64
	if json.Unmarshal(raw, &f) == nil {
		return f, true
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return 0, false
	}
	if f, ok := metrics.ParseNumber([]byte(s)); ok && (math.IsNaN(f) || math.IsInf(f, 0)) {
		return f, true
	}
	return 0, false // text, even text that reads as a number
}

// Table is the runs of one output directory, in input order (their index
// in the source; runs of one index in the order of their first record,
// ledgers in name order), and the parameter and metric names that occur,
// each list in the order first seen.
type Table struct {
	Params  []string
	Metrics []string
	Rows    []Row
	Files   []string // the base names of the sweep's ledgers, in name order

	paramAt, metricAt map[string]int // where each key's cell is, for rows read raw (see fill)
}

// Read reads the table of the sweep in dir: the runs its ledgers know
// (a run that never started has no row), without the runs its last
// sessions retired and without shard ledgers of another sweep; the runs a
// killed nodepack left running are interrupted, as in nodepack status.
// Patterns take metrics from each run's standard output as
// metrics.Pattern says, on top of what its records say.
func Read(dir string, patterns []metrics.Pattern) (*Table, error) {
	d, err := ledger.ReadDir(dir, ledger.ReadOptions{})
	if err != nil {
		return nil, err // it names the ledger and line
	}
	logs, err := d.Sweep()
	if err != nil {
		return nil, err
	}
	t := &Table{}
	seenParam, seenMetric := map[string]bool{}, map[string]bool{}
	for _, log := range logs {
		t.Files = append(t.Files, filepath.Base(log.Name))
		err := log.LastAll(func(i int, s *ledger.Started, fin *ledger.Finished) error {
			run := log.At(i)
			if run.Retired {
				return nil
			}
			row, paramOrder, metricOrder, err := rowOf(dir, run, s, fin, patterns, false)
			if err != nil {
				return err
			}
			for _, k := range sortedKeys(row.Params, paramOrder) {
				if !seenParam[k] {
					seenParam[k] = true
					t.Params = append(t.Params, k)
				}
			}
			for _, k := range sortedKeys(row.Metrics, metricOrder) {
				if !seenMetric[k] {
					seenMetric[k] = true
					t.Metrics = append(t.Metrics, k)
				}
			}
			t.Rows = append(t.Rows, row)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	slices.SortStableFunc(t.Rows, func(a, b Row) int { return cmp.Compare(a.Index, b.Index) })
	return t, nil
}

// Sort orders the rows by the values of column (a metric, a parameter or
// a column of Columns such as duration_s), lowest first or, with desc,
// highest first. Numbers sort as numbers and come first; texts follow in
// text order; rows without a value (or "nan") come last; ties keep their
// order. A column the table does not have is an error.
func (t *Table) Sort(column string, desc bool) error {
	i := slices.Index(t.Columns(), column)
	if i < 0 {
		return fmt.Errorf("no column %q: the table has %s", column, strings.Join(t.Columns(), ", "))
	}
	keys := make(map[string]sortKey, len(t.Rows))
	for _, r := range t.Rows {
		keys[r.ID] = keyOf(t.Cells(r)[i])
	}
	slices.SortStableFunc(t.Rows, func(a, b Row) int { return compareKeys(keys[a.ID], keys[b.ID], desc) })
	return nil
}

// PrunedWith counts the pruned runs and the paused ones that have a value
// in column: a judged-out run's metric is what it was when the run was
// stopped, at its last rung, not at the end of a training, so a ranking
// that puts it beside finished runs should say so.
func (t *Table) PrunedWith(column string) (pruned, paused int) {
	i := slices.Index(t.Columns(), column)
	if i < 0 {
		return 0, 0
	}
	for _, r := range t.Rows {
		if v := t.Cells(r)[i]; len(v) == 0 || string(v) == "null" {
			continue
		}
		switch r.State {
		case ledger.StatePruned:
			pruned++
		case ledger.StatePaused:
			paused++
		}
	}
	return pruned, paused
}

// PickMetric is the metric, of names in their order, that a reader most
// likely ranks the runs by, and why: a validation loss, else a loss, else
// the first; only a metric that numeric says some run has a number of.
// It returns "" when none has.
func PickMetric(names []string, numeric func(name string) bool) (name, why string) {
	for _, c := range []struct {
		want func(string) bool
		why  string
	}{
		{func(n string) bool {
			n = strings.ToLower(n)
			return strings.Contains(n, "val") && strings.Contains(n, "loss")
		}, "the validation loss the runs report"},
		{func(n string) bool { return strings.Contains(strings.ToLower(n), "loss") }, "the loss the runs report"},
		{func(string) bool { return true }, "the first metric the runs report"},
	} {
		for _, m := range names {
			if c.want(m) && numeric(m) {
				return m, c.why
			}
		}
	}
	return "", ""
}

// DefaultMetric is the table's metric PickMetric picks.
func (t *Table) DefaultMetric() string {
	numeric := map[string]bool{}
	for _, r := range t.Rows {
		for k, v := range r.Metrics {
			var f float64
			if !numeric[k] && json.Unmarshal(v, &f) == nil {
				numeric[k] = true
			}
		}
	}
	m, _ := PickMetric(t.Metrics, func(name string) bool { return numeric[name] })
	return m
}

// rowOf reads one run's row from its last records and its directory, and
// the order of the keys in its params (the sweep's order of parameters)
// and in its metrics (the order the run reported them in). The records of
// a ledger written since metrics went into them hold the run's params and
// metrics; for older ones, the run's params.json and metrics.json are
// read.
//
// With raw, a run whose records hold its parameters and metrics (and no
// patterns) keeps them as the records hold them (see Row.rawParams), for
// a writer that reads them once: no key orders are returned then.
func rowOf(dir string, run ledger.Run, st *ledger.Started, fin *ledger.Finished, patterns []metrics.Pattern, raw bool) (row Row, paramOrder, metricOrder []string, err error) {
	row = Row{ID: run.ID, State: run.State, Attempts: run.Attempts}
	var params, final json.RawMessage
	if st != nil {
		row.Index, row.Origin, row.Start, row.GPUs, row.CPUs = st.Index, st.Origin, st.Time, st.GPUs, st.CPUs
		row.Stdout, row.Stderr = st.Stdout, st.Stderr
		params = st.Params
	}
	if fin != nil && (st == nil || fin.Attempt >= st.Attempt) {
		row.Index, row.Origin = cmp.Or(row.Index, fin.Index), cmp.Or(row.Origin, fin.Origin)
		row.End, row.Seconds, row.ExitCode, row.Signal = fin.Time, fin.Seconds, fin.ExitCode, fin.Signal
		row.Class = string(fin.Class)
		row.PeakRSS, row.PeakGPUMem, row.EnergyWh = fin.PeakRSS(), fin.PeakGPUMemory(), fin.EnergyJoules()/3600
		row.Stdout, row.Stderr = cmp.Or(row.Stdout, fin.Stdout), cmp.Or(row.Stderr, fin.Stderr)
		final, row.Curves = fin.Metrics, fin.Curves
	}
	if raw && params != nil && final != nil && len(patterns) == 0 {
		row.rawParams, row.rawMetrics = params, final
		return row, nil, nil, nil
	}
	if params != nil {
		if row.Params, paramOrder, err = metrics.ParseObject(params); err != nil {
			return row, nil, nil, fmt.Errorf("results: run %s: params: %w", row.ID, err)
		}
	}
	if final != nil {
		if row.Metrics, metricOrder, err = metrics.ParseObject(final); err != nil {
			return row, nil, nil, fmt.Errorf("results: run %s: metrics: %w", row.ID, err)
		}
	}
	if row.Stdout == "" {
		return row, paramOrder, metricOrder, nil // no logs: nothing more to read
	}
	runDir := filepath.Dir(row.Stdout)
	// What a run left behind is read as untrusted: a file that cannot be
	// read (a link, a FIFO, a directory) is that run's metrics_error, as
	// the run's own record says it, not the whole table's.
	var fileErrs []string
	if params == nil && final == nil {
		// A ledger from before params and metrics went into its records,
		// or a run still running: its files say.
		var perr error
		if row.Params, paramOrder, perr = metrics.ReadObject(dir, filepath.Join(runDir, "params.json")); perr != nil {
			fileErrs = append(fileErrs, perr.Error())
		}
	}
	if final == nil {
		if row.Metrics, err = runMetrics(dir, runDir); err != nil {
			return row, nil, nil, err
		}
	}
	if len(patterns) > 0 {
		var s metrics.Summary
		r := metrics.Reader{Root: dir, Path: row.Stdout, Patterns: patterns}
		if rerr := r.Read(true, s.Add); rerr != nil {
			fileErrs = append(fileErrs, rerr.Error())
		}
		names, values := s.Final()
		for i, name := range names {
			if row.Metrics == nil {
				row.Metrics = map[string]json.RawMessage{}
			}
			row.Metrics[name] = values[i]
		}
	}
	if len(fileErrs) > 0 {
		if row.Metrics == nil {
			row.Metrics = map[string]json.RawMessage{}
		}
		var recorded string
		if json.Unmarshal(row.Metrics[metricsError], &recorded) == nil && recorded != "" {
			fileErrs = append([]string{recorded}, fileErrs...)
		}
		row.Metrics[metricsError], _ = json.Marshal(strings.Join(fileErrs, "; "))
	}
	return row, paramOrder, metricOrder, nil
}

// metricsError is the metric under which a run's metrics that could not
// be read are said (as metrics.Report says them in its record).
const metricsError = "metrics_error"

// runMetrics reads what a run without a finished record of its metrics
// reported so far: its metrics file's last values, metrics.json on top.
func runMetrics(dir, runDir string) (map[string]json.RawMessage, error) {
	final, _, _ := metrics.Report(dir, runDir, "", nil, 0)
	m, _, err := metrics.ParseObject(final)
	if len(m) == 0 {
		m = nil
	}
	return m, err
}

// sortedKeys is m's keys: those in order first, in that order, then the
// rest sorted.
func sortedKeys(m map[string]json.RawMessage, order []string) []string {
	var keys []string
	for _, k := range order {
		if _, ok := m[k]; ok && !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	var rest []string
	for k := range m {
		if !slices.Contains(keys, k) {
			rest = append(rest, k)
		}
	}
	slices.Sort(rest)
	return append(keys, rest...)
}

// roundEnergy rounds watt-hours to four significant digits, as a person
// reads them and the counter's resolution (a millijoule) warrants.
func roundEnergy(wh float64) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(wh, 'g', 4, 64), 64)
	return v
}

// RoundMillis rounds seconds to the millisecond, and to the float64 that
// prints so: 2.272, not 2.2720000000000002.
func RoundMillis(seconds float64) float64 { return math.Round(seconds*1000) / 1000 }

func quote(s string) json.RawMessage { return appendQuoted(nil, s) }

// appendQuoted appends s as a JSON string, as encoding/json writes it.
func appendQuoted(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // what it escapes, as it escapes it
			return append(b, q...)
		}
	}
	return append(append(append(b, '"'), s...), '"')
}

// number is v as encoding/json writes a float64.
func number(v float64) json.RawMessage { return appendNumber(nil, v) }

// appendNumber appends v as encoding/json writes a float64, without its
// reflection: the shortest form, as an exponent below 1e-6 and from 1e21
// on.
func appendNumber(b []byte, v float64) []byte {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		q, _ := json.Marshal(v) // its error, as json says it: no cell
		return append(b, q...)
	}
	abs, format := math.Abs(v), byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	start := len(b)
	b = strconv.AppendFloat(b, v, format, -1, 64)
	if format == 'e' {
		// 1e-07 as 1e-7, as encoding/json writes it.
		if n := len(b); n-start >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// fixed are the columns every table has, in order; the parameters come
// after origin and the metrics after energy_wh. A parameter or
// metric named like one of them gets a "param." or "metric." prefix.
var fixed = []string{"id", "origin", "state", "class", "attempts", "start", "end", "duration_s",
	"exit_code", "signal", "gpus", "cpus", "peak_rss_bytes", "peak_gpu_mem_bytes", "energy_wh", "stdout", "stderr"}

// ColumnName is the column of a parameter (kind "param") or a metric
// (kind "metric") named name: the name, or kind.name when a column of
// every table has that name.
func ColumnName(kind, name string) string {
	if slices.Contains(fixed, name) {
		return kind + "." + name
	}
	return name
}

// Columns returns the table's column names, in order.
func (t *Table) Columns() []string {
	cols := []string{"id", "origin"}
	for _, k := range t.Params {
		cols = append(cols, ColumnName("param", k))
	}
	cols = append(cols, fixed[2:len(fixed)-2]...)
	for _, k := range t.Metrics {
		cols = append(cols, ColumnName("metric", k))
	}
	return append(cols, "stdout", "stderr")
}

// Cells returns a row's values as JSON, one per column of Columns; nil
// where the row has no value.
func (t *Table) Cells(r Row) []json.RawMessage {
	var b []byte
	return t.appendCells(nil, &b, r)
}

// appendCells appends a row's cells (see Cells) to out, the JSON it makes
// written in *b: a writer of many rows reuses both.
func (t *Table) appendCells(out []json.RawMessage, b *[]byte, r Row) []json.RawMessage {
	// Each cell is the part of *b it was written in: *b may move as it
	// grows, and the cells before still see what they were.
	cell := func(add func([]byte) []byte) json.RawMessage {
		start := len(*b)
		*b = add(*b)
		return (*b)[start:len(*b):len(*b)]
	}
	str := func(s string) json.RawMessage {
		if s == "" {
			return nil
		}
		return cell(func(b []byte) []byte { return appendQuoted(b, s) })
	}
	num := func(v float64, ok bool) json.RawMessage {
		if !ok {
			return nil
		}
		return cell(func(b []byte) []byte { return appendNumber(b, v) })
	}
	when := func(tm time.Time) json.RawMessage {
		if tm.IsZero() {
			return nil
		}
		return cell(func(b []byte) []byte {
			return append(tm.UTC().AppendFormat(append(b, '"'), time.RFC3339Nano), '"') // digits, -, :, T, Z and .: nothing to escape
		})
	}
	out = append(out, str(r.ID), str(r.Origin))
	params := len(out)
	out = append(out, make([]json.RawMessage, len(t.Params))...)
	t.fill(out[params:], r.Params, r.rawParams, t.Params, &t.paramAt)
	var exit json.RawMessage
	if r.ExitCode != nil {
		exit = num(float64(*r.ExitCode), true)
	}
	gpus := ""
	if len(r.GPUs) > 0 {
		gpus = strings.Join(r.GPUs, ",")
	}
	out = append(out, str(string(r.State)), str(r.Class), num(float64(r.Attempts), true), when(r.Start), when(r.End),
		num(RoundMillis(r.Seconds), !r.End.IsZero()), exit, str(r.Signal), str(gpus), str(r.CPUs),
		num(float64(r.PeakRSS), r.PeakRSS > 0), num(float64(r.PeakGPUMem), r.PeakGPUMem > 0), num(roundEnergy(r.EnergyWh), r.EnergyWh > 0))
	metricsAt := len(out)
	out = append(out, make([]json.RawMessage, len(t.Metrics))...)
	t.fill(out[metricsAt:], r.Metrics, r.rawMetrics, t.Metrics, &t.metricAt)
	return append(out, str(r.Stdout), str(r.Stderr))
}

// fill puts a row's values of the keys into cells, one per key: from
// values, or where that is nil from the object raw (a run's record's, as
// it is: its last value of a repeated key, as ParseObject takes it).
// at is where each key goes, made on the first call.
func (t *Table) fill(cells []json.RawMessage, values map[string]json.RawMessage, raw json.RawMessage, keys []string, at *map[string]int) {
	if values != nil || raw == nil {
		for i, k := range keys {
			cells[i] = values[k]
		}
		return
	}
	if *at == nil {
		*at = make(map[string]int, len(keys))
		for i, k := range keys {
			(*at)[k] = i
		}
	}
	metrics.EachField(raw, func(k string, v json.RawMessage) {
		if i, ok := (*at)[k]; ok {
			cells[i] = v
		}
	})
}

// WriteCSV writes the table as CSV with a header line: numbers as JSON
// writes them, strings as they are, a missing value empty, a list or an
// object as its JSON text. A text cell, header cells included, that a
// spreadsheet would evaluate as a formula (one that starts with =, +, -,
// @, a tab or a carriage return and does not read as a number) gets a
// leading ' (OWASP's rule against CSV injection); WriteJSON stays exact.
func (t *Table) WriteCSV(w io.Writer) error { return t.write(w, false) }

// write writes the table's rows, as CSV or JSON.
func (t *Table) write(w io.Writer, asJSON bool) error {
	out := tableWriter(w, t, asJSON)
	for _, r := range t.Rows {
		out.row(r)
	}
	return out.end()
}

// csvText is a JSON value as a CSV cell: a number as it is, a text made
// inert.
func csvText(v json.RawMessage) string {
	if len(v) == 0 || string(v) == "null" {
		return ""
	}
	if v[0] == '"' {
		if n := len(v); n >= 2 && v[n-1] == '"' && bytes.IndexByte(v[1:n-1], '\\') < 0 && bytes.IndexByte(v[1:n-1], '"') < 0 && utf8.Valid(v[1:n-1]) {
			return inert(string(v[1 : n-1])) // nothing escaped: the text as it is
		}
		var s string
		if json.Unmarshal(v, &s) == nil {
			return inert(s)
		}
	}
	return string(v)
}

// inert keeps a spreadsheet from evaluating a text cell, as OWASP's rule
// for CSV injection says: a text that starts with =, +, -, @, a tab or a
// carriage return gets a leading ' (which spreadsheets show as text and
// hide). A text that reads as a number is left alone: -0.5 stays -0.5.
func inert(s string) string {
	if s == "" || !strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return s
	}
	if _, err := strconv.ParseFloat(s, 64); err == nil {
		return s
	}
	return "'" + s
}

// WriteJSON writes the table as a JSON array of flat objects, one per
// row, with every column (null where a row has no value): what pandas
// reads with pd.read_json.
func (t *Table) WriteJSON(w io.Writer) error { return t.write(w, true) }
