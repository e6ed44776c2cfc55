// Package results turns a sweep's output directory into a table of its
// runs, one row each: where the run came from, its parameters, how it
// ended, what it used, and the metrics it reported. It reads the ledgers,
// each run's params.json and metrics.json, and, for the metrics asked for
// by pattern, each run's standard output. It only reads, so it works while
// the sweep runs and from any host that sees the directory.
package results

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nodepack/nodepack/runner/ledger"
)

// MetricsFile is the file in its run directory ($NODEPACK_RUN_DIR) where a
// run may report its metrics: one flat JSON object, the last one written
// wins.
const MetricsFile = "metrics.json"

// Metric takes a metric from a run's standard output: the last match of
// Pattern, its first group when it has one.
type Metric struct {
	Name    string
	Pattern *regexp.Regexp
}

// ParseMetric reads NAME=REGEX.
func ParseMetric(s string) (Metric, error) {
	name, expr, ok := strings.Cut(s, "=")
	if !ok || name == "" || expr == "" {
		return Metric{}, fmt.Errorf("metric %q: want NAME=REGEX", s)
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return Metric{}, fmt.Errorf("metric %s: %w", name, err)
	}
	return Metric{Name: name, Pattern: re}, nil
}

// Row is one run.
type Row struct {
	ID       string
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
	PeakRSS    uint64 // the largest of the sampled tree and the kernel's peak, in bytes
	PeakGPUMem uint64 // its processes' peak GPU memory, summed over its GPUs
	Metrics    map[string]json.RawMessage
	Stdout     string // log paths, relative to the output directory
	Stderr     string
}

// Table is the runs of one output directory, in the order of their first
// record in each ledger, ledgers in name order, and the parameter and
// metric names that occur, each list in the order first seen.
type Table struct {
	Params  []string
	Metrics []string
	Rows    []Row
}

// Read reads the table of the sweep in dir: the runs its ledgers know
// (a run that never started has no row), without the runs its last
// sessions retired and without shard ledgers of another sweep.
func Read(dir string, metrics []Metric) (*Table, error) {
	files, err := ledger.Files(dir)
	if err != nil {
		return nil, fmt.Errorf("results: %w", err)
	}
	var logs []*ledger.Log
	newest := -1
	for _, f := range files {
		log, err := ledger.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("results: %w", err)
		}
		logs = append(logs, log)
		if len(log.Sessions) > 0 && (newest < 0 || log.Header().Time.After(logs[newest].Header().Time)) {
			newest = len(logs) - 1
		}
	}
	if newest < 0 {
		return nil, fmt.Errorf("results: %s: no ledger (ledger*.jsonl): not a nodepack output directory, or nothing started yet", dir)
	}
	sweepKey := keyOf(logs[newest].Header())
	t := &Table{}
	seenParam, seenMetric := map[string]bool{}, map[string]bool{}
	for _, log := range logs {
		if keyOf(log.Header()) != sweepKey {
			continue
		}
		for _, id := range log.Order {
			run := log.Runs[id]
			if run.Retired {
				continue
			}
			row, err := readRow(dir, run, metrics)
			if err != nil {
				return nil, err
			}
			for _, k := range sortedKeys(row.Params, paramOrder(dir, run)) {
				if !seenParam[k] {
					seenParam[k] = true
					t.Params = append(t.Params, k)
				}
			}
			for _, k := range sortedKeys(row.Metrics, nil) {
				if !seenMetric[k] {
					seenMetric[k] = true
					t.Metrics = append(t.Metrics, k)
				}
			}
			t.Rows = append(t.Rows, row)
		}
	}
	return t, nil
}

func keyOf(h ledger.Record) string {
	if h.Sweep == nil {
		return ""
	}
	return h.Sweep.Key()
}

