package sweep

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/nodepack/nodepack/pack"
)

// directivePrefix starts a task-file line that sets the requests of the
// lines after it, until the next such line: "#nodepack gpus=2 cpus=16".
// "#nodepack" alone (or "#nodepack default") goes back to the default.
const directivePrefix = "#nodepack"

// paramsRequestKey is the key of a params-file object that holds the
// run's request, {"nodepack": {"gpus": 2, "cpus": 16}}. It is not a
// parameter: it is not passed to the command, not part of the run's ID
// and not written to params.json.
const paramsRequestKey = "nodepack"

// requestRule gives a request to the runs of a sweep, grid or params file whose
// values match: "model=big: gpus=2 cpus=16" matches runs whose model is
// big; "*: gpus=0.25" matches every run. The first rule that matches a
// run gives its request.
type requestRule struct {
	Text    string
	Match   [][2]string // key, value; all must match; none for "*"
	Request pack.Request
}

// parseRule reads a rule, MATCH: REQUEST, with MATCH a comma-separated
// list of key=value (or *) and REQUEST as [pack.ParseRequest] reads it
// over base on GPUs of gpuMemory.
func parseRule(text string, base pack.Request, gpuMemory uint64) (requestRule, error) {
	i := strings.LastIndexByte(text, ':')
	if i < 0 {
		return requestRule{}, fmt.Errorf("request rule %q: want MATCH: REQUEST, e.g. 'model=big: gpus=2' or '*: gpus=0.25'", text)
	}
	match, reqText := strings.TrimSpace(text[:i]), strings.TrimSpace(text[i+1:])
	rule := requestRule{Text: text}
	if match != "*" {
		for pair := range strings.SplitSeq(match, ",") {
			k, v, ok := strings.Cut(strings.TrimSpace(pair), "=")
			if !ok || k == "" || v == "" {
				return requestRule{}, fmt.Errorf("request rule %q: %q: want key=value to match, or *", text, pair)
			}
			rule.Match = append(rule.Match, [2]string{k, v})
		}
	}
	if reqText == "" {
		return requestRule{}, fmt.Errorf("request rule %q: no request after the colon", text)
	}
	r, err := pack.ParseRequest(reqText, base, gpuMemory)
	if err != nil {
		return requestRule{}, fmt.Errorf("request rule %q: %w", text, err)
	}
	rule.Request = r
	return rule, nil
}

// matches reports whether a run whose values value gives matches r.
func (r *requestRule) matches(value func(key string) (string, bool)) bool {
	for _, kv := range r.Match {
		if v, ok := value(kv[0]); !ok || v != kv[1] {
			return false
		}
	}
	return true
}

// directive reads a task-file line that starts with directivePrefix: the
// request of the lines after it over base on GPUs of gpuMemory, or nil for
// the default. ok is false for a comment that only looks like one
// ("#nodepacker").
func directive(line []byte, base pack.Request, gpuMemory uint64) (req *pack.Request, ok bool, err error) {
	rest, found := bytes.CutPrefix(line, []byte(directivePrefix))
	if !found || len(rest) > 0 && rest[0] != ' ' && rest[0] != '\t' {
		return nil, false, nil
	}
	text := strings.TrimSpace(string(rest))
	if text == "" || text == "default" {
		return nil, true, nil
	}
	r, err := pack.ParseRequest(text, base, gpuMemory)
	if err != nil {
		return nil, true, fmt.Errorf("%s: %w", directivePrefix, err)
	}
	return &r, true, nil
}

// paramsRequest reads the request of a params-file line, the object under
// paramsRequestKey, over base on GPUs of gpuMemory: {"gpus": 2, "cpus":
// 16, "gpu_mem": "12GiB"}.
func paramsRequest(raw json.RawMessage, base pack.Request, gpuMemory uint64) (pack.Request, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return base, fmt.Errorf("%q: want an object such as {\"gpus\": 2, \"cpus\": 16}", paramsRequestKey)
	}
	var words []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return base, fmt.Errorf("%q: %w", paramsRequestKey, err)
		}
		key := tok.(string)
		var value any
		if err := dec.Decode(&value); err != nil {
			return base, fmt.Errorf("%q: %s: %w", paramsRequestKey, key, err)
		}
		var text string
		switch v := value.(type) {
		case json.Number:
			text = v.String()
		case string:
			text = v
		default:
			return base, fmt.Errorf("%q: %s: want a number or a string", paramsRequestKey, key)
		}
		if strings.ContainsAny(text, " \t,=") || text == "" {
			return base, fmt.Errorf("%q: %s: %q is not a value", paramsRequestKey, key, text)
		}
		words = append(words, key+"="+text)
	}
	r, err := pack.ParseRequest(strings.Join(words, " "), base, gpuMemory)
	if err != nil {
		return base, fmt.Errorf("%q: %w", paramsRequestKey, err)
	}
	return r, nil
}

// errRuleUnmatched is wrapped by Scan's error for a rule no run matched:
// a typo in its key or value would otherwise leave every run with the
// default.
var errRuleUnmatched = errors.New("matches no run")
