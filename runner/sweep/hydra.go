package sweep

import (
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"strings"

	"github.com/nodepack/nodepack/runner/metrics"
	"github.com/nodepack/nodepack/runner/run"
)

// hydraSweep is a command line whose hydraSweep-style sweep overrides expand into
// runs, as hydraSweep's basic sweeper expands them with --multirun: the
// cartesian product of the swept overrides in argument order, the last one
// varying fastest, every other argument left as it is. Each run's argv
// carries one value per swept override (model=convnet, +iteration=0), so a
// hydraSweep app sees what the basic sweeper would have given it, and it is
// started directly, without a shell.
//
// An argument after the first (the program) is an override when it reads
// [~|+|++]KEY=VALUE with KEY a hydraSweep key (letters, digits, _, ., /, @, :;
// not starting with a digit), so --lr=0.1 or a-b=1 are not overrides. Its
// VALUE is a sweep when it is
//
//   - a,b,c — elements separated by top-level commas (outside quotes,
//     brackets, braces, parentheses and ${…} interpolations; "\," escapes);
//   - choice(a,b,c);
//   - range(stop), range(start, stop) or range(start, stop, step), also with
//     start=, stop=, step= — Python's range: stop excluded, negative steps,
//     and floats (see below).
//
// Everything else is a literal value, passed on unchanged: a quoted string
// ('a,b' or "a,b", with the quotes, which the shell passes on when written
// key="'a,b'"), a list [a,b], a dict {a:1}, an interpolation, or another
// function call such as int(3). Elements of a sweep are passed as written,
// with the whitespace around them trimmed and quotes kept (hydraSweep removes
// them when it parses the single override). A range's values are printed
// as Python prints them: 0, 1, 2 for integer ranges; 0.0, 0.25, 1e-05 when
// any bound is a float. Float ranges are exact on the decimals as written.
//
// Not supported, and an error rather than a silent literal: interval(),
// glob() (needs hydraSweep's config groups), shuffle(), sort(), tag(), a sweep
// inside a sweep, and a cast (int, float, str, bool, json_str) of a sweep.
// Unbalanced quotes, brackets or parentheses and empty elements (a,,b) are
// errors too, as they are for hydraSweep.
//
// Arguments may hold the built-in placeholders {rep}, {index}, {run_id} and
// {run_dir} ("${" starts a literal interpolation; "{{" and "}}" are
// braces). A hydraSweep is immutable and safe for concurrent use.
type hydraSweep struct {
	args  []sweepArg
	sizes []int // values of each swept argument, in order
	total int
}

// sweepArg is one argument of a sweep command.
type sweepArg struct {
	fixed  argTemplate   // an argument that is not swept
	prefix string        // an override up to and including '=' (also a fixed one)
	value  string        // a fixed override's value
	values []argTemplate // choice values, or
	rng    *numRange     // range values
}

// override reports whether the argument is an override, swept or not.
func (a *sweepArg) override() bool { return a.prefix != "" }

// key is an override's config key, without its + ++ ~ prefix.
func (a *sweepArg) key() string {
	return strings.TrimLeft(strings.TrimSuffix(a.prefix, "="), "+~")
}

func (a *sweepArg) swept() bool { return a.fixed == nil }

func (a *sweepArg) len() int {
	if a.rng != nil {
		return a.rng.Len()
	}
	return len(a.values)
}

func (a *sweepArg) at(i int) argTemplate {
	if a.rng != nil {
		return argTemplate{{text: a.prefix + a.rng.At(i)}}
	}
	return append(argTemplate{{text: a.prefix}}, a.values[i]...)
}

// parseHydra parses a command line (program first) with sweep overrides.
// An error names the argument as argv[i] and the byte column in it.
func parseHydra(args []string) (*hydraSweep, error) {
	if len(args) == 0 {
		return nil, errors.New("sweep: no command")
	}
	s := &hydraSweep{args: make([]sweepArg, len(args))}
	for i, a := range args {
		arg, err := parseSweepArg(a, i == 0)
		if err != nil {
			var ce *columnError
			if errors.As(err, &ce) {
				return nil, fmt.Errorf("sweep argv[%d]:%d: %s (in %q)", i, ce.col, ce.msg, a)
			}
			return nil, fmt.Errorf("sweep argv[%d]: %w (in %q)", i, err, a)
		}
		s.args[i] = arg
		if arg.swept() {
			s.sizes = append(s.sizes, arg.len())
		}
	}
	var err error
	if s.total, err = product(s.sizes); err != nil {
		return nil, fmt.Errorf("sweep: %w", err)
	}
	return s, nil
}

