package sweep

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"regexp"
	"strings"

	"github.com/nodepack/nodepack/runner/metrics"
	"github.com/nodepack/nodepack/runner/run"
	"go.yaml.in/yaml/v3"
)

// gridSweep is a parameter grid read from YAML, as mlframework writes it: a
// mapping whose keys are parameters, in file order, and whose values are
//
//   - a scalar: a fixed value (gpu: -1);
//   - a sequence: the values to sweep (batchsize: [100, 500]);
//   - a !!python/tuple [start, end] or [start, end, step]: a range, end
//     excluded, step 1 by default, negative steps and floats allowed
//     (epoch: !!python/tuple [5, 20, 5] gives 5, 10, 15).
//
// Scalars are taken as written (-1, 1e-3, and the text of a quoted string).
// Nulls, nested mappings, nested sequences, empty lists and other tags are
// errors naming file:line:col. The combinations are the cartesian product
// in file order, the last key varying fastest. A gridSweep is immutable and
// safe for concurrent use.
type gridSweep struct {
	name  string
	keys  []gridKey
	sizes []int
	total int
}

type gridKey struct {
	name   string
	values valueSet
	swept  bool
}

// yamlLine matches the position in the YAML library's error messages.
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// readGrid reads a grid; name is used in errors ("params.yml:3:9: …").
func readGrid(r io.Reader, name string) (*gridSweep, error) {
	dec := yaml.NewDecoder(r)
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: empty grid", name)
		}
		if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
			return nil, fmt.Errorf("%s:%s: %s", name, m[1], m[2])
		}
		return nil, fmt.Errorf("%s: %s", name, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	var more yaml.Node
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s:%d: a grid is one YAML document", name, max(more.Line, 1))
	}
	at := func(n *yaml.Node, format string, args ...any) error {
		return fmt.Errorf("%s:%d:%d: %s", name, n.Line, n.Column, fmt.Sprintf(format, args...))
	}
	root := resolve(&doc)
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = resolve(root.Content[0])
	}
	if root.Kind != yaml.MappingNode || root.Tag != "!!map" {
		return nil, at(root, "a grid is a mapping of key: value or key: [values]")
	}
	if len(root.Content) == 0 {
		return nil, at(root, "empty grid")
	}
	g := &gridSweep{name: name}
	seen := map[string]bool{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		kn, vn := resolve(root.Content[i]), resolve(root.Content[i+1])
		if kn.Kind != yaml.ScalarNode || kn.Tag == "!!null" {
			return nil, at(kn, "a key must be a plain scalar")
		}
		key := kn.Value
		if err := checkKey(key); err != nil {
			return nil, at(kn, "%v", err)
		}
		if seen[key] {
			return nil, at(kn, "duplicate key %q", key)
		}
		seen[key] = true
		gk, err := gridValues(key, vn, at)
		if err != nil {
			return nil, err
		}
		g.keys = append(g.keys, gk)
		g.sizes = append(g.sizes, gk.values.Len())
	}
	var err error
	if g.total, err = product(g.sizes); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return g, nil
}

// resolve follows aliases.
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n.Kind == yaml.AliasNode && n.Alias != nil && i < 100; i++ {
		n = n.Alias
	}
	return n
}

// gridValues reads the value of one key.
func gridValues(key string, n *yaml.Node, at func(*yaml.Node, string, ...any) error) (gridKey, error) {
	switch n.Kind {
	case yaml.ScalarNode:
		v, err := gridScalar(key, n, at)
		return gridKey{name: key, values: valueSet{list: []string{v}, json: []json.RawMessage{scalarJSON(n)}}}, err
	case yaml.SequenceNode:
		switch n.Tag {
		case "!!python/tuple":
			rng, err := gridRange(key, n, at)
			return gridKey{name: key, values: valueSet{rng: rng}, swept: true}, err
		case "!!seq":
		default:
			return gridKey{}, at(n, "%s: unsupported tag %s", key, n.Tag)
		}
		if len(n.Content) == 0 {
			return gridKey{}, at(n, "%s: empty list: the grid would have no runs", key)
		}
		gk := gridKey{name: key, swept: true}
		for _, item := range n.Content {
			item = resolve(item)
			if item.Kind != yaml.ScalarNode {
				return gridKey{}, at(item, "%s: a swept value must be a scalar, not a list or mapping", key)
			}
			v, err := gridScalar(key, item, at)
			if err != nil {
				return gridKey{}, err
			}
			gk.values.list = append(gk.values.list, v)
			gk.values.json = append(gk.values.json, scalarJSON(item))
		}
		return gk, nil
	}
	return gridKey{}, at(n, "%s: want a value, a list of values or a !!python/tuple range, not a mapping", key)
}

