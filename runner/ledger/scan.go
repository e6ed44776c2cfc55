package ledger

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/nodepack/nodepack/runner/failure"
	"github.com/nodepack/nodepack/runner/run"
)

// head is what folding a started or finished record into a Log needs of
// it.
type head struct {
	typ, id, reason []byte // within the line
	attempt         int
	retry, exitCode bool // exitCode: the record has a numeric exit_code
}

// scanHead reads a record's head from line without decoding the rest: a
// ledger of millions of records is read in well under a second this way,
// where encoding/json takes seconds and a kilobyte a record. It takes the
// lines json.Marshal writes (no blanks, plain keys) and checks their
// shape: an object of "key":value pairs, strings without control bytes,
// literals of the right letters, brackets that close. It reports false
// for anything else — another writer's spacing, an escape in a value it
// reads, a damaged line — and the caller decodes that line with
// encoding/json, which reads what is valid and names what is not.
func scanHead(line []byte) (h head, ok bool) {
	n := len(line)
	if n < 2 || line[0] != '{' || line[n-1] != '}' {
		return h, false
	}
	i := 1
	for {
		if i >= n || line[i] != '"' {
			return h, false
		}
		k := i + 1
		for k < n && line[k] != '"' {
			if line[k] == '\\' || line[k] < 0x20 {
				return h, false
			}
			k++
		}
		if k+1 >= n || line[k+1] != ':' {
			return h, false
		}
		key := line[i+1 : k]
		start := k + 2
		end, ok := skipValue(line, start)
		if !ok {
			return h, false
		}
		val := line[start:end]
		switch string(key) {
		case "type":
			h.typ, ok = plainString(val)
		case "id":
			h.id, ok = plainString(val)
		case "reason":
			h.reason, ok = plainString(val)
		case "attempt":
			h.attempt, ok = smallInt(val)
		case "retry":
			h.retry, ok = string(val) == "true", string(val) == "true" || string(val) == "false"
		case "exit_code":
			_, ok = smallInt(val)
			h.exitCode = ok
		default:
			// encoding/json matches keys without regard to case: "ID"
			// would be the id to it.
			ok = !isHeadKeyFolded(key)
		}
		if !ok {
			return h, false
		}
		switch {
		case end == n-1:
			return h, true
		case end < n && line[end] == ',':
			i = end + 1
		default:
			return h, false
		}
	}
}

// skipValue returns the end of the JSON value that starts at line[i].
func skipValue(line []byte, i int) (int, bool) {
	if i >= len(line) {
		return 0, false
	}
	switch c := line[i]; {
	case c == '"':
		return skipString(line, i)
	case c == '{' || c == '[':
		depth := 0
		for i < len(line) {
			switch line[i] {
			case '"':
				end, ok := skipString(line, i)
				if !ok {
					return 0, false
				}
				i = end
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1, true
				}
			default:
				if line[i] < 0x20 {
					return 0, false
				}
			}
			i++
		}
		return 0, false
	default:
		j := i
		for j < len(line) && isLiteralByte(line[j]) {
			j++
		}
		switch lit := string(line[i:j]); {
		case lit == "true", lit == "false", lit == "null":
			return j, true
		case j > i && (lit[0] == '-' || '0' <= lit[0] && lit[0] <= '9'):
			return j, true
		}
		return 0, false
	}
}

// skipString returns the end of the JSON string that starts at line[i].
func skipString(line []byte, i int) (int, bool) {
	for j := i + 1; j < len(line); j++ {
		switch c := line[j]; {
		case c == '"':
			return j + 1, true
		case c == '\\':
			j++
		case c < 0x20:
			return 0, false
		}
	}
	return 0, false
}

func isLiteralByte(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || c == '-' || c == '+' || c == '.' || c == 'E'
}

// plainString returns the contents of a JSON string of printable ASCII
// without escapes (encoding/json reads other bytes as other text).
func plainString(val []byte) ([]byte, bool) {
	if len(val) < 2 || val[0] != '"' {
		return nil, false
	}
	s := val[1 : len(val)-1]
	for _, c := range s {
		if c == '\\' || c >= 0x7f {
			return nil, false
		}
	}
	return s, true
}

