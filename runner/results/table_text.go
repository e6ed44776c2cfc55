package results

import (
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

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/runner/escape"
	"github.com/nodepack/nodepack/runner/ledger"
	"github.com/nodepack/nodepack/runner/metrics"
)

// maxCell is the widest a cell of the runs table gets, in characters;
// longer values are cut with "…".
const maxCell = 28

// runsColumn is one column of the runs table as a person reads it.
type runsColumn struct {
	name  string
	right bool // numbers: aligned right
	cell  func(r Row) string
}

// runsColumns are the columns of the runs table for people: where the run
// comes from, its parameters and metrics, then how it went, its use and
// its id.
func runsColumns(t *Table) []runsColumn {
	cols := []runsColumn{{name: "run", cell: func(r Row) string {
		if r.Origin == "" {
			return r.ID
		}
		// The file's name and line: the whole path is in the CSV.
		if i := strings.LastIndexByte(r.Origin, ':'); i > 0 {
			return filepath.Base(r.Origin[:i]) + r.Origin[i:]
		}
		return r.Origin
	}}}
	value := func(v json.RawMessage) (string, bool) {
		if len(v) == 0 || string(v) == "null" {
			return "", false
		}
		var f float64
		if json.Unmarshal(v, &f) == nil {
			return strconv.FormatFloat(f, 'g', 6, 64), true
		}
		var s string
		if json.Unmarshal(v, &s) == nil {
			return s, s == "nan" || s == "inf" || s == "-inf" // a metric that diverged
		}
		return string(v), false
	}
	for _, group := range []struct {
		names []string
		get   func(r Row, k string) json.RawMessage
	}{
		{t.Params, func(r Row, k string) json.RawMessage { return r.Params[k] }},
		{t.Metrics, func(r Row, k string) json.RawMessage { return r.Metrics[k] }},
	} {
		for _, k := range group.names {
			right := true
			for _, r := range t.Rows {
				if s, num := value(group.get(r, k)); s != "" && !num {
					right = false
					break
				}
			}
			cols = append(cols, runsColumn{name: k, right: right, cell: func(r Row) string {
				s, _ := value(group.get(r, k))
				return s
			}})
		}
	}
	return append(cols,
		runsColumn{name: "state", cell: func(r Row) string {
			if r.State == ledger.StateFailed && r.Class != "" {
				return "failed (" + r.Class + ")"
			}
			return string(r.State)
		}},
		runsColumn{name: "time", right: true, cell: func(r Row) string {
			if r.End.IsZero() {
				return ""
			}
			return humanSeconds(r.Seconds)
		}},
		runsColumn{name: "tries", right: true, cell: func(r Row) string { return strconv.Itoa(r.Attempts) }},
		runsColumn{name: "mem", right: true, cell: func(r Row) string { return HumanBytes(r.PeakRSS) }},
		runsColumn{name: "gpu mem", right: true, cell: func(r Row) string { return HumanBytes(r.PeakGPUMem) }},
		runsColumn{name: "energy", right: true, cell: func(r Row) string {
			if r.EnergyWh <= 0 {
				return ""
			}
			return strconv.FormatFloat(roundEnergy(r.EnergyWh), 'f', -1, 64) + " Wh"
		}},
		runsColumn{name: "id", cell: func(r Row) string { return r.ID }},
	)
}

// curveColumn is a column of a metric's curve as a sparkline, from the
// few points of the run's record: it shows at a glance whether the metric
// still moved at the end.
func curveColumn(metric string) runsColumn {
	return runsColumn{name: metric + " by step", cell: func(r Row) string {
		c := metrics.Field(r.Curves, metric)
		var pts [][2]float64
		if c == nil || json.Unmarshal(c, &pts) != nil || len(pts) < 2 {
			return ""
		}
		return sparkline(pts)
	}}
}

// sparkline draws values low to high as ▁ to █.
func sparkline(pts [][2]float64) string {
	const bars = "▁▂▃▄▅▆▇█"
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, p := range pts {
		if !math.IsNaN(p[1]) && !math.IsInf(p[1], 0) {
			lo, hi = min(lo, p[1]), max(hi, p[1])
		}
	}
	var b strings.Builder
	for _, p := range pts {
		switch {
		case math.IsNaN(p[1]) || math.IsInf(p[1], 0):
			b.WriteByte(' ')
		case hi == lo:
			b.WriteString("▄")
		default:
			i := int((p[1] - lo) / (hi - lo) * 7.999)
			b.WriteString(string([]rune(bars)[i]))
		}
	}
	return b.String()
}

