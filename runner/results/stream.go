package results

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/nodepack/nodepack/runner/ledger"
	"github.com/nodepack/nodepack/runner/metrics"
)

// TableOptions says how WriteTable writes the results table.
type TableOptions struct {
	Patterns []metrics.Pattern // metrics from each run's stdout, as Read takes them
	JSON     bool              // a JSON array (WriteJSON's), else CSV (WriteCSV's)
	// Sort orders the rows by a column, as Table.Sort does (Desc: highest
	// first); "" keeps the input order.
	Sort string
	Desc bool
	Top  int // only the first Top rows (after Sort); 0 all
}

// TableInfo is what WriteTable says of the table it wrote.
type TableInfo struct {
	Rows, Total int // the rows written, of Total
	// Pruned and Paused count the judged-out runs with a value in the
	// Sort column (see Table.PrunedWith).
	Pruned, Paused int
	// Metric says the Sort column is a metric's.
	Metric bool
	// Started says the table's head was written: an error before it
	// (the sweep could not be read, no such column) wrote nothing.
	Started bool
}

// ErrNoColumn is wrapped by the error of a Sort column the table does not
// have.
var ErrNoColumn = errors.New("no such column")

// streamChunk is how many rows WriteTable builds at once from records
// it reads where the fold says they are; reorderRows how many rows that
// came early it holds, reading the ledgers in their order, before it
// reads the rest that way instead.
var (
	streamChunk = 1 << 14
	reorderRows = 1 << 15
)

// place is a run of a sweep's table: its index in the source and where
// its records are (its ledger, its place there).
type place struct {
	index   int
	log, at int32
}

// WriteTable writes the results table of the sweep in dir to w, the rows
// Read gives in the order Table.Sort would put them, as WriteCSV or
// WriteJSON write them, without holding the table: a first pass over the
// ledgers learns the columns (and, for Sort, each run's key), a second
// builds and writes the rows in order as it reads them again (in the
// ledgers' order, holding the few that come before their turn, or a chunk
// at a time where the fold says they are). It keeps a few dozen bytes a
// run, where Read keeps each run's row. A Sort column the table does not
// have is an error before anything is written.
func WriteTable(w io.Writer, dir string, o TableOptions) (TableInfo, error) {
	d, err := ledger.ReadDir(dir, ledger.ReadOptions{})
	if err != nil {
		return TableInfo{}, err
	}
	logs, err := d.Sweep()
	if err != nil {
		return TableInfo{}, err
	}
	t, places, sk, err := firstPass(dir, logs, o)
	if err != nil {
		return TableInfo{}, err
	}
	info := TableInfo{Total: len(places)}
	order := make([]int32, len(places)) // the rows' order: places by index, then by key
	for k := range order {
		order[k] = int32(k)
	}
	slices.SortStableFunc(order, func(a, b int32) int { return cmp.Compare(places[a].index, places[b].index) })
	cols := t.Columns()
	if o.Sort != "" {
		if !slices.Contains(cols, o.Sort) {
			return info, fmt.Errorf("no column %q: the table has %s: %w", o.Sort, strings.Join(cols, ", "), ErrNoColumn)
		}
		// The column is a fixed one (its key is in params too), a
		// parameter's, or else a metric's: the first of them in Columns.
		keys := sk.param
		if !slices.Contains(fixed, o.Sort) && !slices.ContainsFunc(t.Params, func(k string) bool { return ColumnName("param", k) == o.Sort }) {
			keys, info.Metric = sk.metric, true
		}
		for k := range keys {
			if keys[k].kind != noValue {
				switch sk.state[k] {
				case ledger.StatePruned:
					info.Pruned++
				case ledger.StatePaused:
					info.Paused++
				}
			}
		}
		slices.SortStableFunc(order, func(a, b int32) int { return compareKeys(keys[a], keys[b], o.Desc) })
	}
	sk = sortKeys{} // for the collector, before the rows are read
	if o.Top > 0 && o.Top < len(order) {
		order = order[:o.Top]
	}
	info.Rows = len(order)
	out := tableWriter(w, t, o.JSON)
	info.Started = true
	next := 0
	if o.Sort == "" {
		if next, err = writeInTurn(out, dir, logs, places, order, o.Patterns); err != nil {
			return info, err
		}
	}
	if err := writeInChunks(out, dir, logs, places, order[next:], o.Patterns); err != nil {
		return info, err
	}
	return info, out.end()
}

