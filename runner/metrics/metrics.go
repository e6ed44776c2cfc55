// Package metrics reads the metrics a run reports as it trains, with no
// library on the run's side: one JSON object per line appended to the
// file NODEPACK_METRICS names ({"step": 200, "loss": 0.41, "acc": 0.83}),
// and lines of its standard output matched by patterns (NAME=REGEX).
//
// A Reader reads a file from where it stopped, so the same run can be read
// while it runs (early stopping) and once it ended (the ledger, the
// report), and what a run wrote is untrusted input: the file is opened as
// package untrusted opens one (a regular file, no link followed, never a
// blocking open), each Read takes at most ReadBudget bytes (the newest,
// when more was written since: the rest is skipped and counted) and a
// Reader MaxRead in all, a line longer than 64 KiB (maxLine) is skipped and
// counted, and so is a line that is not a JSON object; none of it stops
// the reading. A Summary keeps, per metric, the last value and a curve
// thinned to a bounded number of points, for at most MaxNames metrics of
// names no longer than MaxNameBytes. Package metrics is pure: the standard
// library and package untrusted only, and it does not know about runs or
// ledgers.
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

	"github.com/nodepack/nodepack/runner/jsonscan"
	"github.com/nodepack/nodepack/runner/untrusted"
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

// ReadBudget is the most bytes one Read takes: when more were written
// since the last Read, the newest ReadBudget are read and the rest is
// skipped (counted in Reader.Skipped). A Read's time is so bounded, what
// a run writes (yes '{"loss": 0.5}' > $NODEPACK_METRICS), and the last
// values, which matter most, are read.
const ReadBudget = 4 << 20

// MaxRead is the most bytes a Reader reads in all; past it each Read
// takes only the newest line's worth (maxLine), for the last values.
const MaxRead = 64 << 20

// Reader reads the points of a file that grows, from where it stopped:
// FileName's JSON lines, or, with Patterns, a log's lines matched by
// them. The zero Reader with a Path reads JSON lines.
type Reader struct {
	// Dir, when not nil, is the open directory that Path is relative to;
	// else Root, when not empty, the directory's path. Either is trusted
	// (an output directory, a run's directory nodepack holds open): no
	// part of Path below it is followed if it is a symbolic link. Without
	// either, Path's own directory is trusted and its file is not followed
	// if a link.
	Dir      *untrusted.Dir
	Root     string
	Path     string
	Patterns []Pattern

	// Malformed counts the lines that were not a JSON object (JSON
	// lines only); Long the lines longer than 64 KiB. Both were skipped.
	Malformed, Long int
	// Skipped counts the bytes not read: written faster than ReadBudget a
	// Read, or past MaxRead.
	Skipped int64

	off      int64
	read     int64  // bytes read in all
	rest     []byte // the unfinished last line, at most maxLine bytes
	skipping bool   // the unfinished last line is longer than maxLine
	resync   bool   // a cut line's end comes first: dropped, not counted
	steps    []float64
}

// open opens the file as package untrusted does; fs.ErrNotExist when it
// is not there yet.
func (r *Reader) open() (*os.File, error) {
	if r.Dir != nil {
		return r.Dir.Open(r.Path)
	}
	if r.Root != "" {
		return untrusted.Open(r.Root, r.Path)
	}
	return untrusted.Open(untrusted.Split(r.Path))
}

// Read calls each with every point of the lines added to the file since
// the last Read (at most ReadBudget bytes: the newest). An unfinished
// last line waits for the next Read, unless final says the writer is done
// (the run ended). A file that does not exist yet has no points; one that
// is a link, a FIFO, a device or a directory is an error, never followed
// or waited on.
func (r *Reader) Read(final bool, each func(Point)) error {
	f, err := r.open()
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	size := st.Size()
	if size < r.off {
		// The file was replaced or cut short: read it from the start.
		r.off, r.rest, r.skipping, r.resync = 0, r.rest[:0], false, false
	}
	budget := int64(ReadBudget)
	if r.read >= MaxRead {
		budget = maxLine
	}
	if size-r.off > budget {
		// More than a Read takes: the newest budget bytes, from the first
		// whole line in them.
		r.Skipped += size - budget - r.off + int64(len(r.rest))
		r.off, r.rest, r.skipping, r.resync = size-budget, r.rest[:0], false, true
	}
	end := size // what was written when this Read began: a file that
	// keeps growing is read up to here, and the rest the next time
	buf := make([]byte, min(64<<10, max(end-r.off, 1)))
	for r.off < end {
		n, err := f.ReadAt(buf[:min(int64(len(buf)), end-r.off)], r.off)
		r.off += int64(n)
		r.read += int64(n)
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
		case len(r.rest) > 0 && !r.resync:
			r.line(r.rest, each)
		}
		r.rest, r.skipping = r.rest[:0], false
	}
	return nil
}

