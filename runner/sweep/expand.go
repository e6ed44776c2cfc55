package sweep

import (
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"strings"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/runner/run"
)

// maxRuns bounds the runs one sweep or grid may describe, so that a typo
// such as range(0, 1e12) is an input error rather than a hang.
const maxRuns = 1_000_000_000

// ErrChanged is wrapped by the error of a run whose source line or entry
// changed after the sweep checked it: the source file was edited while the
// sweep ran. The runs before it run; a rerun checks the file as it is.
var ErrChanged = errors.New("changed since the sweep checked it (the file was edited while the sweep ran): rerun to run it as it is now")

// expandOptions say how a source turns its entries (task-file lines, sweep
// combinations, grid combinations, params lines) into runs. The zero value
// runs every entry once, keeps every shard, and makes {run_dir} an error.
type expandOptions struct {
	// Reps runs every entry Reps times in a row, as reps 0 … Reps-1
	// (NODEPACK_REP, the {rep} placeholder, run.Run.Rep). Zero or less means 1.
	// Rep 0 has the ID the entry has without Reps, so raising Reps later
	// keeps the IDs of the runs already done.
	Reps int
	// Shard keeps only the runs of one shard. Positions (run.Run.Index) and IDs
	// are those of the whole source, so every shard agrees on them.
	Shard Shard
	// OutputDir is the output directory the runs will have
	// (Options.OutputDir), for the {run_dir} placeholder: the directory
	// the runner gives a run, NODEPACK_RUN_DIR. Empty makes {run_dir} an
	// error.
	OutputDir string
	// Request is what every run asks for unless it says otherwise: the
	// base a params line's own request is read over (see readParams).
	Request pack.Request
	// GPUMemory is what Spec.GPUMemory says, for the requests read over
	// Request.
	GPUMemory uint64
	// Rules give requests to the runs of a sweep, grid or params file by
	// their values; the first that matches a run sets its
	// run.Run.Request, unless the run has one of its own (a params
	// line's "nodepack" object).
	Rules []requestRule

	hits []int                // per rule, the runs it matched; counted when not nil
	memo idMemo               // the IDs of every run, from a walk before; nil: hash them
	skip func(id string) bool // runs of the shard to leave out, when not nil
	runs int                  // how many runs the source has, when known: the ID table is sized for them
	// nameless leaves run.Run.Name empty where it would be made from the
	// run's line: Scan's walk, which checks and counts, never needs it.
	nameless bool
}

// entry is what a source hands the expander: one line or combination,
// before repetition.
type entry struct {
	args   []argTemplate       // the templated argv; nil when plain is the argv
	plain  []string            // a literal argv (task files)
	value  func(string) string // values of the source's own placeholders
	env    []string            // environment the source adds (part of the ID)
	dir    string
	origin string
	name   string // run.Run.Name
	// describe, if not nil, gives origin and name when a run of the entry
	// is yielded: a task line's are made only then.
	describe interface {
		origin() string
		name() string
	}
	params json.RawMessage // run.Run.Params

	match   func(key string) (string, bool) // the entry's parameter values, for Rules; nil for none
	request *pack.Request                   // the entry's own request; nil for none
}

// expander numbers, names, repeats and shards the entries of one source.
// It is not safe for concurrent use.
type expander struct {
	opts  expandOptions
	ids   idSet
	next  int    // position of the next run
	asked []bool // skipsNext's answers for the next entry's reps, in order
}

func newExpander(opts expandOptions) *expander {
	x := &expander{opts: opts}
	x.ids.reserve(opts.runs)
	return x
}

// skipsNext reports whether the next entry's runs are all left out, when
// the memo says so without making the entry: each of its reps outside the
// shard or skipped. It then counts them, and the caller makes nothing;
// else expand takes the answers skip gave here, so that skip is asked once
// a run, in order.
func (x *expander) skipsNext() bool {
	m, reps := x.opts.memo, max(x.opts.Reps, 1)
	x.asked = x.asked[:0]
	if x.next+reps > len(m) || x.opts.skip == nil {
		return false
	}
	for rep := range reps {
		i := x.next + rep
		if !x.opts.Shard.Contains(i) {
			x.asked = append(x.asked, true)
			continue
		}
		skip := x.opts.skip(m.id(i))
		x.asked = append(x.asked, skip)
		if !skip {
			return false
		}
	}
	x.next += reps
	x.asked = x.asked[:0]
	return true
}