// Len returns the number of combinations (runs per rep).
func (s *hydraSweep) Len() int { return s.total }

// Runs returns the runs of the sweep in order: combination by combination,
// each repeated opts.Reps times. Its Origin lists the combination's swept
// overrides, its Name the same as key=value pairs, and its Params every
// override's key with its value, typed as Hydra would read it (see
// [hydraJSON]). The only error is a {run_dir} without opts.OutputDir.
func (s *hydraSweep) Runs(opts expandOptions) (iter.Seq2[run.Run, error], error) {
	for i, a := range s.args {
		if a.fixed != nil {
			if err := checkRunDir(a.fixed, opts); err != nil {
				return nil, fmt.Errorf("sweep argv[%d]: %w", i, err)
			}
			continue
		}
		for _, v := range a.values {
			if err := checkRunDir(v, opts); err != nil {
				return nil, fmt.Errorf("sweep argv[%d]: %w", i, err)
			}
		}
	}
	var keys []string
	for i := range s.args {
		if a := &s.args[i]; a.override() {
			keys = append(keys, a.key())
		}
	}
	return func(yield func(run.Run, error) bool) {
		x := newExpander(opts)
		odometer(s.sizes, func(digits []int) bool {
			e := entry{args: make([]argTemplate, len(s.args)), value: func(string) string { return "" }}
			var values map[string]string // for Rules
			if len(opts.Rules) > 0 {
				values = make(map[string]string, len(keys))
				e.match = func(key string) (string, bool) { v, ok := values[key]; return v, ok }
			}
			var origin strings.Builder
			origin.WriteString("sweep:")
			var swept []string
			raws := make([]json.RawMessage, 0, len(keys))
			d := 0
			for i := range s.args {
				a := &s.args[i]
				if !a.swept() {
					e.args[i] = a.fixed
					if a.override() {
						raws = append(raws, hydraJSON(a.value))
						if values != nil {
							values[a.key()] = a.value
						}
					}
					continue
				}
				e.args[i] = a.at(digits[d])
				d++
				text := templateText(e.args[i])
				origin.WriteString(" " + text)
				value := strings.TrimPrefix(text, a.prefix)
				swept = append(swept, a.key()+"="+value)
				if values != nil {
					values[a.key()] = value
				}
				raws = append(raws, hydraJSON(value))
			}
			e.origin = origin.String()
			e.name, e.params = configName(swept), metrics.Object(keys, raws)
			return x.expand(&e, yield)
		})
	}, nil
}

// Template returns the sweep's command with each swept value written as
// {sweep}: the same for a sweep that only gained or lost values.
func (s *hydraSweep) Template() []string {
	out := make([]string, len(s.args))
	for i := range s.args {
		a := &s.args[i]
		if a.swept() {
			out[i] = a.prefix + "{sweep}"
		} else {
			out[i] = templateText(a.fixed)
		}
	}
	return out
}

// templateText writes a template back as text, placeholders in braces.
func templateText(t argTemplate) string {
	var b strings.Builder
	for _, p := range t {
		if p.placeholder {
			b.WriteString("{" + p.text + "}")
		} else {
			b.WriteString(p.text)
		}
	}
	return b.String()
}

// hydraJSON types an override's value as Hydra's grammar reads it: an
// integer or a float is a number, true and false (any case) a boolean,
// null a null, a quoted string its text; anything else, lists and dicts
// included, is a string as written.
func hydraJSON(v string) json.RawMessage {
	t := strings.TrimSpace(v)
	plain := strings.ReplaceAll(t, "_", "")
	if n, err := parseNumber(t); err == nil {
		if n.isInt {
			return json.RawMessage(strconv.FormatInt(n.i, 10))
		}
		if f, err := strconv.ParseFloat(plain, 64); err == nil {
			if b, err := json.Marshal(f); err == nil {
				return b
			}
		}
	}
	switch strings.ToLower(t) {
	case "true", "false":
		return json.RawMessage(strings.ToLower(t))
	case "null":
		return json.RawMessage("null")
	}
	if len(t) >= 2 && (t[0] == '\'' || t[0] == '"') && t[len(t)-1] == t[0] {
		t = t[1 : len(t)-1]
	}
	b, _ := json.Marshal(t)
	return b
}

