// Package flagvalue reads the grammars of nodepack's flags into the
// library's types: each constructor returns a pflag.Value bound to where
// its value goes (a retry budget, a failure or metric pattern, a pruning
// policy, GPUs and sizes per run, a signal, failure classes), and
// SplitWords reads a command prefix as a shell splits its words. The
// errors say what the grammar wants; the command names the flag, except
// where the grammar is one flag's own (--env).
package flagvalue

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/runner/failure"
	"github.com/nodepack/nodepack/runner/metrics"
	"github.com/nodepack/nodepack/runner/schedule"
	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"
)

// Metrics is --metric NAME=REGEX, repeatable, into p.
func Metrics(p *[]metrics.Pattern) pflag.Value { return metricFlag{p} }

// Prune is --prune SPEC (schedule.ParsePrune) into p, and its every= into
// every.
func Prune(p **schedule.Prune, every *time.Duration) pflag.Value { return pruneFlag{p, every} }

// RetryBudgets is CLASS=N[,CLASS=N], repeatable, into m.
func RetryBudgets(m *map[failure.Class]int) pflag.Value { return retryBudgets{m} }

// FailPatterns is CLASS=REGEX, repeatable, into p.
func FailPatterns(p *[]failure.Pattern) pflag.Value { return failPatterns{p} }

// GPUs is a run's GPUs, a whole number or a share, into o.
func GPUs(o *pack.Options) pflag.Value { return gpusValue{o} }

// RunsPerGPU is K runs per GPU, or auto, into o.
func RunsPerGPU(o *pack.Options) pflag.Value { return runsPerGPUValue{o} }

// GPUMem is a run's GPU memory, a size or auto, into o.
func GPUMem(o *pack.Options) pflag.Value { return gpuMemValue{o} }

// Size is a size in bytes (32GiB) into b.
func Size(b *uint64) pflag.Value { return sizeValue{b} }

// Classes is failure classes, comma-separated and repeatable, into p.
func Classes(p *[]failure.Class) pflag.Value { return classList{p} }

// Signal is a signal a run can catch, by its name (USR1 or SIGUSR1), into
// sig.
func Signal(sig *syscall.Signal) pflag.Value { return signalValue{sig} }

// SplitWords splits a command prefix the way a POSIX shell splits words,
// without expanding anything: whitespace separates words, single quotes
// keep everything literally, double quotes keep everything but \" and \\,
// and a backslash outside quotes escapes the next character.
func SplitWords(s string) ([]string, error) {
	var words []string
	var word strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				words = append(words, word.String())
				word.Reset()
				inWord = false
			}
		case c == '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return nil, errors.New("unterminated single quote")
			}
			word.WriteString(s[i+1 : i+1+end])
			i += end + 1
			inWord = true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && (s[i+1] == '"' || s[i+1] == '\\') {
					i++
				}
				word.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, errors.New("unterminated double quote")
			}
			inWord = true
		case c == '\\':
			if i+1 >= len(s) {
				return nil, errors.New("trailing backslash")
			}
			i++
			word.WriteByte(s[i])
			inWord = true
		default:
			word.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, word.String())
	}
	if len(words) == 0 {
		return nil, errors.New("empty prefix")
	}
	return words, nil
}

// MetricPatterns reads the --metric flags, NAME=REGEX each.
func MetricPatterns(flags []string) ([]metrics.Pattern, error) {
	var ps []metrics.Pattern
	for _, f := range flags {
		p, err := metrics.ParsePattern(f)
		if err != nil {
			return nil, err
		}
		ps = append(ps, p)
	}
	return ps, nil
}

// metricFlag is a repeatable --metric NAME=REGEX, read into patterns.
type metricFlag struct{ p *[]metrics.Pattern }

func (f metricFlag) String() string {
	if f.p == nil {
		return ""
	}
	var parts []string
	for _, p := range *f.p {
		parts = append(parts, p.Name+"="+p.Regexp.String())
	}
	return strings.Join(parts, " ")
}

func (f metricFlag) Type() string { return "NAME=REGEX" }

func (f metricFlag) Set(s string) error {
	p, err := metrics.ParsePattern(s)
	if err != nil {
		return err
	}
	*f.p = append(*f.p, p)
	return nil
}