// expand yields the runs of e that belong to the shard; it returns false
// when yield asked to stop or an error was yielded.
func (x *expander) expand(e *entry, yield func(run.Run, error) bool) bool {
	defer func() { x.asked = x.asked[:0] }()
	request := e.request
	if request == nil && e.match != nil {
		for i := range x.opts.Rules {
			if r := &x.opts.Rules[i]; r.matches(e.match) {
				request = &r.Request
				if x.opts.hits != nil {
					x.opts.hits[i]++
				}
				break
			}
		}
	}
	for rep := range max(x.opts.Reps, 1) {
		index := x.next
		x.next++
		args := e.plain
		names := false
		if e.args != nil {
			// The ID hashes the argv with {index}, {run_id} and {run_dir}
			// left as they are: they name the run, they are not its content.
			args = make([]string, len(e.args))
			for i, t := range e.args {
				args[i] = t.render(func(name string) string {
					switch {
					case name == placeholderRep:
						return strconv.Itoa(rep)
					case name == placeholderParamsJSON:
						return e.paramsText()
					case isNamePlaceholder(name):
						names = true
						return "{" + name + "}"
					}
					return e.value(name)
				})
			}
		}
		var id string
		memo := index < len(x.opts.memo)
		if memo {
			id = x.opts.memo.id(index) // walked before: no hash, no table
		} else {
			id = x.ids.nextKey(args, e.env, rep)
		}
		skipped := !x.opts.Shard.Contains(index)
		switch {
		case rep < len(x.asked):
			skipped = x.asked[rep] // skipsNext asked already
		case !skipped && x.opts.skip != nil:
			skipped = x.opts.skip(id)
		}
		if skipped {
			continue
		}
		if e.describe != nil {
			e.origin = e.describe.origin()
			if !x.opts.nameless {
				e.name = e.describe.name()
			}
			e.describe = nil
		}
		// A run that will start is hashed again: its ID must be what it
		// runs, also when its file was edited since the walk the memo is
		// from (a regular file is read where it is).
		if memo && x.ids.key(args, e.env, rep) != x.opts.memo.key(index) {
			yield(run.Run{}, fmt.Errorf("%s: %w", e.origin, ErrChanged))
			return false
		}
		if names {
			for i, t := range e.args {
				args[i] = t.render(func(name string) string {
					switch name {
					case placeholderRep:
						return strconv.Itoa(rep)
					case placeholderParamsJSON:
						return e.paramsText()
					case placeholderIndex:
						return strconv.Itoa(index)
					case placeholderRunID:
						return id
					case placeholderRunDir:
						return run.Dir(x.opts.OutputDir, run.Run{ID: id, Name: e.name})
					}
					return e.value(name)
				})
			}
		}
		if err := checkArgv(args); err != nil {
			yield(run.Run{}, fmt.Errorf("%s: %w", e.origin, err))
			return false
		}
		r := run.Run{
			ID:      id,
			Index:   index,
			Rep:     rep,
			Args:    args,
			Env:     repEnv(e.env, rep),
			Dir:     e.dir,
			Origin:  e.origin,
			Name:    e.name,
			Params:  e.params,
			Request: request,
		}
		if !yield(r, nil) {
			return false
		}
	}
	return true
}

// repEnv returns env with NODEPACK_REP for rep appended. Without env, for
// the first reps, it is a shared slice with no room to append into, so
// that runs streaming by the million do not each allocate their own.
func repEnv(env []string, rep int) []string {
	if len(env) == 0 && rep < len(repOnly) {
		return repOnly[rep]
	}
	return append(slices.Clip(env), "NODEPACK_REP="+strconv.Itoa(rep))
}

var repOnly = func() [][]string {
	envs := make([][]string, 16)
	for rep := range envs {
		envs[rep] = []string{"NODEPACK_REP=" + strconv.Itoa(rep)}
	}
	return envs
}()

// paramsText is the {params_json} placeholder's value: the entry's
// parameters as one compact JSON object.
func (e *entry) paramsText() string {
	if e.params == nil {
		return "{}"
	}
	return string(e.params)
}

// configName names a configuration by its key=value pairs, for run.Run.Name.
func configName(pairs []string) string {
	return run.SafeName(strings.Join(pairs, ","), run.MaxNameBytes)
}

// checkArgv rejects an argv the kernel would refuse to start.
func checkArgv(args []string) error {
	if len(args) == 0 {
		return errors.New("empty command")
	}
	for i, a := range args {
		if len(a) > maxLineBytes {
			return fmt.Errorf("argv[%d] is longer than %d bytes", i, maxLineBytes)
		}
		if strings.IndexByte(a, 0) >= 0 {
			return fmt.Errorf("argv[%d] contains a NUL byte", i)
		}
	}
	return nil
}

