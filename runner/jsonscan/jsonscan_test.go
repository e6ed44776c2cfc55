package jsonscan

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestHasControl: a byte below 0x20 anywhere, in any of eight places of a
// word, and nothing else, counts.
func TestHasControl(t *testing.T) {
	for n := range 20 {
		for at := range n {
			for _, c := range []byte{0, 0x1f, 0x20, 0x7f, 0x80, 0xff, '"'} {
				b := []byte(strings.Repeat("a", n))
				b[at] = c
				if got, want := hasControl(b), c < 0x20; got != want {
					t.Fatalf("%q: hasControl %v, want %v", b, got, want)
				}
			}
		}
	}
}

// FuzzEachField: where EachField reads a line, in any syntax, it reads
// the keys and values encoding/json reads, in order (a raw key with an
// escape as it is written), and its values are valid JSON (after NaN and
// Infinity are read as null, in Python's).
func FuzzEachField(f *testing.F) {
	for _, s := range []string{`{"a":1,"b":"x","c":[1,{"d":null}],"e":true}`, `{ "step": 1, "loss": NaN }`, `{}`, ` {"a" : -Infinity } `,
		`{"a":"\u00e9\n"}`, `{"a":01}`, `{"a":1,}`, `{"é":1}`, `{"a":[1 2]}`, `{"a":{"b":1}`, `{"a":1}x`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		for _, s := range []Syntax{Compact, Python, {RawKeys: true}} {
			var keys []string
			var vals []string
			if !s.EachField([]byte(line), func(k, v []byte) bool {
				keys, vals = append(keys, string(k)), append(vals, string(v))
				return true
			}) {
				continue
			}
			want := line
			if s.NonFinite {
				want = nonFinite.Replace(line)
			}
			var m map[string]json.RawMessage
			if err := json.Unmarshal([]byte(want), &m); err != nil {
				t.Fatalf("%+v read %q, which encoding/json refuses (%q): %v", s, line, want, err)
			}
			dec := json.NewDecoder(strings.NewReader(want))
			if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
				t.Fatalf("%q: %v %v", want, tok, err)
			}
			n := 0
			for i := 0; dec.More(); i++ {
				n++
				tok, err := dec.Token()
				if err != nil {
					t.Fatal(err)
				}
				var raw json.RawMessage
				if err := dec.Decode(&raw); err != nil {
					t.Fatal(err)
				}
				key := ""
				if i < len(keys) {
					key = keys[i]
					if s.NonFinite {
						key = nonFinite.Replace(key)
					}
				}
				plain := !strings.Contains(key, "\\") && utf8.ValidString(key)
				if i >= len(keys) || plain && tok.(string) != key {
					t.Fatalf("%+v, %q: key %d is %q to encoding/json, %q here", s, line, i, tok, keys)
				}
				v := vals[i]
				if s.NonFinite {
					v = nonFinite.Replace(v)
				}
				if !json.Valid([]byte(v)) {
					t.Fatalf("%+v, %q: value %q of %q is no JSON", s, line, vals[i], keys[i])
				}
			}
			if n != len(keys) {
				t.Fatalf("%+v, %q: %d keys to encoding/json, %d here", s, line, n, len(keys))
			}
		}
	})
}

// nonFinite reads Python's non-finite numbers as null, for encoding/json.
var nonFinite = strings.NewReplacer("-Infinity", "null", "Infinity", "null", "NaN", "null")