// pruneFlag is --prune METRIC[:min|max][,eta=N][,first=STEP][,max=STEP][,rule=forecast|asha|median|curve][,every=D].
type pruneFlag struct {
	p        **schedule.Prune
	interval *time.Duration
}

func (f pruneFlag) String() string {
	if f.p == nil || *f.p == nil {
		return ""
	}
	p := *f.p
	return fmt.Sprintf("%s:%s,eta=%d,first=%v,max=%v", p.Metric, map[bool]string{true: "max", false: "min"}[p.Max], p.Eta, p.FirstStep, p.MaxStep)
}

func (f pruneFlag) Type() string { return "METRIC[:min|max][,KEY=VALUE]" }

func (f pruneFlag) Set(s string) error {
	p, every, err := schedule.ParsePrune(s)
	if err != nil {
		return err
	}
	if every > 0 {
		*f.interval = every
	}
	*f.p = &p
	return nil
}

// retryBudgets is --retry: CLASS=N[,CLASS=N], repeatable, into
// execute.Options.Retry.
type retryBudgets struct{ m *map[failure.Class]int }

func (r retryBudgets) String() string {
	if r.m == nil || len(*r.m) == 0 {
		return ""
	}
	var parts []string
	for _, c := range failure.Classes {
		if n, ok := (*r.m)[c]; ok {
			parts = append(parts, fmt.Sprintf("%s=%d", c, n))
		}
	}
	return strings.Join(parts, ",")
}

func (r retryBudgets) Type() string { return "CLASS=N" }

func (r retryBudgets) Set(s string) error {
	for item := range strings.SplitSeq(s, ",") {
		name, num, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok {
			return fmt.Errorf("%q: want CLASS=N", item)
		}
		c, err := failure.ParseClass(name)
		if err != nil {
			return err
		}
		if c == failure.Interrupted {
			return errors.New("interrupted runs are not retried: a rerun resumes them")
		}
		n, err := strconv.Atoi(num)
		if err != nil || n < 0 {
			return fmt.Errorf("%q: N must be a count, 0 or more", item)
		}
		if *r.m == nil {
			*r.m = map[failure.Class]int{}
		}
		(*r.m)[c] = n
	}
	return nil
}

// failPatterns is --fail-pattern, into execute.Options.FailPatterns.
type failPatterns struct{ p *[]failure.Pattern }

func (f failPatterns) String() string {
	if f.p == nil {
		return ""
	}
	var parts []string
	for _, p := range *f.p {
		parts = append(parts, string(p.Class)+"="+p.Regexp.String())
	}
	return strings.Join(parts, " ")
}

func (f failPatterns) Type() string { return "CLASS=REGEX" }

func (f failPatterns) Set(s string) error {
	p, err := failure.ParsePattern(s)
	if err != nil {
		return err
	}
	p.Source = "--fail-pattern"
	*f.p = append(*f.p, p)
	return nil
}

// gpusValue binds --gpus-per-run to pack.Options: a whole number of GPUs
// of the run's own, or a share of one.
type gpusValue struct{ o *pack.Options }

func (v gpusValue) Type() string { return "G" }

func (v gpusValue) String() string {
	if v.o.GPUShare > 0 {
		return strconv.FormatFloat(float64(v.o.GPUShare)/pack.GPUWhole, 'f', -1, 64)
	}
	return strconv.Itoa(v.o.GPUsPerRun)
}

func (v gpusValue) Set(s string) error {
	if s == "0" {
		v.o.GPUsPerRun, v.o.GPUShare = 0, 0
		return nil
	}
	r, err := pack.ParseRequest("gpus="+s, pack.Request{}, 0)
	if err != nil {
		return errors.New(strings.TrimPrefix(err.Error(), "gpus="+s+": "))
	}
	v.o.GPUsPerRun, v.o.GPUShare = r.GPUs, r.GPUShare
	return nil
}

// runsPerGPUValue binds --runs-per-gpu: a number, or auto.
type runsPerGPUValue struct{ o *pack.Options }

func (v runsPerGPUValue) Type() string { return "K" }

func (v runsPerGPUValue) String() string {
	if v.o.AutoRunsPerGPU {
		return "auto"
	}
	return strconv.Itoa(v.o.RunsPerGPU)
}

