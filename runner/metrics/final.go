package metrics

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/nodepack/nodepack/runner/jsonscan"
	"github.com/nodepack/nodepack/runner/untrusted"
)

// finalFile is the file in a run's directory where it may write its final
// metrics: one flat JSON object, the last write wins. Its values stand
// above the last values of the per-step metrics of the same names.
const finalFile = "metrics.json"

// MaxObjectBytes is the largest metrics.json (or params.json) a run's
// directory may hold: a larger one is not read, and says so.
const MaxObjectBytes = 1 << 20

// ReadObject reads a flat JSON object from the file at path in dir
// (metrics.json, params.json), and its keys in the order the file has them
// (the last of a repeated key wins); a missing file is nil. A list or an
// object as a value is made one line. The file is read as package
// untrusted reads one: a regular file of at most MaxObjectBytes, no link
// below dir followed. Errors name path.
func ReadObject(dir, path string) (map[string]json.RawMessage, []string, error) {
	d, err := untrusted.OpenDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("metrics: %w", err)
	}
	defer d.Close()
	return readObject(d, path)
}

// readObject is ReadObject below the open directory d.
func readObject(d *untrusted.Dir, path string) (map[string]json.RawMessage, []string, error) {
	b, err := d.ReadFile(path, MaxObjectBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("metrics: %w", err)
	}
	m, keys, err := ParseObject(b)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, keys, nil
}

// ParseObject reads b as a flat JSON object, as ReadObject does.
func ParseObject(b []byte) (map[string]json.RawMessage, []string, error) {
	if m, keys, ok := parseCompact(b); ok {
		return m, keys, nil
	}
	bad := func(err error) (map[string]json.RawMessage, []string, error) {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF // the object ended early
		}
		return nil, nil, fmt.Errorf("want one JSON object: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return bad(cmp.Or(err, errors.New("not an object")))
	}
	m := map[string]json.RawMessage{}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return bad(err)
		}
		k := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return bad(err)
		}
		if (v[0] == '[' || v[0] == '{') && bytes.ContainsAny(v, "\n\r\t ") {
			var c bytes.Buffer
			if json.Compact(&c, v) == nil {
				v = c.Bytes() // one line in a CSV cell
			}
		}
		if _, ok := m[k]; !ok {
			keys = append(keys, k)
		}
		m[k] = v
	}
	if _, err := dec.Token(); err != nil {
		return bad(err)
	}
	if dec.More() {
		return bad(errors.New("more after the object"))
	}
	return m, keys, nil
}

// MaxValueBytes is the longest value of metrics.json a run's record
// takes: a longer one (a table, a long text) is left out, and said.
const MaxValueBytes = 1 << 10

// Report is what a run reported by the end of an attempt, for its ledger
// record: Final, one JSON object of each metric's last value with
// metrics.json's values on top ("{}" for none; a metrics file that could
// not be read, a link, a FIFO, a metrics.json that is not an object or
// is over MaxObjectBytes, is said under "metrics_error", and what a bound
// left out under "metrics_note": bytes not read, metrics past MaxNames,
// values over MaxValueBytes); Curves, {"name": [[step, value], …]} of at
// most points points each (steps as they are, values to 4 significant
// digits: a curve's shape, the final values being exact), nil for none;
// and the lines of the metrics file skipped (malformed or too long). The
// run's directory is run in dir, which is trusted (errors name it so; no
// link below it is followed); log, when not empty, is a file below dir too
// (the run's stdout.log), read with patterns.
func Report(dir, run, log string, patterns []Pattern, points int) (final, curves json.RawMessage, skipped int) {
	d, err := untrusted.OpenDir(dir)
	if err != nil {
		msg, _ := json.Marshal(fmt.Sprintf("metrics: %v", err))
		return Object([]string{"metrics_error"}, []json.RawMessage{msg}), nil, 0
	}
	defer d.Close()
	final, curves, skipped, _ = report(d, run, log, patterns, points)
	return final, curves, skipped
}

// ReportIn is Report for a run whose directory the caller holds open,
// d: log, when not empty, is a file in it (stdout.log). A run's files
// are opened from there, one system call each. It also returns how far
// the run got (see Progress).
func ReportIn(d *untrusted.Dir, log string, patterns []Pattern, points int) (final, curves json.RawMessage, skipped int, progress Progress) {
	return report(d, ".", log, patterns, points)
}

// Progress is how far a run got by what it reported: the step of its last
// point (of a line that reports a step alone, where none had a value),
// and the step of its last checkpoint (see CheckpointKey), 0 for none.
// Stepped says it reported a step at all.
type Progress struct {
	Last, Checkpoint float64
	Stepped          bool
}

