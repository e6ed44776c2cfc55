// Package metrics reads the metrics a run reports as it trains, with no
// library on the run's side: one JSON object per line appended to the
// file NODEPACK_METRICS names ({"step": 200, "loss": 0.41, "acc": 0.83}),
// and lines of its standard output matched by patterns (NAME=REGEX).
//
// A Reader reads a file from where it stopped, so the same run can be read
// while it runs (early stopping) and once it ended (the ledger, the
// report), and in bounded memory: a line longer than 64 KiB (maxLine) is skipped and
// counted, and so is a line that is not a JSON object; neither stops the
// reading. A Summary keeps, per metric, the last value and a curve thinned
// to a bounded number of points. Package metrics is pure: the standard
// library only, and it does not know about runs or ledgers.
//
// A Reader or a Summary is not safe for concurrent use.
package metrics

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// FileName is the file in a run's directory where it appends its metrics,
// one JSON object per line; the runner names it in EnvVar.
const FileName = "metrics.jsonl"

// EnvVar is the environment variable that holds the path of FileName.
const EnvVar = "NODEPACK_METRICS"

// stepKey is the key of a line's step: {"step": 200, "loss": 0.41}. A
// line without it is the next step after the line before (the first line
// is step 1).
const stepKey = "step"

// maxLine is the longest line a Reader takes: a longer one is skipped and
// counted in Reader.Long.
const maxLine = 64 << 10

// Point is one value of one metric at one step.
type Point struct {
	Step  float64
	Name  string
	Value float64
}

// Pattern takes a metric from lines of a run's standard output: Regexp's
// group named "value", else its first group, else the whole match, at the
// step its group named "step" gives (else the match is the step after the
// pattern's match before).
type Pattern struct {
	Name   string
	Regexp *regexp.Regexp
	value  int // the submatch of the value
	step   int // the submatch of the step; 0 for none
}

// ParsePattern reads NAME=REGEX: 'loss=loss=(\S+)', or with a step,
// 'loss=step (?P<step>\d+) loss (?P<value>\S+)'.
func ParsePattern(s string) (Pattern, error) {
	name, expr, ok := strings.Cut(s, "=")
	if !ok || name == "" || expr == "" {
		return Pattern{}, fmt.Errorf("metric %q: want NAME=REGEX", s)
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return Pattern{}, fmt.Errorf("metric %s: %w", name, err)
	}
	p := Pattern{Name: name, Regexp: re, value: re.SubexpIndex("value"), step: max(re.SubexpIndex("step"), 0)}
	if p.value < 0 {
		p.value = 0
		for i := 1; i <= re.NumSubexp(); i++ {
			if i != p.step {
				p.value = i
				break
			}
		}
	}
	return p, nil
}

// Reader reads the points of a file that grows, from where it stopped:
// FileName's JSON lines, or, with Patterns, a log's lines matched by
// them. The zero Reader with a Path reads JSON lines.
type Reader struct {
	Path     string
	Patterns []Pattern

	// Malformed counts the lines that were not a JSON object (JSON
	// lines only); Long the lines longer than 64 KiB. Both were skipped.
	Malformed, Long int

	off      int64
	rest     []byte // the unfinished last line, at most maxLine bytes
	skipping bool   // the unfinished last line is longer than maxLine
	steps    []float64
}

// Read calls each with every point of the lines added to the file since
// the last Read. An unfinished last line waits for the next Read, unless
// final says the writer is done (the run ended). A file that does not
// exist yet has no points.
func (r *Reader) Read(final bool, each func(Point)) error {
	f, err := os.Open(r.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() < r.off {
		// The file was replaced or cut short: read it from the start.
		r.off, r.rest, r.skipping = 0, r.rest[:0], false
	}
	buf := make([]byte, 64<<10)
	for {
		n, err := f.ReadAt(buf, r.off)
		r.off += int64(n)
		r.take(buf[:n], each)
		if err == io.EOF || n == 0 {
			break
		}
		if err != nil {
			return fmt.Errorf("metrics: %w", err)
		}
	}
	if final {
		switch {
		case r.skipping:
			r.Long++
		case len(r.rest) > 0:
			r.line(r.rest, each)
		}
		r.rest, r.skipping = r.rest[:0], false
	}
	return nil
}

// take splits b into lines, keeping an unfinished last one in rest.
func (r *Reader) take(b []byte, each func(Point)) {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			if r.skipping || len(r.rest)+len(b) > maxLine {
				r.skipping, r.rest = true, r.rest[:0]
			} else {
				r.rest = append(r.rest, b...)
			}
			return
		}
		switch {
		case r.skipping || len(r.rest)+i > maxLine:
			r.Long++
		case len(r.rest) > 0:
			r.rest = append(r.rest, b[:i]...)
			r.line(r.rest, each)
		default:
			r.line(b[:i], each)
		}
		r.rest, r.skipping = r.rest[:0], false
		b = b[i+1:]
	}
}

