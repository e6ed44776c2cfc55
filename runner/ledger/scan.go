package ledger

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/nodepack/nodepack/runner/failure"
	"github.com/nodepack/nodepack/runner/jsonscan"
	"github.com/nodepack/nodepack/runner/run"
)

// A ledger of millions of records is read in about a second by reading
// its lines as json.Marshal writes them (no blanks, plain keys), where
// encoding/json takes seconds and a kilobyte a record. jsonscan.Compact walks
// such a line's keys and values and checks its shape: an object of
// "key":value pairs, strings without control bytes, literals of the right
// letters, brackets that close. A line it declines — another writer's
// spacing, an escape in a value read, a damaged line — is decoded with
// encoding/json, which reads what is valid and names what is not; where
// the fast path reads a line, it reads what encoding/json would
// (FuzzScanHead, FuzzDecodeStarted, FuzzDecodeFinished).

// head is what the fold needs of a line: its type and, for the records
// of an attempt, which run and attempt, and how it ended.
type head struct {
	typ, id, reason, class, signal []byte // within the line
	steps                          []byte // a finished record's steps object, raw; nil without
	attempt                        int
	retry                          bool
	exitCode                       int
	hasExit                        bool // a numeric exit_code
}

// headKeys are the keys head reads.
var headKeys = []string{"type", "id", "reason", "class", "signal", "attempt", "retry", "exit_code"}

// timing is what a timeline needs of a started or finished record
// besides its head: its time and, for a started one, its lane, GPUs,
// CPUs and request.
type timing struct {
	time          time.Time
	lane          *int
	gpus          []string
	cpus, request string
}

// scanHead reads a line's head without decoding the rest; false for a
// line jsonscan declines or whose head values are not plain.
func scanHead(line []byte) (h head, ok bool) { return (*decoder)(nil).scan(line, nil) }

// scan is scanHead and, when t is not nil, in the same pass the line's
// timing, the keys told apart by their length first: the fold of a big
// ledger spends its time here.
func (d *decoder) scan(line []byte, t *timing) (h head, ok bool) {
	fields := 0
	ok = jsonscan.Compact.EachField(line, func(key, val []byte) bool {
		fields++
		var ok bool
		switch {
		case len(key) == 2 && key[0] == 'i' && key[1] == 'd':
			h.id, ok = plainString(val)
		case len(key) == 4 && string(key) == "type":
			h.typ, ok = plainString(val)
		case len(key) == 5 && string(key) == "class":
			h.class, ok = plainString(val)
		case len(key) == 5 && string(key) == "steps":
			h.steps, ok = val, len(val) > 0 && val[0] == '{'
		case len(key) == 5 && string(key) == "retry":
			h.retry, ok = string(val) == "true", string(val) == "true" || string(val) == "false"
		case len(key) == 6 && string(key) == "reason":
			h.reason, ok = plainString(val)
		case len(key) == 6 && string(key) == "signal":
			h.signal, ok = plainString(val)
		case len(key) == 7 && string(key) == "attempt":
			h.attempt, ok = intOf(val)
		case len(key) == 9 && string(key) == "exit_code":
			h.exitCode, ok = intOf(val)
			h.hasExit = ok
		case t != nil:
			ok = d.timingField(t, key, val)
		default:
			// encoding/json matches keys without regard to case: "ID"
			// would be the id to it.
			ok = !isHeadKeyFolded(key)
		}
		return ok
	})
	return h, ok && fields > 0 // {}: encoding/json's to read
}

// timingField reads key into t, when it is one of timing's keys.
func (d *decoder) timingField(t *timing, key, val []byte) bool {
	ok := true
	switch string(key) {
	case "time":
		ok = val[0] == '"' && t.time.UnmarshalJSON(val) == nil
	case "slot":
		t.lane, ok = intPtrOf(val)
	case "gpus":
		t.gpus, ok = textsOf(val)
	case "cpus":
		t.cpus, ok = d.repeated(val)
	case "request":
		t.request, ok = d.repeated(val)
	default:
		// encoding/json matches keys without regard to case.
		ok = !isHeadKeyFolded(key) && !isFoldedKey(key, "time", "slot", "gpus", "cpus", "request")
	}
	return ok
}

// headOf is the head of a line scanHead declines, by encoding/json.
func headOf(line []byte) (head, error) {
	var v struct {
		Type     string          `json:"type"`
		ID       string          `json:"id"`
		Reason   string          `json:"reason"`
		Class    string          `json:"class"`
		Signal   string          `json:"signal"`
		Attempt  int             `json:"attempt"`
		Retry    bool            `json:"retry"`
		ExitCode *int            `json:"exit_code"`
		Steps    json.RawMessage `json:"steps"`
	}
	if err := json.Unmarshal(line, &v); err != nil {
		return head{}, err
	}
	h := head{typ: []byte(v.Type), id: []byte(v.ID), reason: []byte(v.Reason), class: []byte(v.Class), signal: []byte(v.Signal),
		attempt: v.Attempt, retry: v.Retry, hasExit: v.ExitCode != nil, steps: v.Steps}
	if v.ExitCode != nil {
		h.exitCode = *v.ExitCode
	}
	return h, nil
}

// classOf is the failure class of a finished record's head, as ClassOf
// gives it.
func (h *head) classOf() failure.Class {
	fin := Finished{Class: failure.Class(h.class), Signal: string(h.signal), Reason: run.Reason(h.reason)}
	if h.hasExit {
		code := h.exitCode
		fin.ExitCode = &code
	}
	return ClassOf(&fin)
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
func isHeadKeyFolded(key []byte) bool { return isFoldedKey(key, headKeys...) }

// isFoldedKey reports whether key is one of keys in other letter case.
func isFoldedKey(key []byte, keys ...string) bool {
	for _, c := range key {
		if 'A' <= c && c <= 'Z' || c >= 0x80 {
			for _, k := range keys {
				if bytes.EqualFold(key, []byte(k)) {
					return true
				}
			}
			return false
		}
	}
	return false // lower-case ASCII: folded, it is only itself
}

// decoder decodes started and finished records as json.Marshal writes
// them, several times faster than encoding/json; a line it declines (a
// key it does not know, an escape in a string, a null) is the caller's to
// decode with encoding/json. Texts that repeat from record to record (a
// host, a request, a CPU list) are made once.
type decoder struct {
	strs map[string]string
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

// intPtrOf is intOf for a field that is a pointer.
func intPtrOf(val []byte) (*int, bool) {
	n, ok := intOf(val)
	if !ok {
		return nil, false
	}
	return &n, true
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

// textsOf reads a JSON list of strings as textOf does.
func textsOf(val []byte) ([]string, bool) {
	if len(val) < 2 || val[0] != '[' || val[len(val)-1] != ']' {
		return nil, false
	}
	var out []string
	rest := val[1 : len(val)-1]
	for len(rest) > 0 {
		end, ok := jsonscan.SkipString(rest, 0)
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

// rawOf copies a value (jsonscan checked it) as json.RawMessage holds
// it, but not null (json leaves a RawMessage of null as the four letters;
// a writer never writes one).
func rawOf(val []byte) (json.RawMessage, bool) {
	if string(val) == "null" {
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