// gridScalar returns the text of a scalar value.
func gridScalar(key string, n *yaml.Node, at func(*yaml.Node, string, ...any) error) (string, error) {
	switch n.Tag {
	case "!!str", "!!int", "!!float", "!!bool", "!!timestamp", "!!binary":
	case "!!null":
		return "", at(n, "%s: no value (write '' for an empty one)", key)
	default:
		return "", at(n, "%s: unsupported tag %s", key, n.Tag)
	}
	if err := checkValue(key, n.Value); err != nil {
		return "", at(n, "%v", err)
	}
	return n.Value, nil
}

// scalarJSON is a YAML scalar as a typed JSON value: a number, a boolean
// or a string, as YAML reads it (0x1f is 31, 1e-3 a number, "1" a
// string). Values JSON has no form for (.inf, a timestamp) become their
// text.
func scalarJSON(n *yaml.Node) json.RawMessage {
	var v any
	switch n.Tag {
	case "!!int", "!!float", "!!bool":
		if err := n.Decode(&v); err == nil {
			if b, err := json.Marshal(v); err == nil {
				return b
			}
		}
	}
	b, _ := json.Marshal(n.Value)
	return b
}

// gridRange reads !!python/tuple [start, end(, step)].
func gridRange(key string, n *yaml.Node, at func(*yaml.Node, string, ...any) error) (*numRange, error) {
	if len(n.Content) != 2 && len(n.Content) != 3 {
		return nil, at(n, "%s: a !!python/tuple range is [start, end] or [start, end, step]", key)
	}
	nums := []number{{isInt: true}, {isInt: true}, {isInt: true, i: 1}}
	for i, item := range n.Content {
		item = resolve(item)
		if item.Kind != yaml.ScalarNode {
			return nil, at(item, "%s: a range bound must be a number", key)
		}
		num, err := parseNumber(item.Value)
		if err != nil {
			return nil, at(item, "%s: %v", key, err)
		}
		nums[i] = num
	}
	rng, err := newNumRange(nums[0], nums[1], nums[2])
	if err != nil {
		return nil, at(n, "%s: %v", key, err)
	}
	return rng, nil
}

// Len returns the number of combinations (runs per rep).
func (g *gridSweep) Len() int { return g.total }

// Runs returns the runs of the grid for a command, combination by
// combination, each repeated opts.Reps times. Each combination appends
// --key=value to the command for every key in file order, except keys the
// command uses as a {key} placeholder: there the value goes in place.
// Values reach the program byte for byte: no shell sees them. Its Origin
// is the file name and the combination's swept values, its Name the swept
// key=value pairs, and its Params every key with its typed value.
//
// The error reports a placeholder that is neither a key nor built in
// ({rep}, {index}, {run_id}, {run_dir}), or malformed braces, as
// "command argv[i]:col". Built-in names win over keys of the same name.
func (g *gridSweep) Runs(command []string, opts expandOptions) (iter.Seq2[run.Run, error], error) {
	index := make(map[string]int, len(g.keys))
	for i, k := range g.keys {
		index[k.name] = i
	}
	cmd, err := parseCommand(command, opts, func(name string) bool { _, ok := index[name]; return ok })
	if err != nil {
		return nil, err
	}
	keys := make([]string, len(g.keys))
	for i, k := range g.keys {
		keys[i] = k.name
	}
	return func(yield func(run.Run, error) bool) {
		x := newExpander(opts)
		values := make([]string, len(g.keys))
		raws := make([]json.RawMessage, len(g.keys))
		e := entry{
			value: func(name string) string { return values[index[name]] },
			match: func(name string) (string, bool) {
				i, ok := index[name]
				if !ok {
					return "", false
				}
				return values[i], true
			},
		}
		odometer(g.sizes, func(digits []int) bool {
			var origin strings.Builder
			origin.WriteString(g.name + ":")
			args := append(make([]argTemplate, 0, len(cmd.args)+len(g.keys)), cmd.args...)
			var swept []string
			for i, k := range g.keys {
				values[i], raws[i] = k.values.At(digits[i]), k.values.JSON(digits[i])
				if k.swept {
					origin.WriteString(" " + k.name + "=" + values[i])
					swept = append(swept, k.name+"="+values[i])
				}
				if cmd.appended(k.name) {
					args = append(args, literalArg("--"+k.name+"="+values[i]))
				}
			}
			e.args, e.origin = args, origin.String()
			e.name, e.params = configName(swept), metrics.Object(keys, raws)
			return x.expand(&e, yield)
		})
	}, nil
}