// sortKeys are, by place, with TableOptions.Sort, each run's state and
// its key as a parameter's and as a metric's value.
type sortKeys struct {
	state         []ledger.State
	param, metric []sortKey
}

// firstPass reads what WriteTable must know before it writes a row: the
// table's columns (its Params and Metrics), every run's place, and with
// Sort the runs' keys.
func firstPass(dir string, logs []*ledger.Log, o TableOptions) (*Table, []place, sortKeys, error) {
	// The columns are the keys in the order Read first sees them: by the
	// run it reads them in (seq, the order of LastAll) and their place in
	// its row.
	type seen struct{ seq, pos int }
	firstParam, firstMetric := map[string]seen{}, map[string]seen{}
	addKeys := func(keys []string, seq int, first map[string]seen) {
		for pos, k := range keys {
			if at, ok := first[k]; !ok || seq < at.seq {
				first[k] = seen{seq, pos}
			}
		}
	}
	// The first pass needs of most runs their params and metrics alone
	// (rowKeys), of all of them with Sort; the others are read again,
	// whole, after it.
	fields := ledger.ParamsAndMetrics
	if o.Sort != "" || len(o.Patterns) > 0 {
		fields = ledger.NoCurves
	}
	var places []place
	var keys sortKeys
	// whole takes a run read whole: its row's keys, and with Sort its key.
	whole := func(li, i, seq int, s *ledger.Started, fin *ledger.Finished) error {
		row, paramOrder, metricOrder, err := rowOf(dir, logs[li].At(i), s, fin, o.Patterns, false)
		if err != nil {
			return err
		}
		addKeys(sortedKeys(row.Params, paramOrder), seq, firstParam)
		addKeys(sortedKeys(row.Metrics, metricOrder), seq, firstMetric)
		places = append(places, place{index: row.Index, log: int32(li), at: int32(i)})
		if o.Sort != "" {
			keys.state = append(keys.state, row.State)
			keys.param = append(keys.param, keyOf(columnValue(row, o.Sort, "param")))
			keys.metric = append(keys.metric, keyOf(columnValue(row, o.Sort, "metric")))
		}
		return nil
	}
	seq := 0
	again := make([]map[int]int, len(logs)) // by ledger: the places to read whole, and their seq
	for li, log := range logs {
		err := log.LastAllFields(fields, func(i int, s *ledger.Started, fin *ledger.Finished) error {
			if log.At(i).Retired {
				return nil
			}
			seq++
			if o.Sort == "" {
				if index, paramKeys, metricKeys, ok := rowKeys(s, fin, o.Patterns); ok {
					addKeys(paramKeys, seq, firstParam)
					addKeys(metricKeys, seq, firstMetric)
					places = append(places, place{index: index, log: int32(li), at: int32(i)})
					return nil
				}
			}
			if fields == ledger.ParamsAndMetrics {
				if again[li] == nil {
					again[li] = map[int]int{}
				}
				again[li][i] = seq
				return nil
			}
			return whole(li, i, seq, s, fin)
		})
		if err != nil {
			return nil, nil, keys, err
		}
	}
	for li, log := range logs {
		if len(again[li]) == 0 {
			continue
		}
		at := slices.Sorted(maps.Keys(again[li]))
		err := log.LastFields(at, ledger.NoCurves, func(i int, s *ledger.Started, fin *ledger.Finished) error {
			return whole(li, i, again[li][i], s, fin)
		})
		if err != nil {
			return nil, nil, keys, err
		}
	}
	t := &Table{}
	for _, c := range []struct {
		first map[string]seen
		to    *[]string
	}{{firstParam, &t.Params}, {firstMetric, &t.Metrics}} {
		*c.to = slices.SortedFunc(maps.Keys(c.first), func(a, b string) int {
			x, y := c.first[a], c.first[b]
			return cmp.Or(cmp.Compare(x.seq, y.seq), cmp.Compare(x.pos, y.pos))
		})
	}
	return t, places, keys, nil
}

// rowKeys is what the first pass needs of a run whose records hold its
// parameters and its metrics (no stdout patterns): its index and its keys,
// in order, as rowOf would give them; ok is false for any other run,
// which rowOf reads.
func rowKeys(s *ledger.Started, fin *ledger.Finished, patterns []metrics.Pattern) (index int, params, metricKeys []string, ok bool) {
	if s == nil || fin == nil || fin.Attempt < s.Attempt || s.Params == nil || fin.Metrics == nil || len(patterns) > 0 {
		return 0, nil, nil, false
	}
	add := func(to *[]string) func(string, json.RawMessage) {
		return func(k string, _ json.RawMessage) { *to = append(*to, k) }
	}
	if !metrics.EachField(s.Params, add(&params)) || !metrics.EachField(fin.Metrics, add(&metricKeys)) {
		return 0, nil, nil, false
	}
	return cmp.Or(s.Index, fin.Index), params, metricKeys, true
}

