package sweep

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// number is an integer or a float as written in a sweep or grid.
type number struct {
	isInt bool
	i     int64
	r     *big.Rat // the exact decimal value as written
}

// parseNumber parses an integer or a float the way Hydra's grammar writes
// them: optional sign, digits with single underscores between them, a
// point, an exponent. Infinities and NaN are refused: they cannot bound a
// range.
func parseNumber(s string) (number, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return number{}, errors.New("empty number")
	}
	if strings.Contains(t, "__") || strings.HasPrefix(strings.TrimLeft(t, "+-"), "_") || strings.HasSuffix(t, "_") {
		return number{}, fmt.Errorf("%q is not a number", t)
	}
	plain := strings.ReplaceAll(t, "_", "")
	// Exact arithmetic on 1e-1000000 would take minutes: bound the text
	// and the exponent to what a float64 can tell apart.
	if len(plain) > 64 {
		return number{}, fmt.Errorf("%q is too long for a number", t)
	}
	if i := strings.IndexAny(plain, "eE"); i >= 0 {
		if exp, err := strconv.Atoi(plain[i+1:]); err == nil && (exp > 400 || exp < -400) {
			return number{}, fmt.Errorf("%q is out of range", t)
		}
	}
	if i, err := strconv.ParseInt(plain, 10, 64); err == nil {
		return number{isInt: true, i: i}, nil
	}
	lower := strings.ToLower(strings.TrimLeft(plain, "+-"))
	if strings.HasPrefix(lower, "0x") || strings.HasPrefix(lower, "inf") || strings.HasPrefix(lower, "nan") || lower == "" {
		return number{}, fmt.Errorf("%q is not a finite number", t)
	}
	f, err := strconv.ParseFloat(plain, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return number{}, fmt.Errorf("%q is not a finite number", t)
	}
	r, ok := new(big.Rat).SetString(plain)
	if !ok {
		return number{}, fmt.Errorf("%q is not a finite number", t)
	}
	return number{r: r}, nil
}

func (n number) rat() *big.Rat {
	if n.isInt {
		return new(big.Rat).SetInt64(n.i)
	}
	return new(big.Rat).Set(n.r)
}

// numRange is Python's range(start, stop, step) — stop excluded, negative
// steps allowed — extended to floats. Float values are start + i·step
// computed exactly on the decimal numbers as written and rounded once to a
// float64, so range(0, 1, 0.1) gives exactly ten values 0.0, 0.1, 0.2,
// 0.3, … 0.9. (Hydra accumulates binary floats in 28-digit decimals, which
// can print 0.30000000000000004 or even include the stop.) Integers print
// as integers, floats as Python prints them (5.0, 1e-05).
type numRange struct {
	ints        bool
	start, step int64    // when ints
	rstart      *big.Rat // when floats
	rstep       *big.Rat
	n           int
}

// newNumRange returns the range, or an error for a zero step, an empty
// range, or one with more than maxRuns values.
func newNumRange(start, stop, step number) (*numRange, error) {
	r := &numRange{ints: start.isInt && stop.isInt && step.isInt}
	if r.ints && step.i == 0 || !r.ints && step.rat().Sign() == 0 {
		return nil, errors.New("step must not be 0")
	}
	// count = ceil((stop-start)/step), computed exactly.
	q := new(big.Rat).Sub(stop.rat(), start.rat())
	q.Quo(q, step.rat())
	if q.Sign() <= 0 {
		return nil, errors.New("the range is empty")
	}
	count := new(big.Int).Add(q.Num(), new(big.Int).Sub(q.Denom(), big.NewInt(1)))
	count.Quo(count, q.Denom())
	if !count.IsInt64() || count.Int64() > maxRuns {
		return nil, fmt.Errorf("the range has more than %d values", maxRuns)
	}
	r.n = int(count.Int64())
	if r.ints {
		r.start, r.step = start.i, step.i
	} else {
		r.rstart, r.rstep = start.rat(), step.rat()
	}
	return r, nil
}

func (r *numRange) Len() int { return r.n }

// At returns value i (0 ≤ i < Len) as text.
func (r *numRange) At(i int) string {
	if r.ints {
		return strconv.FormatInt(r.start+int64(i)*r.step, 10)
	}
	v := new(big.Rat).Mul(r.rstep, new(big.Rat).SetInt64(int64(i)))
	f, _ := v.Add(v, r.rstart).Float64()
	return formatPythonFloat(f)
}

// formatPythonFloat formats f as Python's str(float) does: the shortest
// text that reads back as f, in positional notation with at least one
// decimal (5.0, 0.001) for exponents from -4 to 15, else in exponent
// notation with at least two exponent digits (1e-05, 1.5e+16).
func formatPythonFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // Go writes exponents as Python does: e-05, e+16
	exp, _ := strconv.Atoi(e[strings.IndexByte(e, 'e')+1:])
	if exp < -4 || exp >= 16 {
		return e
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}

// valueSet is the values of one swept key: a list, or a range.
type valueSet struct {
	list []string
	json []json.RawMessage // list's values as typed JSON
	rng  *numRange
}

func (v valueSet) Len() int {
	if v.rng != nil {
		return v.rng.Len()
	}
	return len(v.list)
}

func (v valueSet) At(i int) string {
	if v.rng != nil {
		return v.rng.At(i)
	}
	return v.list[i]
}

// JSON returns value i as typed JSON: a range's values are numbers.
func (v valueSet) JSON(i int) json.RawMessage {
	if v.rng != nil {
		return json.RawMessage(v.rng.At(i))
	}
	return v.json[i]
}
