package sweep

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/runner/metrics"
	"github.com/nodepack/nodepack/runner/run"
)

// maxParamsLineBytes is the longest params-file line readParams accepts.
const maxParamsLineBytes = 1 << 20

// readParams returns the runs of a params file, as LudwigCluster's
// param2val lists are written: one JSON object per line, each like one
// combination of a grid. Blank lines and lines starting with '#' are
// skipped. For each object the runs get the command with --key=value
// appended for every key in the object's order, except keys the command
// uses as a {key} placeholder, which take the value in place. A string
// value is its text, byte for byte (no shell sees it); any other value is
// its JSON text (3, 1e-3, true, null, [1,2]).
//
// A key "nodepack" ([paramsRequestKey]) holds the run's request, not a
// parameter: {"lr": 0.1, "nodepack": {"gpus": 2, "cpus": 16}} asks for 2
// GPUs and 16 CPUs, read as [pack.ParseRequest] reads "gpus=2 cpus=16"
// over opts.Request. Other lines match opts.Rules.
//
// The returned error reports malformed braces in the command. Errors in
// the file end the sequence and name file:line:col: a line that is not one
// JSON object, a duplicate or unusable key, a value with a NUL byte, a
// placeholder the object has no value for, a line longer than
// [maxParamsLineBytes]. The reader is consumed lazily, one line per run,
// so a file of a million lines starts its first run at once.
func readParams(r io.Reader, name string, command []string, opts expandOptions) (iter.Seq2[run.Run, error], error) {
	cmd, err := parseCommand(command, opts, func(string) bool { return true })
	if err != nil {
		return nil, err
	}
	return func(yield func(run.Run, error) bool) {
		sc := newLineScanner(r)
		x := newExpander(opts)
		var e paramsEntry
		line := 0
		for sc.Scan() {
			line++
			text := lineText(sc.Bytes(), line)
			if len(text) == 0 || text[0] == '#' {
				continue
			}
			if err := e.parseLine(text, cmd, opts); err != nil {
				yield(run.Run{}, lineError(name, line, err))
				return
			}
			e.origin = name + ":" + strconv.Itoa(line)
			if !x.expand(&e.entry, yield) {
				return
			}
		}
		if err := sc.Err(); err != nil {
			yield(run.Run{}, scanError(name, line+1, err))
		}
	}, nil
}

// newLineScanner reads a file of JSON lines, each at most
// [maxParamsLineBytes] long.
func newLineScanner(r io.Reader) *bufio.Scanner {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxParamsLineBytes+2)
	return sc
}

// lineText is line number n of a JSON-lines file without the spaces
// around it (and a BOM before the first).
func lineText(text []byte, n int) []byte {
	if n == 1 {
		text = bytes.TrimPrefix(text, utf8BOM)
	}
	return bytes.TrimSpace(text)
}

// scanError names the line of a JSON-lines file that could not be read.
func scanError(name string, line int, err error) error {
	if errors.Is(err, bufio.ErrTooLong) {
		err = fmt.Errorf("line is longer than %d bytes", maxParamsLineBytes)
	}
	return fmt.Errorf("%s:%d: %w", name, line, err)
}

// lineError names the line (and the column, where it is known) of a
// params object's error.
func lineError(name string, line int, err error) error {
	var ce *columnError
	if errors.As(err, &ce) {
		return fmt.Errorf("%s:%d:%d: %s", name, line, ce.col, ce.msg)
	}
	return fmt.Errorf("%s:%d: %w", name, line, err)
}

// parseLine makes e the entry of one params object, text: its parameters
// in their order, and its own request (the "nodepack" key) read over
// opts.Request. An error says which column where it can.
func (e *paramsEntry) parseLine(text []byte, cmd *commandTemplate, opts expandOptions) error {
	keys, vals, raws, err := parseParamsLine(text)
	if err != nil {
		return err
	}
	return e.fromObject(keys, vals, raws, cmd, opts)
}

// fromObject is parseLine's, for an object already read.
func (e *paramsEntry) fromObject(keys, vals []string, raws []json.RawMessage, cmd *commandTemplate, opts expandOptions) error {
	var request *pack.Request
	if i := slices.Index(keys, paramsRequestKey); i >= 0 {
		r, err := paramsRequest(raws[i], opts.Request, opts.GPUMemory)
		if err != nil {
			return err
		}
		request = &r
		keys, vals, raws = slices.Delete(keys, i, i+1), slices.Delete(vals, i, i+1), slices.Delete(raws, i, i+1)
	}
	if err := e.fill(cmd, keys, vals, raws); err != nil {
		return err
	}
	e.request = request
	return nil
}