// readRow reads one run's row from its records and its directory.
func readRow(dir string, run *ledger.Run, metrics []Metric) (Row, error) {
	row := Row{ID: run.ID, State: run.State, Attempts: run.Attempts}
	if s := run.Started; s != nil {
		row.Origin, row.Start, row.GPUs, row.CPUs = s.Origin, s.Time, s.GPUs, s.CPUs
		row.Stdout, row.Stderr = s.Stdout, s.Stderr
	}
	if f := run.Finished; f != nil && (run.Started == nil || f.Attempt >= run.Started.Attempt) {
		row.Origin = cmp.Or(row.Origin, f.Origin)
		row.End, row.Seconds, row.ExitCode, row.Signal = f.Time, f.Seconds, f.ExitCode, f.Signal
		row.Class = string(f.Class)
		row.PeakRSS = max(f.TreeRSSPeak, f.MaxRSS)
		for _, g := range f.GPUUsage {
			row.PeakGPUMem += g.ProcessPeakMemoryBytes
		}
		row.Stdout, row.Stderr = cmp.Or(row.Stdout, f.Stdout), cmp.Or(row.Stderr, f.Stderr)
	}
	if row.Stdout == "" {
		return row, nil // no logs: nothing more to read
	}
	runDir := filepath.Dir(row.Stdout)
	var err error
	if row.Params, err = readObject(dir, filepath.Join(runDir, "params.json")); err != nil {
		return row, err
	}
	if row.Metrics, err = readObject(dir, filepath.Join(runDir, MetricsFile)); err != nil {
		// A run writes its metrics itself: a broken file is its problem,
		// said in the table rather than stopping it.
		row.Metrics = map[string]json.RawMessage{"metrics_error": quote(err.Error())}
	}
	if len(metrics) > 0 {
		found, err := grep(filepath.Join(dir, row.Stdout), metrics)
		if err != nil {
			return row, err
		}
		for name, v := range found {
			if row.Metrics == nil {
				row.Metrics = map[string]json.RawMessage{}
			}
			row.Metrics[name] = v
		}
	}
	return row, nil
}

// readObject reads a flat JSON object from the file at path in dir; a
// missing file is nil. Errors name path.
func readObject(dir, path string) (map[string]json.RawMessage, error) {
	b, err := os.ReadFile(filepath.Join(dir, path))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("results: %w", err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: want one JSON object: %w", path, err)
	}
	for k, v := range m {
		if bytes.ContainsAny(v, "\n\r\t ") && (v[0] == '[' || v[0] == '{') {
			var c bytes.Buffer
			if json.Compact(&c, v) == nil {
				m[k] = c.Bytes() // one line in a CSV cell
			}
		}
	}
	return m, nil
}

// paramOrder is the order of the keys in the run's params.json, as the
// source wrote them, so that the columns come in the sweep's order.
func paramOrder(dir string, run *ledger.Run) []string {
	if run.Started == nil || run.Started.Stdout == "" {
		return nil
	}
	b, err := os.ReadFile(filepath.Join(dir, filepath.Dir(run.Started.Stdout), "params.json"))
	if err != nil {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	var keys []string
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return keys
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return keys
		}
	}
	return keys
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

// grep finds the last match of each metric's pattern in a log.
func grep(path string, metrics []Metric) (map[string]json.RawMessage, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("results: %w", err)
	}
	defer f.Close()
	found := map[string]json.RawMessage{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		for _, m := range metrics {
			sub := m.Pattern.FindSubmatch(sc.Bytes())
			if sub == nil {
				continue
			}
			v := sub[0]
			if len(sub) > 1 {
				v = sub[1]
			}
			found[m.Name] = value(string(v))
		}
	}
	if err := sc.Err(); err != nil && !errors.Is(err, bufio.ErrTooLong) {
		return nil, fmt.Errorf("results: %s: %w", path, err)
	}
	return found, nil
}

// value is a matched text as JSON: a number when it reads as one.
func value(s string) json.RawMessage {
	if f, err := strconv.ParseFloat(s, 64); err == nil && !strings.ContainsAny(s, "xXpP_") {
		b, err := json.Marshal(f)
		if err == nil {
			return b
		}
	}
	return quote(s)
}

