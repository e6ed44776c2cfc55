package sweep

import (
	"slices"
	"strings"
	"testing"

	"github.com/nodepack/nodepack/runner/run"
)

func gridRuns(t *testing.T, yml string, command []string, opts expandOptions) []run.Run {
	t.Helper()
	g, err := readGrid(strings.NewReader(yml), "params.yml")
	if err != nil {
		t.Fatal(err)
	}
	seq, err := g.Runs(command, opts)
	if err != nil {
		t.Fatal(err)
	}
	var runs []run.Run
	for r, err := range seq {
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
	}
	if len(runs) != g.Len()*max(opts.Reps, 1)/max(opts.Shard.Count, 1) && opts.Shard.Count <= 1 {
		t.Errorf("%d runs, Len %d", len(runs), g.Len())
	}
	return runs
}

// TestGridMLFramework is the promise: mlframework's grid gives
// exactly six runs with --gpu=-1 --batchsize=… --epoch=… in file order.
func TestGridMLFramework(t *testing.T) {
	runs := gridRuns(t, "gpu: -1\nbatchsize: [100, 500]\nepoch: !!python/tuple [5,20,5]\n", []string{"python", "train_mnist.py"}, expandOptions{})
	want := []string{
		"python train_mnist.py --gpu=-1 --batchsize=100 --epoch=5",
		"python train_mnist.py --gpu=-1 --batchsize=100 --epoch=10",
		"python train_mnist.py --gpu=-1 --batchsize=100 --epoch=15",
		"python train_mnist.py --gpu=-1 --batchsize=500 --epoch=5",
		"python train_mnist.py --gpu=-1 --batchsize=500 --epoch=10",
		"python train_mnist.py --gpu=-1 --batchsize=500 --epoch=15",
	}
	if got := argvs(runs); !slices.Equal(got, want) {
		t.Errorf("runs =\n%q\nwant\n%q", got, want)
	}
	if runs[4].Origin != "params.yml: batchsize=500 epoch=10" {
		t.Errorf("Origin = %q", runs[4].Origin)
	}
}

func TestGridValues(t *testing.T) {
	tests := []struct {
		description string
		yml         string
		command     []string
		want        []string
	}{
		{"placeholder takes the value in place and is not appended",
			"lr: [0.1, 0.01]\nseed: 1\n", []string{"train", "--learning-rate={lr}"},
			[]string{"train --learning-rate=0.1 --seed=1", "train --learning-rate=0.01 --seed=1"}},
		{"scalars as written", "a: 1e-3\nb: 'x y'\nc: \"q\\\"\"\nd: true\ne: ''\n", []string{"p"},
			[]string{`p --a=1e-3 --b=x y --c=q" --d=true --e=`}},
		{"block sequence", "m:\n  - a\n  - b\n", []string{"p"}, []string{"p --m=a", "p --m=b"}},
		{"tuple without step", "i: !!python/tuple [0, 3]\n", []string{"p"}, []string{"p --i=0", "p --i=1", "p --i=2"}},
		{"float tuple", "x: !!python/tuple [0, 1, 0.5]\n", []string{"p"}, []string{"p --x=0.0", "p --x=0.5"}},
		{"negative tuple step", "x: !!python/tuple [2, 0, -1]\n", []string{"p"}, []string{"p --x=2", "p --x=1"}},
		{"aliases are followed", "a: &v [1, 2]\nb: *v\n", []string{"p"}, []string{"p --a=1 --b=1", "p --a=1 --b=2", "p --a=2 --b=1", "p --a=2 --b=2"}},
		{"built-in placeholders", "a: [x]\n", []string{"p", "{rep}:{index}"}, []string{"p 0:0 --a=x"}},
		{"doubled braces", "a: [x]\n", []string{"p", "{{a}}={a}"}, []string{"p {a}=x"}},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			if got := argvs(gridRuns(t, tc.yml, tc.command, expandOptions{})); !slices.Equal(got, tc.want) {
				t.Errorf("runs = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestGridErrors(t *testing.T) {
	tests := []struct {
		description, yml, want string
	}{
		{"empty file", "", "params.yml: empty grid"},
		{"not a mapping", "- a\n- b\n", "params.yml:1:1: a grid is a mapping"},
		{"syntax error", "a: [1, 2\nb: 3\n", "params.yml:"},
		{"null value", "a: 1\nb:\n", "params.yml:2:3: b: no value"},
		{"nested mapping", "a:\n  b: 1\n", "params.yml:2:3: a: want a value"},
		{"nested list", "a: [[1, 2]]\n", "params.yml:1:5: a: a swept value must be a scalar"},
		{"empty list", "a: []\n", "params.yml:1:4: a: empty list"},
		{"unknown tag", "a: !!set {x}\n", "params.yml:1:4: a: want a value"},
		{"custom tag", "a: !env HOME\n", "params.yml:1:4: a: unsupported tag !env"},
		{"tuple of one", "a: !!python/tuple [1]\n", "params.yml:1:4: a: a !!python/tuple range is [start, end]"},
		{"tuple of words", "a: !!python/tuple [1, x]\n", `params.yml:1:23: a: "x" is not a finite number`},
		{"empty tuple range", "a: !!python/tuple [5, 1]\n", "params.yml:1:4: a: the range is empty"},
		{"duplicate key", "a: 1\na: 2\n", `params.yml:2:1: duplicate key "a"`},
		{"key with =", "a=b: 1\n", "params.yml:1:1: key \"a=b\""},
		{"NUL in a value", "a: \"x\\0y\"\n", "params.yml:1:4: a: value contains a NUL byte"},
		{"two documents", "a: 1\n---\nb: 2\n", "params.yml:2: a grid is one YAML document"},
		{"too many runs", "a: !!python/tuple [0, 100000]\nb: !!python/tuple [0, 100000]\n", "more than"},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			_, err := readGrid(strings.NewReader(tc.yml), "params.yml")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ReadGrid(%q) error = %v, want %q", tc.yml, err, tc.want)
			}
		})
	}
}

func TestGridCommandErrors(t *testing.T) {
	g, err := readGrid(strings.NewReader("lr: [1, 2]\n"), "params.yml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		command []string
		want    string
	}{
		{nil, "no command"},
		{[]string{"p", "--seed={seed}"}, "command argv[1]:8: unknown placeholder {seed}"},
		{[]string{"p", `{"x": {lr}}`}, "command argv[1]:1: unclosed {"},
		{[]string{"p", `{"x": 1}`}, `command argv[1]:1: unknown placeholder {"x": 1}`},
		{[]string{"p", "{run_dir}"}, "{run_dir} needs an output directory"},
	} {
		if _, err := g.Runs(tc.command, expandOptions{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Runs(%q) error = %v, want %q", tc.command, err, tc.want)
		}
	}
}