// expand repeats and shards the runs of another source, typically
// readTaskFile, as expandOptions say. Each run's argv, Env, Dir and
// Origin are kept; its ID is derived again from its argv, Env and rep (so
// with one rep and no Env it is the ID readTaskFile gave it); its Index is
// its position among all repeated runs; and its Env gains NODEPACK_REP.
// The sequence is consumed lazily and stops at the first error.
func expand(runs iter.Seq2[run.Run, error], opts expandOptions) iter.Seq2[run.Run, error] {
	return func(yield func(run.Run, error) bool) {
		x := newExpander(opts)
		for r, err := range runs {
			if err != nil {
				yield(run.Run{}, err)
				return
			}
			e := entry{plain: r.Args, env: r.Env, dir: r.Dir, origin: r.Origin, name: r.Name, params: r.Params, request: r.Request}
			if !x.expand(&e, yield) {
				return
			}
		}
	}
}

// parseCommand parses the templated command of a grid or params source.
// keys says which names besides the built-in ones are placeholders; used
// collects the keys the command refers to. A command that uses
// {params_json} takes all its parameters from it: every key counts as used,
// so none is appended as --key=value.
func parseCommand(command []string, opts expandOptions, keys func(string) bool) (*commandTemplate, error) {
	if len(command) == 0 {
		return nil, errors.New("no command")
	}
	c := &commandTemplate{used: make(map[string]bool), args: make([]argTemplate, len(command))}
	for i, a := range command {
		t, err := parseTemplate(a, func(name string) bool { return isBuiltinPlaceholder(name) || keys(name) })
		if err != nil {
			return nil, commandError(i, a, err)
		}
		if err := checkRunDir(t, opts); err != nil {
			return nil, commandError(i, a, err)
		}
		for _, p := range t {
			switch {
			case !p.placeholder:
			case p.text == placeholderParamsJSON:
				c.allParams = true
			case !isBuiltinPlaceholder(p.text):
				c.used[p.text] = true
			}
		}
		c.args[i] = t
	}
	return c, nil
}

// commandTemplate is the parsed command of a grid or params source.
type commandTemplate struct {
	args      []argTemplate
	used      map[string]bool // keys the command uses as {key}
	allParams bool            // the command uses {params_json}
}

// appended says whether key goes after the command as --key=value.
func (c *commandTemplate) appended(key string) bool { return !c.allParams && !c.used[key] }

// checkRunDir reports a {run_dir} that cannot be filled in.
func checkRunDir(t argTemplate, opts expandOptions) error {
	if opts.OutputDir == "" && t.uses(func(name string) bool { return name == placeholderRunDir }) {
		return errors.New("{run_dir} needs an output directory")
	}
	return nil
}

// commandError places err in argument i of the command.
func commandError(i int, arg string, err error) error {
	if ce, ok := err.(*columnError); ok {
		return fmt.Errorf("command argv[%d]:%d: %s (in %q)", i, ce.col, ce.msg, arg)
	}
	return fmt.Errorf("command argv[%d]: %w (in %q)", i, err, arg)
}

// checkKey rejects a grid or params key that cannot become --key=value or
// a placeholder.
func checkKey(key string) error {
	switch {
	case key == "":
		return errors.New("empty key")
	case strings.ContainsAny(key, "={}\x00"):
		return fmt.Errorf("key %q: a key must not contain =, {, } or NUL", key)
	}
	return nil
}

// checkValue rejects a value that cannot be part of an argv element.
func checkValue(key, value string) error {
	if strings.IndexByte(value, 0) >= 0 {
		return fmt.Errorf("%s: value contains a NUL byte", key)
	}
	if len(value) > maxLineBytes {
		return fmt.Errorf("%s: value is longer than %d bytes", key, maxLineBytes)
	}
	return nil
}

// product returns the product of sizes, or an error past maxRuns.
func product(sizes []int) (int, error) {
	n := 1
	for _, s := range sizes {
		if s == 0 {
			return 0, nil
		}
		if n > maxRuns/s {
			return 0, fmt.Errorf("more than %d runs", maxRuns)
		}
		n *= s
	}
	return n, nil
}

// odometer steps through the cartesian product of lists of the given
// sizes, the last list fastest (like itertools.product). It calls f with
// the current choice of each list, and stops when f returns false.
func odometer(sizes []int, f func(digits []int) bool) {
	for _, s := range sizes {
		if s == 0 {
			return
		}
	}
	digits := make([]int, len(sizes))
	for {
		if !f(digits) {
			return
		}
		i := len(digits) - 1
		for ; i >= 0; i-- {
			digits[i]++
			if digits[i] < sizes[i] {
				break
			}
			digits[i] = 0
		}
		if i < 0 {
			return
		}
	}
}