// line takes one whole line.
func (r *Reader) line(line []byte, each func(Point)) {
	line = bytes.TrimRight(line, "\r")
	if len(r.Patterns) > 0 {
		r.match(line, each)
		return
	}
	if len(bytes.TrimSpace(line)) == 0 {
		return
	}
	if !r.object(line, each) {
		r.Malformed++
	}
}

// match takes a log line's points: one per pattern that matches.
func (r *Reader) match(line []byte, each func(Point)) {
	if r.steps == nil {
		r.steps = make([]float64, len(r.Patterns))
	}
	for i, p := range r.Patterns {
		sub := p.Regexp.FindSubmatchIndex(line)
		if sub == nil {
			continue
		}
		v, ok := number(group(line, sub, p.value))
		if !ok {
			continue
		}
		step := r.steps[i] + 1
		if p.step > 0 {
			if s, ok := number(group(line, sub, p.step)); ok {
				step = s
			}
		}
		if !finite(step) {
			continue // no step: not a point
		}
		r.steps[i] = step
		each(Point{Step: step, Name: p.Name, Value: v})
	}
}

// group is submatch k of a match's indexes sub; the whole match for 0.
func group(line []byte, sub []int, k int) []byte {
	if 2*k+1 >= len(sub) || sub[2*k] < 0 {
		return nil
	}
	return line[sub[2*k]:sub[2*k+1]]
}

// number reads a decimal number (no hex, no underscores), or nan, inf and
// -inf in any case, as a diverged run prints them.
func number(b []byte) (float64, bool) {
	s := string(bytes.TrimSpace(b))
	switch strings.ToLower(strings.TrimPrefix(s, "+")) {
	case "nan":
		return math.NaN(), true
	case "inf", "infinity":
		return math.Inf(1), true
	case "-inf", "-infinity":
		return math.Inf(-1), true
	}
	if s == "" || strings.ContainsAny(s, "xXpP_iInN") {
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	return f, err == nil
}

// nonFinite is the text that stands for a NaN or an infinity that a JSON
// line wrote bare, as Python's json.dumps does: see lenient.
const nonFinite = "\x00nodepack:"

// lenient rewrites the bare NaN, Infinity and -Infinity of a line that
// Python's json module wrote (valid JSON has none) as strings that object
// takes for those numbers; nil when the line has none.
func lenient(line []byte) []byte {
	if !bytes.Contains(line, []byte("NaN")) && !bytes.Contains(line, []byte("Infinity")) {
		return nil
	}
	var out []byte
	inString, escaped := false, false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case inString:
			inString = c != '"' || escaped
			escaped = c == '\\' && !escaped
		case c == '"':
			inString = true
		default:
			for _, word := range []string{"NaN", "-Infinity", "Infinity"} {
				if bytes.HasPrefix(line[i:], []byte(word)) {
					if out == nil {
						out = append(out, line[:i]...)
					}
					out = append(out, `"\u0000nodepack:`+word+`"`...) // nonFinite, escaped
					i += len(word) - 1
					c = 0
					break
				}
			}
		}
		if out != nil && c != 0 {
			out = append(out, c)
		}
	}
	return out
}

// object takes the points of a JSON object line: every number but the
// step. It reports whether the line was one.
func (r *Reader) object(line []byte, each func(Point)) bool {
	if l := lenient(line); l != nil {
		line = l
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return false
	}
	type kv struct {
		k string
		v float64
	}
	var values []kv
	step, hasStep := 0.0, false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		k, _ := tok.(string)
		var v any
		if err := dec.Decode(&v); err != nil {
			return false
		}
		var f float64
		switch v := v.(type) {
		case json.Number:
			var err error
			if f, err = v.Float64(); err != nil {
				continue // out of range
			}
		case string:
			word, ok := strings.CutPrefix(v, nonFinite)
			if !ok {
				continue // text is no metric's value
			}
			f, _ = number([]byte(word))
		default:
			continue // nor are lists, objects and booleans
		}
		if k == stepKey {
			if !finite(f) {
				return false // a step that is no number: not a line of points
			}
			step, hasStep = f, true
			continue
		}
		values = append(values, kv{k, f})
	}
	if _, err := dec.Token(); err != nil {
		return false
	}
	if dec.More() {
		return false
	}
	if r.steps == nil {
		r.steps = []float64{0}
	}
	if !hasStep {
		step = r.steps[0] + 1
	}
	r.steps[0] = step
	for _, v := range values {
		each(Point{Step: step, Name: v.k, Value: v.v})
	}
	return true
}