// take splits b into lines, keeping an unfinished last one in rest.
func (r *Reader) take(b []byte, each func(Point)) {
	if r.resync {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			r.Skipped += int64(len(b))
			return
		}
		r.Skipped += int64(i + 1)
		b, r.resync = b[i+1:], false
	}
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
		v, ok := ParseNumber(group(line, sub, p.value))
		if !ok {
			continue
		}
		step := r.steps[i] + 1
		if p.step > 0 {
			if s, ok := ParseNumber(group(line, sub, p.step)); ok {
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

// ParseNumber reads a decimal number (no hex, no underscores), or nan,
// inf and -inf in any case, as a diverged run prints them and a run's
// recorded metrics keep them.
func ParseNumber(b []byte) (float64, bool) {
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
// step. It reports whether the line was one. The lines runs write (a flat
// object of numbers) are read by a scan of their own, many times faster
// than encoding/json; any other is read by encoding/json, to the same
// result.
func (r *Reader) object(line []byte, each func(Point)) bool {
	if ok, handled := r.flat(line, each); handled {
		return ok
	}
	return r.objectJSON(line, each)
}

// flatValue is one number of a flat line.
type flatValue struct {
	k string
	v float64
}

// flat reads line as object does when it is a flat JSON object, written
// as json.Marshal or Python's json.dumps writes one (jsonscan.Python):
// values that are numbers, Python's bare NaN and Infinity, strings,
// booleans or null. handled is false for any other line, which
// objectJSON reads.
func (r *Reader) flat(line []byte, each func(Point)) (ok, handled bool) {
	var values [8]flatValue
	vals := values[:0]
	step, hasStep, badStep := 0.0, false, false
	ok = jsonscan.Python.EachField(line, func(key, val []byte) bool {
		v, isNum, flat := flatNumber(val)
		switch {
		case !flat:
			return false // a list, an object: encoding/json reads it
		case !isNum:
		case string(key) == stepKey:
			if badStep = !finite(v); badStep {
				return false // a step that is no number: not a line of points
			}
			step, hasStep = v, true
		default:
			vals = append(vals, flatValue{string(key), v})
		}
		return true
	})
	switch {
	case badStep:
		return false, true
	case !ok:
		return false, false
	}
	r.emit(vals, step, hasStep, each)
	return true, true
}

// flatNumber reads a value of a flat line: isNum for a number (one out
// of float64's range is none, as encoding/json's Float64 says), flat for
// anything but a list or an object.
func flatNumber(val []byte) (v float64, isNum, flat bool) {
	switch c := val[0]; {
	case c == '{' || c == '[':
		return 0, false, false
	case string(val) == "NaN":
		return math.NaN(), true, true
	case string(val) == "Infinity":
		return math.Inf(1), true, true
	case string(val) == "-Infinity":
		return math.Inf(-1), true, true
	case c == '-' || '0' <= c && c <= '9':
		f, err := strconv.ParseFloat(string(val), 64)
		return f, err == nil, true
	}
	return 0, false, true // a string, true, false, null: no value
}

// LastStep returns the step of the last line read, also of a line that
// reports a step alone ({"step": 1200}); false before any.
func (r *Reader) LastStep() (float64, bool) {
	if r.steps == nil {
		return 0, false
	}
	return r.steps[0], true
}

// emit gives the points of one line: at its step, or the one after the
// line before's.
func (r *Reader) emit(vals []flatValue, step float64, hasStep bool, each func(Point)) {
	if r.steps == nil {
		r.steps = []float64{0}
	}
	if !hasStep {
		step = r.steps[0] + 1
	}
	r.steps[0] = step
	for _, v := range vals {
		each(Point{Step: step, Name: v.k, Value: v.v})
	}
}

// objectJSON is object for any line, read by encoding/json.
func (r *Reader) objectJSON(line []byte, each func(Point)) bool {
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
			f, _ = ParseNumber([]byte(word))
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
	vals := make([]flatValue, len(values))
	for i, v := range values {
		vals[i] = flatValue(v)
	}
	r.emit(vals, step, hasStep, each)
	return true
}

// FirstStep returns the step of the first line of the metrics file path
// below d at or past offset off (where an attempt began appending), from
// at most one line's worth of bytes; false when there is none.
func FirstStep(d *untrusted.Dir, path string, off int64) (float64, bool) {
	f, err := d.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	buf := make([]byte, maxLine)
	n, _ := f.ReadAt(buf, off)
	line, _, _ := bytes.Cut(buf[:n], []byte{'\n'})
	r := Reader{}
	r.line(line, func(Point) {})
	return r.LastStep()
}
