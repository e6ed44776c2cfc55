package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nodepack/nodepack/runner/metrics"
	"github.com/nodepack/nodepack/runner/schedule"
)

// splitWords splits a command prefix the way a POSIX shell splits words,
// without expanding anything: whitespace separates words, single quotes
// keep everything literally, double quotes keep everything but \" and \\,
// and a backslash outside quotes escapes the next character.
func splitWords(s string) ([]string, error) {
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

// metricPatterns reads the --metric flags, NAME=REGEX each.
func metricPatterns(flags []string) ([]metrics.Pattern, error) {
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

// pruneFlag is --prune METRIC[:min|max][,eta=N][,first=STEP][,max=STEP][,rule=asha|median|curve][,every=D].
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