// parseSweepArg parses one argument; program says it is argv[0].
func parseSweepArg(a string, program bool) (sweepArg, error) {
	builtin := func(name string) bool { return isBuiltinPlaceholder(name) }
	prefix, value, ok := splitOverride(a)
	if program || !ok {
		t, err := parseTemplate(a, builtin)
		return sweepArg{fixed: t}, err
	}
	fixed := func() (sweepArg, error) {
		t, err := parseTemplate(a, builtin)
		return sweepArg{fixed: t, prefix: prefix, value: value}, err
	}
	base := len(prefix) // columns of the value start after the prefix
	elems, err := sweepElements(value)
	if err != nil {
		return sweepArg{}, shiftColumn(err, base)
	}
	if len(elems) == 1 {
		el := elems[0]
		name, inner, innerOff, isCall := splitCall(el.text)
		switch {
		case !isCall:
		case name == "choice":
			args, err := sweepElements(inner)
			if err != nil {
				return sweepArg{}, shiftColumn(err, base+el.off+innerOff)
			}
			if len(args) == 1 && args[0].text == "" {
				return sweepArg{}, &columnError{base + el.off + 1, "choice() needs at least one value"}
			}
			for i := range args {
				args[i].off += el.off + innerOff
			}
			return choiceArg(prefix, args, base)
		case name == "range":
			rng, err := parseRange(inner)
			if err != nil {
				return sweepArg{}, shiftColumn(err, base+el.off+innerOff)
			}
			return sweepArg{prefix: prefix, rng: rng}, nil
		case name == "interval" || name == "glob" || name == "shuffle" || name == "sort" || name == "tag":
			return sweepArg{}, &columnError{base + el.off + 1, name + "() is not supported: nodepack expands only a,b,c, choice() and range()"}
		case isCast(name) && containsSweep(inner):
			return sweepArg{}, &columnError{base + el.off + 1, "a cast of a sweep is not supported: cast each value, e.g. int(1),int(2)"}
		}
		return fixed()
	}
	return choiceArg(prefix, elems, base)
}

// choiceArg builds a swept argument from its elements.
func choiceArg(prefix string, elems []element, base int) (sweepArg, error) {
	arg := sweepArg{prefix: prefix, values: make([]argTemplate, len(elems))}
	for i, el := range elems {
		if el.text == "" {
			return sweepArg{}, &columnError{base + el.off + 1, "empty value in a sweep"}
		}
		if name, _, _, ok := splitCall(el.text); ok && (name == "choice" || name == "range" || name == "interval" || name == "glob") {
			return sweepArg{}, &columnError{base + el.off + 1, "a sweep inside a sweep is not supported"}
		}
		t, err := parseTemplate(el.text, isBuiltinPlaceholder)
		if err != nil {
			return sweepArg{}, shiftColumn(err, base+el.off)
		}
		arg.values[i] = t
	}
	return arg, nil
}

// splitOverride splits [~|+|++]KEY=VALUE after the '='; ok is false when a
// is not an override.
func splitOverride(a string) (prefix, value string, ok bool) {
	j := 0
	switch {
	case strings.HasPrefix(a, "++"):
		j = 2
	case strings.HasPrefix(a, "+"), strings.HasPrefix(a, "~"):
		j = 1
	}
	eq := strings.IndexByte(a[j:], '=')
	if eq <= 0 || !hydraKey(a[j:j+eq]) {
		return "", "", false
	}
	return a[:j+eq+1], a[j+eq+1:], true
}

// hydraKey reports whether k can be the key of a Hydra override: a config
// path (db.user, layers.0), a group (hydra/launcher) with an optional
// @package.
func hydraKey(k string) bool {
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '.' || c == '/' || c == '@' || c == ':'):
		default:
			return false
		}
	}
	return k != ""
}

// element is one comma-separated element of a value, trimmed, with its
// byte offset in the value.
type element struct {
	text string
	off  int
}

// sweepElements splits a Hydra value at its top-level commas and checks
// that quotes, brackets, braces, parentheses and ${…} are balanced.
// Columns in errors count from 1 within v.
func sweepElements(v string) ([]element, error) {
	type open struct {
		c   byte
		pos int
	}
	var stack []open
	var elems []element
	start := 0
	cut := func(end int) {
		text := v[start:end]
		trimmed := strings.TrimLeft(text, " \t")
		off := start + len(text) - len(trimmed)
		elems = append(elems, element{strings.TrimRight(trimmed, " \t"), off})
	}
	for i := 0; i < len(v); i++ {
		switch c := v[i]; c {
		case '\\':
			if i+1 < len(v) && strings.IndexByte("\\, \t", v[i+1]) >= 0 {
				i++
			}
		case '\'', '"':
			j := i + 1
			for ; j < len(v); j++ {
				if v[j] == '\\' && j+1 < len(v) && v[j+1] == c {
					j++
					continue
				}
				if v[j] == c {
					break
				}
			}
			if j >= len(v) {
				return nil, &columnError{i + 1, "unterminated quote " + string(c)}
			}
			i = j
		case '$':
			if i+1 < len(v) && v[i+1] == '{' {
				end := strings.IndexByte(v[i+2:], '}')
				if end < 0 {
					return nil, &columnError{i + 1, "unterminated ${"}
				}
				i += 2 + end
			}
		case '(', '[', '{':
			stack = append(stack, open{c, i})
		case ')', ']', '}':
			want := map[byte]byte{')': '(', ']': '[', '}': '{'}[c]
			if len(stack) == 0 || stack[len(stack)-1].c != want {
				return nil, &columnError{i + 1, "unmatched " + string(c)}
			}
			stack = stack[:len(stack)-1]
		case ',':
			if len(stack) == 0 {
				cut(i)
				start = i + 1
			}
		}
	}
	if len(stack) > 0 {
		o := stack[len(stack)-1]
		return nil, &columnError{o.pos + 1, "unclosed " + string(o.c)}
	}
	cut(len(v))
	return elems, nil
}