func (v runsPerGPUValue) Set(s string) error {
	if s == "auto" {
		v.o.RunsPerGPU, v.o.AutoRunsPerGPU = 0, true
		return nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return errors.New("want a whole number of runs, or auto")
	}
	v.o.RunsPerGPU, v.o.AutoRunsPerGPU = n, false
	return nil
}

// gpuMemValue binds --gpu-mem-per-run: a size, or auto.
type gpuMemValue struct{ o *pack.Options }

func (v gpuMemValue) Type() string { return "SIZE" }

func (v gpuMemValue) String() string {
	switch {
	case v.o.AutoGPUMem:
		return "auto"
	case v.o.GPUMem == 0:
		return ""
	}
	return pack.FormatSize(v.o.GPUMem)
}

func (v gpuMemValue) Set(s string) error {
	if s == "auto" {
		v.o.GPUMem, v.o.AutoGPUMem = 0, true
		return nil
	}
	size, err := pack.ParseSize(s)
	if err != nil {
		return err
	}
	v.o.GPUMem, v.o.AutoGPUMem = size, false
	return nil
}

// sizeValue binds a flag to a size in bytes.
type sizeValue struct{ bytes *uint64 }

func (v sizeValue) Type() string { return "SIZE" }

func (v sizeValue) String() string {
	if *v.bytes == 0 {
		return ""
	}
	return pack.FormatSize(*v.bytes)
}

func (v sizeValue) Set(s string) error {
	size, err := pack.ParseSize(s)
	if err == nil {
		*v.bytes = size
	}
	return err
}

// classList is a repeatable failure-class flag.
type classList struct{ p *[]failure.Class }

func (c classList) String() string {
	if c.p == nil {
		return ""
	}
	return failure.JoinClasses(*c.p)
}

func (c classList) Type() string { return "CLASS" }

func (c classList) Set(s string) error {
	for name := range strings.SplitSeq(s, ",") {
		class, err := failure.ParseClass(strings.TrimSpace(name))
		if err != nil {
			return err
		}
		if class == failure.Interrupted {
			return fmt.Errorf("interrupted runs are not failed: rerunning the sweep resumes them")
		}
		*c.p = append(*c.p, class)
	}
	return nil
}

// signalValue binds a flag to a signal, by its name: USR1 or SIGUSR1.
type signalValue struct{ sig *syscall.Signal }

func (v signalValue) Type() string { return "SIG" }

func (v signalValue) String() string {
	if *v.sig == 0 {
		return ""
	}
	return strings.TrimPrefix(unix.SignalName(*v.sig), "SIG")
}

func (v signalValue) Set(s string) error {
	name := strings.ToUpper(s)
	if !strings.HasPrefix(name, "SIG") {
		name = "SIG" + name
	}
	sig := unix.SignalNum(name)
	if sig == 0 || sig == syscall.SIGKILL || sig == syscall.SIGSTOP {
		return fmt.Errorf("%q: want a signal a run can catch, such as USR1", s)
	}
	*v.sig = sig
	return nil
}

// envKey is a variable name --env accepts.
var envKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// envSecondVar finds ",NAME=" in a value: a second variable given in one
// --env, as sbatch --export would take it.
var envSecondVar = regexp.MustCompile(`,[A-Za-z_][A-Za-z0-9_]*=`)

// ResolveEnv checks --env entries and fills in the ones given as KEY alone
// from nodepack's environment.
func ResolveEnv(entries []string, lookup func(string) (string, bool)) ([]string, error) {
	var env []string
	for _, kv := range entries {
		k, v, hasValue := strings.Cut(kv, "=")
		if !envKey.MatchString(k) {
			return nil, fmt.Errorf("--env %q: want KEY=VALUE or KEY", kv)
		}
		if !hasValue {
			value, ok := lookup(k)
			if !ok {
				return nil, fmt.Errorf("--env %s: %s is not set in nodepack's environment", k, k)
			}
			env = append(env, k+"="+value)
			continue
		}
		if m := envSecondVar.FindString(v); m != "" {
			i := strings.Index(v, m)
			return nil, fmt.Errorf("--env %q: one variable per --env: give --env %s=%s --env %s (a value that holds %q can come from nodepack's environment: export it and give --env %s)",
				kv, k, v[:i], v[i+1:], m, k)
		}
		env = append(env, kv)
	}
	return env, nil
}
