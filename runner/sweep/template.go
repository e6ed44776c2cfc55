package sweep

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// The placeholders every templated source knows. {rep} and {params_json}
// are content (part of the run's ID); {index}, {run_id} and {run_dir} name
// the run and are filled in after its ID is known.
const (
	placeholderRep        = "rep"
	placeholderParamsJSON = "params_json"
	placeholderIndex      = "index"
	placeholderRunID      = "run_id"
	placeholderRunDir     = "run_dir"
)

var builtinPlaceholders = []string{placeholderRep, placeholderParamsJSON, placeholderIndex, placeholderRunID, placeholderRunDir}

func isBuiltinPlaceholder(name string) bool { return slices.Contains(builtinPlaceholders, name) }

// isNamePlaceholder reports whether name is filled in only once the run's
// ID is known.
func isNamePlaceholder(name string) bool {
	return name == placeholderIndex || name == placeholderRunID || name == placeholderRunDir
}

// piece is literal text or, if placeholder is set, the name of a
// placeholder.
type piece struct {
	text        string
	placeholder bool
}

// argTemplate is one argv element split into literal text and
// placeholders.
type argTemplate []piece

// literalArg is an argument without placeholders.
func literalArg(s string) argTemplate { return argTemplate{{text: s}} }

// columnError is an input error at a byte column (from 1) of some text;
// the caller says which text.
type columnError struct {
	col int
	msg string
}

func (e *columnError) Error() string { return "column " + strconv.Itoa(e.col) + ": " + e.msg }

// parseTemplate splits s into literal text and {name} placeholders:
//
//   - "{{" and "}}" are literal braces;
//   - "${" up to the next "}" is literal, so OmegaConf and shell
//     interpolations (${now:%Y-%m-%d}, ${HOME}) pass through untouched;
//   - {name} is a placeholder; known says which names exist;
//   - any other brace (an unclosed "{", a lone "}", an empty "{}") is an
//     error, as is an unknown name.
//
// Errors are *columnError, with columns counted from 1 in bytes.
func parseTemplate(s string, known func(string) bool) (argTemplate, error) {
	var t argTemplate
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			t = append(t, piece{text: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '$' && i+1 < len(s) && s[i+1] == '{':
			end := strings.IndexByte(s[i+2:], '}')
			if end < 0 {
				lit.WriteString(s[i:])
				i = len(s)
				break
			}
			lit.WriteString(s[i : i+2+end+1])
			i += 2 + end
		case c == '{' && i+1 < len(s) && s[i+1] == '{':
			lit.WriteByte('{')
			i++
		case c == '}' && i+1 < len(s) && s[i+1] == '}':
			lit.WriteByte('}')
			i++
		case c == '{':
			end := strings.IndexAny(s[i+1:], "{}")
			if end < 0 || s[i+1+end] == '{' {
				return nil, &columnError{i + 1, "unclosed { (write {{ for a literal brace)"}
			}
			name := s[i+1 : i+1+end]
			if name == "" {
				return nil, &columnError{i + 1, "empty placeholder {} (write {{}} for literal braces)"}
			}
			if !known(name) {
				return nil, &columnError{i + 1, fmt.Sprintf("unknown placeholder {%s} (write {{ and }} for literal braces)", name)}
			}
			flush()
			t = append(t, piece{text: name, placeholder: true})
			i += 1 + end
		case c == '}':
			return nil, &columnError{i + 1, "unmatched } (write }} for a literal brace)"}
		default:
			lit.WriteByte(c)
		}
	}
	flush()
	if len(t) == 0 {
		t = argTemplate{{}}
	}
	return t, nil
}

// uses reports whether t holds a placeholder for which pred is true.
func (t argTemplate) uses(pred func(string) bool) bool {
	for _, p := range t {
		if p.placeholder && pred(p.text) {
			return true
		}
	}
	return false
}

// appendTo renders t after b; lookup gives each placeholder's value.
func (t argTemplate) appendTo(b []byte, lookup func(string) string) []byte {
	for _, p := range t {
		if p.placeholder {
			b = append(b, lookup(p.text)...)
		} else {
			b = append(b, p.text...)
		}
	}
	return b
}

// render returns t with its placeholders filled in.
func (t argTemplate) render(lookup func(string) string) string {
	if len(t) == 1 && !t[0].placeholder {
		return t[0].text
	}
	return string(t.appendTo(nil, lookup))
}