// WriteText writes t's rows as an aligned table for a person on a
// terminal, no wider than width characters (0: no limit): the columns
// that do not fit are left out and named in a note; with curve, a
// metric's curve follows its column as a sparkline. Every cell is made
// safe for a terminal (escape.Term) and cut at 28 characters; durations
// and sizes are for people. It returns the names of the columns left out.
func (t *Table) WriteText(w io.Writer, width int, curve string) (cut []string) {
	cols := runsColumns(t)
	if curve != "" {
		for j, c := range cols {
			if c.name == curve {
				cols = slices.Insert(cols, j+1, curveColumn(curve))
				break
			}
		}
	}
	cells := make([][]string, len(t.Rows))
	widths := make([]int, len(cols))
	for j, c := range cols {
		widths[j] = utf8.RuneCountInString(c.name)
	}
	used := make([]bool, len(cols))
	for i, r := range t.Rows {
		cells[i] = make([]string, len(cols))
		for j, c := range cols {
			s := escape.Term(c.cell(r))
			if utf8.RuneCountInString(s) > maxCell {
				s = string([]rune(s)[:maxCell-1]) + "…"
			}
			cells[i][j] = s
			widths[j] = max(widths[j], utf8.RuneCountInString(s))
			used[j] = used[j] || s != ""
		}
	}
	// A column empty in every row (GPU memory on a node without GPUs)
	// says nothing.
	for j := len(cols) - 1; j > 0; j-- {
		if !used[j] && len(t.Rows) > 0 {
			cols = slices.Delete(cols, j, j+1)
			widths = slices.Delete(widths, j, j+1)
			for i := range cells {
				cells[i] = slices.Delete(cells[i], j, j+1)
			}
		}
	}
	shown, total := 0, 0
	for j := range cols {
		need := widths[j] + 2
		if j == 0 {
			need = widths[j]
		}
		if width > 0 && j > 0 && total+need > width {
			break
		}
		total += need
		shown++
	}
	pad := func(b *strings.Builder, s string, w int, right bool) {
		gap := strings.Repeat(" ", w-utf8.RuneCountInString(s))
		if right {
			b.WriteString(gap + s)
		} else {
			b.WriteString(s + gap)
		}
	}
	line := func(get func(j int) string) {
		var b strings.Builder
		for j := range shown {
			if j > 0 {
				b.WriteString("  ")
			}
			last := j == shown-1
			if last && !cols[j].right {
				b.WriteString(get(j))
				continue
			}
			pad(&b, get(j), widths[j], cols[j].right)
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
	line(func(j int) string { return escape.Term(cols[j].name) })
	for i := range cells {
		line(func(j int) string { return cells[i][j] })
	}
	for _, c := range cols[shown:] {
		cut = append(cut, escape.Term(c.name))
	}
	return cut
}

// humanSeconds writes a duration for people: 850ms, 12.3s, 4m05s, 2h03m.
func humanSeconds(s float64) string {
	d := time.Duration(RoundMillis(s) * float64(time.Second))
	switch {
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	case d < time.Minute:
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s"
	case d < time.Hour:
		d = d.Round(time.Second)
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	d = d.Round(time.Minute)
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}

// HumanBytes writes a size for people, "" for none: 512MiB, 1.5GiB.
func HumanBytes(b uint64) string {
	if b == 0 {
		return ""
	}
	if b >= 10<<30 || b < 1<<30 {
		return pack.FormatSize(roundSize(b))
	}
	return strconv.FormatFloat(float64(b)/(1<<30), 'f', 1, 64) + "GiB"
}

// roundSize keeps the two leading units of b, so that FormatSize writes
// 512MiB rather than 536870913B.
func roundSize(b uint64) uint64 {
	for unit := uint64(1 << 40); unit >= 1<<10; unit >>= 10 {
		if b >= unit {
			return (b + unit/2) / unit * unit
		}
	}
	return b
}