// writeInTurn writes the rows of order (places in input order) as it reads
// the ledgers in their own order, holding the rows that come before their
// turn, at most reorderRows; it returns how many it wrote, all of them but
// where that many came early (a resumed sweep's reruns, shards that
// interleave), when the rest are for writeInChunks.
func writeInTurn(out *rowWriter, dir string, logs []*ledger.Log, places []place, order []int32, patterns []metrics.Pattern) (int, error) {
	turn := make([][]int32, len(logs)) // by ledger and place: the row's turn, -1 none
	for li, log := range logs {
		turn[li] = make([]int32, log.Len())
		for k := range turn[li] {
			turn[li][k] = -1
		}
	}
	for k, p := range order {
		turn[places[p].log][places[p].at] = int32(k)
	}
	early := map[int32]Row{}
	next := 0
	full := errors.New("too many rows before their turn")
	for li, log := range logs {
		err := log.LastAllFields(ledger.NoCurves, func(i int, s *ledger.Started, fin *ledger.Finished) error {
			k := turn[li][i]
			if k < 0 {
				return nil // retired
			}
			row, _, _, err := rowOf(dir, log.At(i), s, fin, patterns, true)
			if err != nil {
				return err
			}
			if int(k) != next {
				if len(early) >= reorderRows {
					return full
				}
				early[k] = row
				return nil
			}
			out.row(row)
			for next++; ; next++ {
				r, ok := early[int32(next)]
				if !ok {
					break
				}
				delete(early, int32(next))
				out.row(r)
			}
			return nil
		})
		if err == full {
			return next, nil
		}
		if err != nil {
			return next, err
		}
	}
	return next, nil
}

// writeInChunks writes the rows of order, a chunk at a time: each chunk's
// records read where the fold says they are.
func writeInChunks(out *rowWriter, dir string, logs []*ledger.Log, places []place, order []int32, patterns []metrics.Pattern) error {
	rows := make(map[[2]int32]Row, streamChunk)
	for start := 0; start < len(order); start += streamChunk {
		chunk := order[start:min(start+streamChunk, len(order))]
		clear(rows)
		for li, log := range logs {
			var at []int
			for _, p := range chunk {
				if int(places[p].log) == li {
					at = append(at, int(places[p].at))
				}
			}
			err := log.LastFields(at, ledger.NoCurves, func(i int, s *ledger.Started, fin *ledger.Finished) error {
				row, _, _, err := rowOf(dir, log.At(i), s, fin, patterns, true)
				rows[[2]int32{int32(li), int32(i)}] = row
				return err
			})
			if err != nil {
				return err
			}
		}
		for _, p := range chunk {
			out.row(rows[[2]int32{places[p].log, places[p].at}])
		}
	}
	return nil
}

// columnValue is row's value in column, as a parameter's (kind "param")
// or a metric's column: a fixed column is the same for both.
func columnValue(r Row, column, kind string) json.RawMessage {
	if i := slices.Index(fixed, column); i >= 0 {
		return (&Table{}).Cells(r)[i] // without parameters and metrics, the cells are the fixed columns
	}
	m := r.Params
	if kind == "metric" {
		m = r.Metrics
	}
	for k, v := range m {
		if ColumnName(kind, k) == column {
			return v
		}
	}
	return nil
}

// sortKey is a cell as Table.Sort orders it.
type sortKey struct {
	kind int8 // aNumber, aText or noValue
	num  float64
	text string
}

const (
	aNumber int8 = iota
	aText
	noValue
)

// keyOf is the sort key of the value v.
func keyOf(v json.RawMessage) sortKey {
	k := sortKey{kind: noValue}
	var s string
	switch {
	case len(v) == 0 || string(v) == "null":
	case json.Unmarshal(v, &k.num) == nil:
		k.kind = aNumber
	case json.Unmarshal(v, &s) == nil && s != "nan" && s != "" || v[0] != '"':
		k.kind, k.text = aText, cmp.Or(s, string(v))
	}
	return k
}

