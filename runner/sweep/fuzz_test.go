package sweep

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/runner/run"
)

// fuzzRunLimit bounds the runs a fuzz input is expanded into.
const fuzzRunLimit = 1000

const fuzzOutputDir = "/out"

// FuzzParseHydra checks that any override either parses, and then expands
// into Len runs (up to a limit) with one argv element per argument, or
// fails with an error that names the argument.
func FuzzParseHydra(f *testing.F) {
	for _, s := range []string{"model=convnet,transformer", "+iteration=range(2)", "x=range(0,1,0.25)", "a=choice(a,'b,c')",
		"s='a,b'", "l=[a,b],[c]", "d=${now:%H},{{x}}", "i=range(start=1,stop=9,step=3)", "a=b,,c", "a=(", "--lr=1,2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, arg string) {
		s, err := parseHydra([]string{"prog", arg, "z=1,2"})
		if err != nil {
			if !strings.HasPrefix(err.Error(), "sweep") {
				t.Errorf("error %q does not name the sweep argument", err)
			}
			return
		}
		seq, err := s.Runs(expandOptions{OutputDir: fuzzOutputDir})
		if err != nil {
			t.Fatalf("Runs: %v", err)
		}
		n := 0
		for r, err := range seq {
			if err != nil {
				return // an argv the kernel would refuse, e.g. with a NUL
			}
			if len(r.Args) != 3 || !run.ValidID(r.ID) {
				t.Fatalf("run %d: argv %q, id %q", n, r.Args, r.ID)
			}
			if n++; n == fuzzRunLimit {
				break
			}
		}
		if n != min(s.Len(), fuzzRunLimit) {
			t.Errorf("%d runs, Len %d", n, s.Len())
		}
	})
}

// FuzzReadGrid checks that any YAML either reads as a grid whose runs are
// the command plus one argument per key, or fails naming the file.
func FuzzReadGrid(f *testing.F) {
	for _, s := range []string{"gpu: -1\nbatchsize: [100, 500]\nepoch: !!python/tuple [5,20,5]\n", "a: &x [1]\nb: *x\n",
		"x: !!python/tuple [0, 1, 0.1]\n", "- a\n", "a:\n  b: 1\n", "a: [\n", "a: !!binary aGk=\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := readGrid(strings.NewReader(string(data)), "params.yml")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "params.yml") {
				t.Errorf("error %q does not name the file", err)
			}
			return
		}
		seq, err := g.Runs([]string{"p", "{rep}"}, expandOptions{})
		if err != nil {
			t.Fatalf("Runs: %v", err)
		}
		n := 0
		for r, err := range seq {
			if err != nil {
				t.Fatalf("run %d: %v", n, err)
			}
			if len(r.Args) != 2+len(g.keys) {
				t.Fatalf("run %d: argv %q for %d keys", n, r.Args, len(g.keys))
			}
			if n++; n == fuzzRunLimit {
				break
			}
		}
		if n != min(g.Len(), fuzzRunLimit) {
			t.Errorf("%d runs, Len %d", n, g.Len())
		}
	})
}

// FuzzReadParams checks that any params file either streams runs or stops
// with an error that names file:line.
func FuzzReadParams(f *testing.F) {
	for _, s := range []string{`{"a": "a b;$(touch pwned)", "n": 1}` + "\n", "\n# c\n{}\n", `{"a": [1, {"b": null}]}`,
		`{"a": 1, "a": 2}`, "[1]\n", `{"a": "\u0000"}`, `{"x": 1} 2`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		seq, err := readParams(strings.NewReader(text), "runs.jsonl", []string{"p", "{index}"}, expandOptions{Reps: 2})
		if err != nil {
			t.Fatalf("ReadParams: %v", err)
		}
		n := 0
		for r, err := range seq {
			if err != nil {
				if !strings.HasPrefix(err.Error(), "runs.jsonl:") {
					t.Errorf("error %q does not name file:line", err)
				}
				return
			}
			if len(r.Args) < 2 || r.Args[1] != strings.TrimSpace(r.Args[1]) || r.Index != n {
				t.Fatalf("run %d: %+v", n, r)
			}
			n++
		}
	})
}

// FuzzReadTaskFile checks that any task file, directives included,
// either streams runs whose requests are valid or stops with an error
// that names file:line.
func FuzzReadTaskFile(f *testing.F) {
	for _, s := range []string{"echo a\n#nodepack gpus=2 cpus=16\necho b\n", "#nodepack\n", "#nodepack gpu_mem=auto\nx\n",
		"#nodepack gpus=0.6,mem=1G\n\\\n", "#nodepackx\nls\n", "#nodepack gpus=1/0\nls\n", "a\r\n#nodepack\tcpus=0\r\nb",
		"#nodepack params {\"lr\": 0.1, \"m\": \"x\"}\n#nodepack gpus=1\necho a\n", "#nodepack params{\"a\": [1, {\"b\": null}]}\n\n# c\nls\n#nodepack params {\"a\": 1}\n"} {
		f.Add(s)
	}
	base := pack.Request{GPUs: 1, CPUs: 8}
	f.Fuzz(func(t *testing.T, text string) {
		// A task file's source streams what expand(readTaskFile) does.
		opts := expandOptions{Reps: 2, Shard: Shard{Index: 0, Count: 2}}
		want, wantErr := runsOf(expand(readTaskFile(strings.NewReader(text), "tasks.txt", base), opts))
		got, err := runsOf(expandTasks(strings.NewReader(text), "tasks.txt", base, opts))
		if !reflect.DeepEqual(got, want) || fmt.Sprint(err) != fmt.Sprint(wantErr) {
			t.Fatalf("the source's runs %+v %v, Expand(ReadTaskFile) %+v %v", got, err, want, wantErr)
		}
		n := 0
		for r, err := range readTaskFile(strings.NewReader(text), "tasks.txt", base) {
			if err != nil {
				if !strings.HasPrefix(err.Error(), "tasks.txt:") {
					t.Errorf("error %q does not name file:line", err)
				}
				return
			}
			if r.Request != nil {
				if err := r.Request.Validate(); err != nil {
					t.Fatalf("run %d: invalid request %v: %v", n, r.Request, err)
				}
			}
			if r.Params != nil && (!json.Valid(r.Params) || r.Params[0] != '{') {
				t.Fatalf("run %d: params %q are no JSON object", n, r.Params)
			}
			if n++; n > fuzzRunLimit {
				return
			}
		}
	})
}