// paramsEntry is the entry of one params object, a params-file line or a
// Go run's Params: its values fill in the command.
type paramsEntry struct {
	entry
	values map[string]string
}

// fill makes e the entry of the object keys (in order), with the argument
// text and the compact JSON of each value: the command cmd with each {key}
// placeholder taking its value and the other keys appended as
// --key=value; with cmd nil, only the values (for rules, names and the
// recorded parameters).
func (e *paramsEntry) fill(cmd *commandTemplate, keys, vals []string, raws []json.RawMessage) error {
	if e.value == nil {
		e.value = func(key string) string { return e.values[key] }
		e.match = func(key string) (string, bool) { v, ok := e.values[key]; return v, ok }
	}
	e.values = make(map[string]string, len(keys))
	for i, k := range keys {
		e.values[k] = vals[i]
	}
	pairs := make([]string, len(keys))
	for i, k := range keys {
		pairs[i] = k + "=" + vals[i]
	}
	e.name, e.params, e.args = configName(pairs), metrics.Object(keys, raws), nil
	if cmd == nil {
		return nil
	}
	for k := range cmd.used {
		if _, ok := e.values[k]; !ok {
			return fmt.Errorf("no value for placeholder {%s}", k)
		}
	}
	e.args = append(make([]argTemplate, 0, len(cmd.args)+len(keys)), cmd.args...)
	for i, k := range keys {
		if cmd.appended(k) {
			e.args = append(e.args, literalArg("--"+k+"="+vals[i]))
		}
	}
	return nil
}

// parseParamsLine reads one JSON object, keeping its keys in order: the
// argument text of each value and its JSON, compacted.
func parseParamsLine(line []byte) (keys, values []string, raws []json.RawMessage, err error) {
	if !utf8.Valid(line) {
		// encoding/json would turn the bytes into U+FFFD before the
		// program saw them.
		bad := 0
		for bad < len(line) {
			r, size := utf8.DecodeRune(line[bad:])
			if r == utf8.RuneError && size <= 1 {
				break
			}
			bad += size
		}
		return nil, nil, nil, &columnError{bad + 1, "invalid UTF-8: a params file is JSON, which is UTF-8"}
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	// next returns the column of the next token: past spaces, ',' and ':'.
	next := func() int {
		i := int(dec.InputOffset())
		for i < len(line) && bytes.IndexByte([]byte(" \t\r\n,:"), line[i]) >= 0 {
			i++
		}
		return i + 1
	}
	fail := func(err error, msg string) error {
		col := int(dec.InputOffset()) + 1
		var se *json.SyntaxError
		if errors.As(err, &se) {
			col, msg = int(se.Offset), se.Error()
		}
		return &columnError{max(col, 1), msg}
	}
	start := next()
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		if err == nil {
			return nil, nil, nil, &columnError{start, "want a JSON object"}
		}
		return nil, nil, nil, fail(err, "want a JSON object")
	}
	seen := map[string]bool{}
	for dec.More() {
		keyAt := next()
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, nil, fail(err, "want a key")
		}
		key := tok.(string) // inside an object, Token returns keys as strings
		if err := checkKey(key); err != nil {
			return nil, nil, nil, &columnError{keyAt, err.Error()}
		}
		if seen[key] {
			return nil, nil, nil, &columnError{keyAt, fmt.Sprintf("duplicate key %q", key)}
		}
		seen[key] = true
		valueAt := next()
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, nil, nil, fail(err, "bad value")
		}
		value, err := paramText(raw)
		if err != nil {
			return nil, nil, nil, &columnError{valueAt, err.Error()}
		}
		if err := checkValue(key, value); err != nil {
			return nil, nil, nil, &columnError{valueAt, err.Error()}
		}
		var compact bytes.Buffer
		json.Compact(&compact, raw)
		keys, values, raws = append(keys, key), append(values, value), append(raws, compact.Bytes())
	}
	if _, err := dec.Token(); err != nil {
		return nil, nil, nil, fail(err, "want } to end the object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, nil, nil, fail(err, "text after the object: one JSON object per line")
	}
	return keys, values, raws, nil
}

// paramText turns a JSON value into argument text.
func paramText(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	switch raw[0] {
	case '"':
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	case '{', '[':
		var b bytes.Buffer
		err := json.Compact(&b, raw)
		return b.String(), err
	}
	return string(raw), nil
}