// compareKeys orders a and b as Table.Sort does: numbers first, then
// texts, then rows without a value, which desc does not move.
func compareKeys(a, b sortKey, desc bool) int {
	if c := cmp.Compare(a.kind, b.kind); c != 0 || a.kind == noValue {
		return c
	}
	c := cmp.Compare(a.num, b.num)
	if a.kind == aText {
		c = strings.Compare(a.text, b.text)
	}
	if desc {
		c = -c
	}
	return c
}

// rowWriter writes a table's rows one at a time: CSV or JSON.
type rowWriter struct {
	t      *Table
	asJSON bool
	bw     *bufio.Writer
	keys   [][]byte
	cells  []json.RawMessage // a row's, reused
	scr    []byte            // what its cells are written in, reused
	line   []byte            // a CSV line, reused
	count  int
}

// tableWriter starts writing t's rows to w: the CSV header, or the JSON
// array's opening.
func tableWriter(w io.Writer, t *Table, asJSON bool) *rowWriter {
	rw := &rowWriter{t: t, asJSON: asJSON, bw: bufio.NewWriterSize(w, 1<<16)}
	cols := t.Columns()
	if asJSON {
		rw.keys = make([][]byte, len(cols))
		for i, c := range cols {
			rw.keys[i] = quote(c)
		}
		rw.bw.WriteString("[")
		return rw
	}
	for i, c := range cols {
		if i > 0 {
			rw.line = append(rw.line, ',')
		}
		rw.line = appendCSVField(rw.line, []byte(inert(c)))
	}
	rw.bw.Write(append(rw.line, '\n'))
	return rw
}

// row writes one row.
func (rw *rowWriter) row(r Row) {
	rw.scr = rw.scr[:0]
	rw.cells = rw.t.appendCells(rw.cells[:0], &rw.scr, r)
	if !rw.asJSON {
		rw.line = rw.line[:0]
		for j, v := range rw.cells {
			if j > 0 {
				rw.line = append(rw.line, ',')
			}
			rw.line = appendCSVCell(rw.line, v)
		}
		rw.bw.Write(append(rw.line, '\n'))
		return
	}
	if rw.count > 0 {
		rw.bw.WriteString(",")
	}
	rw.count++
	rw.bw.WriteString("\n{")
	for j, v := range rw.cells {
		if j > 0 {
			rw.bw.WriteString(", ")
		}
		rw.bw.Write(rw.keys[j])
		rw.bw.WriteString(": ")
		if len(v) == 0 {
			v = json.RawMessage("null")
		}
		rw.bw.Write(v)
	}
	rw.bw.WriteString("}")
}

// end ends the table and flushes it.
func (rw *rowWriter) end() error {
	if rw.asJSON {
		rw.bw.WriteString("\n]\n")
	}
	return rw.bw.Flush()
}

// appendCSVCell appends the JSON value v as a CSV cell (csvText's), as
// encoding/csv writes it, with no text made on the way when v is a number
// or a text with nothing escaped.
func appendCSVCell(b []byte, v json.RawMessage) []byte {
	if len(v) == 0 || string(v) == "null" {
		return b
	}
	if n := len(v); v[0] == '"' && n >= 2 && v[n-1] == '"' && bytes.IndexByte(v[1:n-1], '\\') < 0 && bytes.IndexByte(v[1:n-1], '"') < 0 && utf8.Valid(v[1:n-1]) {
		text := v[1 : n-1]
		if len(text) > 0 && bytes.IndexByte([]byte("=+-@\t\r"), text[0]) >= 0 {
			return appendCSVField(b, []byte(inert(string(text))))
		}
		return appendCSVField(b, text)
	}
	if v[0] == '"' {
		return appendCSVField(b, []byte(csvText(v)))
	}
	return appendCSVField(b, v)
}

// appendCSVField appends field as encoding/csv's Writer writes it (comma
// ',', no CRLF): in quotes, its quotes doubled, where it holds a comma, a
// quote, a CR or an LF, begins with a space, or is \.
func appendCSVField(b, field []byte) []byte {
	needs := string(field) == `\.`
	for _, c := range field {
		if c == '\n' || c == '\r' || c == '"' || c == ',' {
			needs = true
			break
		}
	}
	if !needs && len(field) > 0 {
		r, _ := utf8.DecodeRune(field)
		needs = unicode.IsSpace(r)
	}
	if !needs {
		return append(b, field...)
	}
	b = append(b, '"')
	for _, c := range field {
		if c == '"' {
			b = append(b, '"')
		}
		b = append(b, c)
	}
	return append(b, '"')
}