// splitCall splits "name(inner)" (spaces allowed before the parenthesis)
// when the parenthesis after name closes at the end of s; innerOff is the
// offset of inner in s.
func splitCall(s string) (name, inner string, innerOff int, ok bool) {
	i := 0
	for i < len(s) && (s[i] == '_' || 'a' <= s[i] && s[i] <= 'z' || 'A' <= s[i] && s[i] <= 'Z' || i > 0 && '0' <= s[i] && s[i] <= '9') {
		i++
	}
	name = s[:i]
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	if name == "" || i >= len(s) || s[i] != '(' || s[len(s)-1] != ')' {
		return "", "", 0, false
	}
	inner = s[i+1 : len(s)-1]
	if _, err := sweepElements(inner); err != nil {
		return "", "", 0, false // the first '(' closes before the end: f(a)(b)
	}
	return name, inner, i + 1, true
}

func isCast(name string) bool {
	switch name {
	case "int", "float", "str", "bool", "json_str":
		return true
	}
	return false
}

// containsSweep reports whether the argument of a cast is a sweep.
func containsSweep(inner string) bool {
	elems, err := sweepElements(inner)
	switch {
	case err != nil:
		return false
	case len(elems) > 1:
		return true
	}
	name, _, _, ok := splitCall(elems[0].text)
	return ok && (name == "choice" || name == "range" || name == "interval" || name == "glob")
}

// parseRange parses the arguments of range(): stop; start, stop; or start,
// stop, step; positionally or as start=, stop=, step=.
func parseRange(inner string) (*numRange, error) {
	elems, err := sweepElements(inner)
	if err != nil {
		return nil, err
	}
	const usage = "want range(stop), range(start, stop) or range(start, stop, step)"
	if len(elems) > 3 || len(elems) == 1 && elems[0].text == "" {
		return nil, &columnError{1, usage}
	}
	var got [3]*number // start, stop, step
	names := []string{"start", "stop", "step"}
	named := false
	for i, el := range elems {
		slot := i
		text := el.text
		if k, v, ok := strings.Cut(text, "="); ok {
			k = strings.TrimSpace(k)
			slot = -1
			for j, n := range names {
				if k == n {
					slot = j
				}
			}
			if slot < 0 {
				return nil, &columnError{el.off + 1, fmt.Sprintf("range has no argument %q; %s", k, usage)}
			}
			named, text = true, v
		} else if named {
			return nil, &columnError{el.off + 1, "a positional argument after a named one; " + usage}
		} else if len(elems) == 1 {
			slot = 1 // range(stop)
		}
		if got[slot] != nil {
			return nil, &columnError{el.off + 1, "range " + names[slot] + " given twice"}
		}
		n, err := parseNumber(text)
		if err != nil {
			return nil, &columnError{el.off + 1, "range: " + err.Error()}
		}
		got[slot] = &n
	}
	if got[1] == nil {
		return nil, &columnError{1, "range needs a stop; " + usage}
	}
	start, step := number{isInt: true}, number{isInt: true, i: 1}
	if got[0] != nil {
		start = *got[0]
	}
	if got[2] != nil {
		step = *got[2]
	}
	rng, err := newNumRange(start, *got[1], step)
	if err != nil {
		return nil, &columnError{1, "range(" + inner + "): " + err.Error()}
	}
	return rng, nil
}

// shiftColumn moves a columnError by off bytes.
func shiftColumn(err error, off int) error {
	var ce *columnError
	if errors.As(err, &ce) {
		return &columnError{ce.col + off, ce.msg}
	}
	return err
}
