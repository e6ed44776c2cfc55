package ledger

import "bytes"

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