// smallInt reads a JSON integer of at most 9 digits.
func smallInt(val []byte) (int, bool) {
	neg := len(val) > 0 && val[0] == '-'
	if neg {
		val = val[1:]
	}
	if len(val) == 0 || len(val) > 9 {
		return 0, false
	}
	n := 0
	for _, c := range val {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	if neg {
		n = -n
	}
	return n, true
}

// isHeadKeyFolded reports whether key is one of the keys scanHead reads,
// in other letter case.
func isHeadKeyFolded(key []byte) bool {
	plain := true // lower-case ASCII: folded, it is only itself
	for _, c := range key {
		if 'A' <= c && c <= 'Z' || c >= 0x80 {
			plain = false
			break
		}
	}
	if plain {
		return false
	}
	for _, k := range []string{"type", "id", "reason", "attempt", "retry", "exit_code"} {
		if bytes.EqualFold(key, []byte(k)) {
			return true
		}
	}
	return false
}

// decodeRecord decodes a started or finished record as json.Marshal
// writes it (see scanHead) into rec, which must be zero, several times
// faster than encoding/json; it reports false for any other line (a key it
// does not know, an escape in a string, a null), which the caller then
// decodes with encoding/json. Where it reports true, rec is what
// json.Unmarshal makes of the line (FuzzDecodeRecord checks it).
func decodeRecord(line []byte, rec *Record) bool { return (&decoder{}).decode(line, rec) }

// decoder is decodeRecord with two ways to spend less: texts that repeat
// from record to record (a host, a request, a CPU list) are made once, in
// strs, and with alias the raw values (params, metrics, curves) are the
// line's own bytes, not checked to be valid JSON beyond their brackets and
// strings: for a record that lives until the next line is read (Stream).
type decoder struct {
	alias bool
	strs  map[string]string
}

// decode is decodeRecord.
func (d *decoder) decode(line []byte, rec *Record) bool {
	n := len(line)
	if n < 2 || line[0] != '{' || line[n-1] != '}' {
		return false
	}
	for i := 1; ; {
		if i >= n || line[i] != '"' {
			return false
		}
		k := i + 1
		for k < n && line[k] != '"' {
			if line[k] == '\\' || line[k] < 0x20 {
				return false
			}
			k++
		}
		if k+1 >= n || line[k+1] != ':' {
			return false
		}
		key := line[i+1 : k]
		start := k + 2
		end, ok := skipValue(line, start)
		if !ok || !d.field(rec, key, line[start:end]) {
			return false
		}
		switch {
		case end == n-1:
			return rec.Type == TypeStarted || rec.Type == TypeFinished
		case end < n && line[end] == ',':
			i = end + 1
		default:
			return false
		}
	}
}

// field sets the field of rec that key names from its value val.
func (d *decoder) field(rec *Record, key, val []byte) bool {
	var ok bool
	switch string(key) {
	case "type":
		rec.Type, ok = d.repeated(val)
	case "time":
		ok = val[0] == '"' && rec.Time.UnmarshalJSON(val) == nil
	case "host":
		rec.Host, ok = d.repeated(val)
	case "pid":
		rec.PID, ok = intOf(val)
	case "id":
		rec.ID, ok = textOf(val)
	case "index":
		rec.Index, ok = intOf(val)
	case "origin":
		rec.Origin, ok = textOf(val)
	case "attempt":
		rec.Attempt, ok = intOf(val)
	case "slot":
		var lane int
		if lane, ok = intOf(val); ok {
			rec.Lane = &lane
		}
	case "gpus":
		rec.GPUs, ok = textsOf(val)
	case "cpus":
		rec.CPUs, ok = d.repeated(val)
	case "request":
		rec.Request, ok = d.repeated(val)
	case "stdout":
		rec.Stdout, ok = textOf(val)
	case "stderr":
		rec.Stderr, ok = textOf(val)
	case "params":
		rec.Params, ok = d.raw(val)
	case "exit_code":
		var code int
		if code, ok = intOf(val); ok {
			rec.ExitCode = &code
		}
	case "signal":
		rec.Signal, ok = d.repeated(val)
	case "reason":
		var s string
		s, ok = d.repeated(val)
		rec.Reason = run.Reason(s)
	case "retry":
		rec.Retry, ok = string(val) == "true", string(val) == "true" || string(val) == "false"
	case "error":
		rec.Error, ok = textOf(val)
	case "duration_s":
		rec.Seconds, ok = floatOf(val)
	case "cpu_s":
		rec.CPUSeconds, ok = floatOf(val)
	case "max_rss_bytes":
		rec.MaxRSS, ok = uintOf(val)
	case "tree_rss_peak_bytes":
		rec.TreeRSSPeak, ok = uintOf(val)
	case "gpu_usage":
		ok = val[0] == '[' && json.Unmarshal(val, &rec.GPUUsage) == nil
	case "class":
		var s string
		s, ok = d.repeated(val)
		rec.Class = failure.Class(s)
	case "stderr_tail":
		rec.StderrTail, ok = textsOf(val)
	case "metrics":
		rec.Metrics, ok = d.raw(val)
	case "curves":
		rec.Curves, ok = d.raw(val)
	case "metrics_skipped":
		rec.MetricsSkipped, ok = intOf(val)
	}
	return ok
}

// textOf reads a JSON string without escapes whose bytes are valid UTF-8
// (encoding/json would replace others).
func textOf(val []byte) (string, bool) {
	if len(val) < 2 || val[0] != '"' {
		return "", false
	}
	s := val[1 : len(val)-1]
	if bytes.IndexByte(s, '\\') >= 0 || !utf8.Valid(s) {
		return "", false
	}
	return string(s), true
}

// repeated is textOf for a text that repeats from record to record: made
// once.
func (d *decoder) repeated(val []byte) (string, bool) {
	if len(val) >= 2 && val[0] == '"' {
		if s, ok := d.strs[string(val[1:len(val)-1])]; ok {
			return s, true
		}
	}
	s, ok := textOf(val)
	if ok && len(d.strs) < 4096 {
		if d.strs == nil {
			d.strs = map[string]string{}
		}
		d.strs[s] = s
	}
	return s, ok
}

// raw is rawOf, or with alias the bytes of val.
func (d *decoder) raw(val []byte) (json.RawMessage, bool) {
	if d.alias {
		return val, string(val) != "null"
	}
	return rawOf(val)
}

// textsOf reads a JSON list of strings as textOf does.
func textsOf(val []byte) ([]string, bool) {
	if len(val) < 2 || val[0] != '[' || val[len(val)-1] != ']' {
		return nil, false
	}
	var out []string
	rest := val[1 : len(val)-1]
	for len(rest) > 0 {
		end, ok := skipString(rest, 0)
		if !ok || rest[0] != '"' {
			return nil, false
		}
		s, ok := textOf(rest[:end])
		if !ok {
			return nil, false
		}
		out = append(out, s)
		rest = rest[end:]
		if len(rest) > 0 {
			if rest[0] != ',' || len(rest) == 1 {
				return nil, false
			}
			rest = rest[1:]
		}
	}
	if out == nil {
		out = []string{}
	}
	return out, true
}

// rawOf copies an object or a list as json.RawMessage holds it; a text, a
// number or a literal too, but not null (json leaves a RawMessage of null
// as the four letters; a writer never writes one).
func rawOf(val []byte) (json.RawMessage, bool) {
	if string(val) == "null" || !json.Valid(val) {
		return nil, false
	}
	return append(json.RawMessage(nil), val...), true
}

// intOf reads a JSON integer of at most 9 digits, as JSON writes it (no
// leading zero).
func intOf(val []byte) (int, bool) {
	digits := bytes.TrimPrefix(val, []byte("-"))
	if len(digits) > 1 && digits[0] == '0' {
		return 0, false
	}
	return smallInt(val)
}

// floatOf reads a JSON number.
func floatOf(val []byte) (float64, bool) {
	if !isNumber(val) {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(val), 64)
	return f, err == nil
}

// isNumber reports whether val is a number as JSON's grammar has it:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func isNumber(val []byte) bool {
	i, n := 0, len(val)
	digits := func() bool {
		j := i
		for i < n && '0' <= val[i] && val[i] <= '9' {
			i++
		}
		return i > j
	}
	if i < n && val[i] == '-' {
		i++
	}
	switch {
	case i < n && val[i] == '0':
		i++
	case !digits():
		return false
	}
	if i < n && val[i] == '.' {
		i++
		if !digits() {
			return false
		}
	}
	if i < n && (val[i] == 'e' || val[i] == 'E') {
		i++
		if i < n && (val[i] == '+' || val[i] == '-') {
			i++
		}
		if !digits() {
			return false
		}
	}
	return i == n
}

// uintOf reads a JSON integer that fits a uint64.
func uintOf(val []byte) (uint64, bool) {
	if len(val) == 0 || val[0] < '0' || val[0] > '9' || len(val) > 1 && val[0] == '0' {
		return 0, false
	}
	u, err := strconv.ParseUint(string(val), 10, 64)
	return u, err == nil
}