func report(d *untrusted.Dir, run, log string, patterns []Pattern, points int) (final, curves json.RawMessage, skipped int, progress Progress) {
	var s Summary
	r := Reader{Dir: d, Path: filepath.Join(run, FileName)}
	var errs []error
	errs = append(errs, r.Read(true, s.Add))
	defer func() {
		progress = Progress{Last: s.LastStep, Checkpoint: s.Checkpoint(), Stepped: s.Stepped}
		if last, ok := r.LastStep(); ok && !s.Stepped {
			progress.Last, progress.Stepped = last, true
		}
	}()
	skipped = r.Malformed + r.Long
	notRead := r.Skipped
	if len(patterns) > 0 && log != "" {
		lr := Reader{Dir: d, Path: log, Patterns: patterns}
		errs = append(errs, lr.Read(true, s.Add))
		notRead += lr.Skipped
	}
	names, values := s.Final()
	own, keys, err := readObject(d, filepath.Join(run, finalFile))
	errs = append(errs, err)
	leftOut, long := s.Dropped, 0
	for _, k := range keys {
		if len(own[k]) > MaxValueBytes {
			long++
			continue
		}
		i := 0
		for i < len(names) && names[i] != k {
			i++
		}
		if i == len(names) {
			if len(names) >= MaxNames || len(k) > MaxNameBytes {
				leftOut++
				continue
			}
			names, values = append(names, k), append(values, nil)
		}
		values[i] = own[k]
	}
	if err := errors.Join(errs...); err != nil {
		msg, _ := json.Marshal(err.Error())
		names, values = append(names, "metrics_error"), append(values, msg)
	}
	var notes []string
	if notRead > 0 {
		notes = append(notes, fmt.Sprintf("%d bytes of its metrics not read (each read takes the newest %d MiB, %d MiB in all)", notRead, ReadBudget>>20, MaxRead>>20))
	}
	if leftOut > 0 {
		notes = append(notes, fmt.Sprintf("%d values of metrics past the first %d names (or named longer than %d bytes) left out", leftOut, MaxNames, MaxNameBytes))
	}
	if long > 0 {
		notes = append(notes, fmt.Sprintf("%d values of metrics.json longer than %d bytes left out", long, MaxValueBytes))
	}
	if len(notes) > 0 {
		msg, _ := json.Marshal(strings.Join(notes, "; "))
		names, values = append(names, "metrics_note"), append(values, msg)
	}
	final = Object(names, values)
	if len(s.Series) == 0 {
		return final, nil, skipped, progress
	}
	var c bytes.Buffer
	c.WriteByte('{')
	for i, m := range s.Series {
		if i > 0 {
			c.WriteByte(',')
		}
		key, _ := json.Marshal(m.Name)
		c.Write(key)
		c.WriteString(":[")
		for j, p := range m.Curve(points) {
			if j > 0 {
				c.WriteByte(',')
			}
			c.WriteByte('[')
			c.WriteString(strconv.FormatFloat(p[0], 'g', -1, 64))
			c.WriteByte(',')
			c.WriteString(strconv.FormatFloat(p[1], 'g', 4, 64))
			c.WriteByte(']')
		}
		c.WriteByte(']')
	}
	c.WriteByte('}')
	return final, c.Bytes(), skipped, progress
}

// EachField calls f with every key and value of a flat JSON object, in
// order, as ParseObject reads them (a repeated key more than once), without
// making a map; it reports false, having called f for none, where the
// object is not one.
func EachField(obj []byte, f func(key string, val json.RawMessage)) bool {
	if jsonscan.Compact.EachField(obj, func(_, _ []byte) bool { return true }) {
		jsonscan.Compact.EachField(obj, func(k, v []byte) bool {
			f(string(k), v[:len(v):len(v)])
			return true
		})
		return true
	}
	m, keys, err := ParseObject(obj)
	if err != nil {
		return false
	}
	for _, k := range keys {
		f(k, m[k])
	}
	return true
}

// parseCompact is ParseObject for an object as json.Marshal writes one (no
// blanks, keys without escapes), the shape of every object in a ledger,
// several times faster; it reports false for anything else, which
// ParseObject reads with encoding/json. Values are the bytes of b, checked
// for what encoding/json would refuse.
func parseCompact(b []byte) (map[string]json.RawMessage, []string, bool) {
	m := map[string]json.RawMessage{}
	var keys []string
	ok := jsonscan.Compact.EachField(b, func(k, v []byte) bool {
		if _, dup := m[string(k)]; !dup {
			keys = append(keys, string(k))
		}
		m[string(k)] = v[:len(v):len(v)]
		return true
	})
	return m, keys, ok
}

// Object writes keys and their JSON values, in order, as one JSON object
// (params.json, a run's final metrics).
func Object(keys []string, values []json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		key, _ := json.Marshal(k)
		b.Write(key)
		b.WriteByte(':')
		b.Write(values[i])
	}
	b.WriteByte('}')
	return b.Bytes()
}

// Field returns the value of key in a flat JSON object as json.Marshal
// writes one (see ParseObject), checked to be valid JSON; nil when the
// object has no such key or is not so written.
func Field(obj []byte, key string) json.RawMessage {
	var found json.RawMessage
	if !(jsonscan.Syntax{RawKeys: true}).EachField(obj, func(k, v []byte) bool {
		if found == nil && string(k) == key {
			found = v[:len(v):len(v)]
		}
		return true
	}) {
		return nil
	}
	return found
}