func quote(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// fixed are the columns every table has, in order; the parameters come
// after origin and the metrics after peak_gpu_mem_bytes. A parameter or
// metric named like one of them gets a "param." or "metric." prefix.
var fixed = []string{"id", "origin", "state", "class", "attempts", "start", "end", "duration_s",
	"exit_code", "signal", "gpus", "cpus", "peak_rss_bytes", "peak_gpu_mem_bytes", "stdout", "stderr"}

// Columns returns the table's column names, in order.
func (t *Table) Columns() []string {
	name := func(prefix, k string) string {
		if slices.Contains(fixed, k) {
			return prefix + k
		}
		return k
	}
	cols := []string{"id", "origin"}
	for _, k := range t.Params {
		cols = append(cols, name("param.", k))
	}
	cols = append(cols, fixed[2:14]...)
	for _, k := range t.Metrics {
		cols = append(cols, name("metric.", k))
	}
	return append(cols, "stdout", "stderr")
}

// cells returns a row's values as JSON, one per column.
func (t *Table) cells(r Row) []json.RawMessage {
	str := func(s string) json.RawMessage {
		if s == "" {
			return nil
		}
		return quote(s)
	}
	num := func(v float64, ok bool) json.RawMessage {
		if !ok {
			return nil
		}
		b, _ := json.Marshal(v)
		return b
	}
	when := func(tm time.Time) json.RawMessage {
		if tm.IsZero() {
			return nil
		}
		return quote(tm.UTC().Format(time.RFC3339Nano))
	}
	out := []json.RawMessage{str(r.ID), str(r.Origin)}
	for _, k := range t.Params {
		out = append(out, r.Params[k])
	}
	var exit json.RawMessage
	if r.ExitCode != nil {
		exit = num(float64(*r.ExitCode), true)
	}
	out = append(out, str(string(r.State)), str(r.Class), num(float64(r.Attempts), true), when(r.Start), when(r.End),
		num(r.Seconds, !r.End.IsZero()), exit, str(r.Signal), str(strings.Join(r.GPUs, ",")), str(r.CPUs),
		num(float64(r.PeakRSS), r.PeakRSS > 0), num(float64(r.PeakGPUMem), r.PeakGPUMem > 0))
	for _, k := range t.Metrics {
		out = append(out, r.Metrics[k])
	}
	return append(out, str(r.Stdout), str(r.Stderr))
}

// WriteCSV writes the table as CSV with a header line: numbers as JSON
// writes them, strings as they are, a missing value empty, a list or an
// object as its JSON text.
func (t *Table) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	cw.Write(t.Columns())
	line := make([]string, 0, len(t.Columns()))
	for _, r := range t.Rows {
		line = line[:0]
		for _, v := range t.cells(r) {
			line = append(line, csvText(v))
		}
		cw.Write(line)
	}
	cw.Flush()
	return cw.Error()
}

// csvText is a JSON value as a CSV cell.
func csvText(v json.RawMessage) string {
	if len(v) == 0 || string(v) == "null" {
		return ""
	}
	if v[0] == '"' {
		var s string
		if json.Unmarshal(v, &s) == nil {
			return s
		}
	}
	return string(v)
}

// WriteJSON writes the table as a JSON array of flat objects, one per
// row, with every column (null where a row has no value): what pandas
// reads with pd.read_json.
func (t *Table) WriteJSON(w io.Writer) error {
	bw := bufio.NewWriter(w)
	cols := t.Columns()
	keys := make([][]byte, len(cols))
	for i, c := range cols {
		keys[i] = quote(c)
	}
	bw.WriteString("[")
	for i, r := range t.Rows {
		if i > 0 {
			bw.WriteString(",")
		}
		bw.WriteString("\n{")
		for j, v := range t.cells(r) {
			if j > 0 {
				bw.WriteString(", ")
			}
			bw.Write(keys[j])
			bw.WriteString(": ")
			if len(v) == 0 {
				v = json.RawMessage("null")
			}
			bw.Write(v)
		}
		bw.WriteString("}")
	}
	bw.WriteString("\n]\n")
	return bw.Flush()
}
