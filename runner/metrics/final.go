package metrics

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
)

// FinalFile is the file in a run's directory where it may write its final
// metrics: one flat JSON object, the last write wins. Its values stand
// above the last values of the per-step metrics of the same names.
const FinalFile = "metrics.json"

// ReadObject reads a flat JSON object from the file at path in dir
// (metrics.json, params.json), and its keys in the order the file has them
// (the last of a repeated key wins); a missing file is nil. A list or an
// object as a value is made one line. Errors name path.
func ReadObject(dir, path string) (map[string]json.RawMessage, []string, error) {
	b, err := os.ReadFile(filepath.Join(dir, path))
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

// Report is what a run reported by the end of an attempt, for its ledger
// record: Final, one JSON object of each metric's last value with
// FinalFile's values on top ("{}" for none; a FinalFile that is not an
// object is said under "metrics_error"); Curves, {"name": [[step,
// value], …]} of at most points points each (6 significant digits), nil
// for none; and the lines of the metrics file skipped (malformed or too
// long). The run's directory is run in dir (errors name it so); log, when
// not empty, is read with patterns.
func Report(dir, run, log string, patterns []Pattern, points int) (final, curves json.RawMessage, skipped int) {
	var s Summary
	r := Reader{Path: filepath.Join(dir, run, FileName)}
	var errs []error
	errs = append(errs, r.Read(true, s.Add))
	skipped = r.Malformed + r.Long
	if len(patterns) > 0 && log != "" {
		lr := Reader{Path: log, Patterns: patterns}
		errs = append(errs, lr.Read(true, s.Add))
	}
	names, values := s.Final()
	own, keys, err := ReadObject(dir, filepath.Join(run, FinalFile))
	errs = append(errs, err)
	for _, k := range keys {
		i := 0
		for i < len(names) && names[i] != k {
			i++
		}
		if i == len(names) {
			names, values = append(names, k), append(values, nil)
		}
		values[i] = own[k]
	}
	if err := errors.Join(errs...); err != nil {
		msg, _ := json.Marshal(err.Error())
		names, values = append(names, "metrics_error"), append(values, msg)
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		key, _ := json.Marshal(k)
		b.Write(key)
		b.WriteByte(':')
		b.Write(values[i])
	}
	b.WriteByte('}')
	final = b.Bytes()
	if len(s.Series) == 0 {
		return final, nil, skipped
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
			c.WriteString(strconv.FormatFloat(p[0], 'g', 6, 64))
			c.WriteByte(',')
			c.WriteString(strconv.FormatFloat(p[1], 'g', 6, 64))
			c.WriteByte(']')
		}
		c.WriteByte(']')
	}
	c.WriteByte('}')
	return final, c.Bytes(), skipped
}
