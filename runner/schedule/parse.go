package schedule

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nodepack/nodepack/runner/metrics"
)

// ParsePrune reads a pruning policy written
// METRIC[:min|max][,eta=N][,first=STEP][,max=STEP][,rule=forecast|asha|median|curve][,every=D]:
// the metric and its direction (as metrics.ParseRank reads it), then
// the policy's settings, each at most once, and how often the runs'
// metrics are read (every; 0 when not given). With max and neither rule
// nor first, the rule is forecast (its first rung an eighth of max);
// else asha unless rule says otherwise. A policy NewPruner would refuse
// is refused here.
func ParsePrune(s string) (p Prune, every time.Duration, err error) {
	head, rest, _ := strings.Cut(s, ",")
	name, higher, ok := metrics.ParseRank(head)
	if name == "" {
		return p, 0, errors.New("want METRIC[:min|max], then eta=, first=, max=, rule= or every= keys, e.g. loss:min,first=100,max=2700")
	}
	if !ok {
		return p, 0, fmt.Errorf("%q: want %s:min or %s:max", head, name, name)
	}
	p = Prune{Metric: name, Max: higher}
	seen := map[string]bool{}
	for kv := range strings.SplitSeq(rest, ",") {
		if kv == "" && rest == "" {
			break // the metric alone
		}
		k, v, ok := strings.Cut(kv, "=")
		switch {
		case kv == "":
			return p, 0, fmt.Errorf("%q: an empty item between commas", s)
		case !ok:
			return p, 0, fmt.Errorf("%q: want KEY=VALUE (eta, first, max, rule, every)", kv)
		case seen[k]:
			return p, 0, fmt.Errorf("%s given twice", k)
		}
		seen[k] = true
		if err := p.set(k, v, &every); err != nil {
			return p, 0, err
		}
	}
	if !seen["rule"] && !seen["first"] && p.MaxStep > 0 {
		p.Forecast = true
	}
	if _, err := NewPruner(p); err != nil {
		return p, 0, errors.New(strings.TrimPrefix(err.Error(), "prune: "))
	}
	return p, every, nil
}

// set sets the policy's setting k to v (every: the read interval).
func (p *Prune) set(k, v string, every *time.Duration) error {
	var err error
	switch k {
	case "eta":
		// The policy's zero values are its defaults: 0 given is no
		// default, it is a mistake.
		if p.Eta, err = strconv.Atoi(v); err == nil && p.Eta < 2 {
			err = errors.New("want at least 2")
		}
	case "first":
		if p.FirstStep, err = strconv.ParseFloat(v, 64); err == nil && !(p.FirstStep > 0) {
			err = errors.New("want a step above 0")
		}
	case "max":
		p.MaxStep, err = strconv.ParseFloat(v, 64)
	case "rule":
		switch v {
		case "asha":
		case "median":
			p.Median = true
		case "curve":
			p.Curve = true
		case "forecast":
			p.Forecast = true
		default:
			err = errors.New("want forecast, asha, median or curve")
		}
	case "every":
		*every, err = time.ParseDuration(v)
		if err == nil && *every <= 0 {
			err = errors.New("want a duration above 0")
		}
	default:
		return fmt.Errorf("unknown key %q: want eta, first, max, rule or every", k)
	}
	if err != nil {
		return fmt.Errorf("%s=%s: %v", k, v, err)
	}
	return nil
}
