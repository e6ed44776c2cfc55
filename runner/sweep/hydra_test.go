package sweep

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/nodepack/nodepack/runner/run"
)

// argvs returns the argv of each run, elements joined by spaces.
func argvs(runs []run.Run) []string {
	var out []string
	for _, r := range runs {
		out = append(out, strings.Join(r.Args, " "))
	}
	return out
}

// TestSweepClusterduck is the promise: clusterduck's
// model=convnet,transformer +iteration="range(2)" (after the shell:
// +iteration=range(2)) gives exactly the four runs Hydra's basic sweeper
// gives, each with one value per override and everything else untouched.
func TestSweepClusterduck(t *testing.T) {
	s, err := parseHydra([]string{"python", "train.py", "model=convnet,transformer", "+iteration=range(2)", "lr=0.1"})
	if err != nil {
		t.Fatal(err)
	}
	runs := collect(t, s, expandOptions{})
	want := []string{
		"python train.py model=convnet +iteration=0 lr=0.1",
		"python train.py model=convnet +iteration=1 lr=0.1",
		"python train.py model=transformer +iteration=0 lr=0.1",
		"python train.py model=transformer +iteration=1 lr=0.1",
	}
	if got := argvs(runs); !slices.Equal(got, want) || s.Len() != 4 {
		t.Errorf("runs = %q (Len %d), want %q", got, s.Len(), want)
	}
	ids := map[string]bool{}
	for i, r := range runs {
		ids[r.ID] = true
		if r.Index != i || !slices.Equal(r.Env, []string{"NODEPACK_REP=0"}) {
			t.Errorf("run %d: Index %d, Env %q", i, r.Index, r.Env)
		}
	}
	if len(ids) != 4 {
		t.Errorf("IDs are not distinct: %v", ids)
	}
}

func TestSweepValues(t *testing.T) {
	tests := []struct {
		description string
		override    string
		want        []string // the override of each run
	}{
		{"simple choice", "m=a,b,c", []string{"m=a", "m=b", "m=c"}},
		{"spaces around commas are trimmed", "m=a, b ,c", []string{"m=a", "m=b", "m=c"}},
		{"choice()", "m=choice(a, 'b c')", []string{"m=a", "m='b c'"}},
		{"range(stop)", "i=range(3)", []string{"i=0", "i=1", "i=2"}},
		{"range(start,stop,step)", "i=range(1,10,4)", []string{"i=1", "i=5", "i=9"}},
		{"negative step", "i=range(3,0,-1)", []string{"i=3", "i=2", "i=1"}},
		{"named arguments", "i=range(start=2, stop=4)", []string{"i=2", "i=3"}},
		{"float range is exact on decimals", "x=range(0,0.5,0.1)", []string{"x=0.0", "x=0.1", "x=0.2", "x=0.3", "x=0.4"}},
		{"float step with integer bounds", "x=range(0,1,0.25)", []string{"x=0.0", "x=0.25", "x=0.5", "x=0.75"}},
		{"negative float step", "x=range(1,0,-0.5)", []string{"x=1.0", "x=0.5"}},
		{"tiny floats print as Python does", "x=range(1e-5,3e-5,1e-5)", []string{"x=1e-05", "x=2e-05"}},
		{"underscores in numbers", "n=range(1_000,3_000,1_000)", []string{"n=1000", "n=2000"}},
		{"prefixes are kept", "++db.user=a,b", []string{"++db.user=a", "++db.user=b"}},
		{"group key", "hydra/launcher=basic,submitit", []string{"hydra/launcher=basic", "hydra/launcher=submitit"}},
		{"lists are elements", "l=[1,2],[3]", []string{"l=[1,2]", "l=[3]"}},
		{"escaped comma is not a separator", `s=a\,b,c`, []string{`s=a\,b`, "s=c"}},
		{"quoted value is literal", "s='a,b'", []string{"s='a,b'"}},
		{"double-quoted value is literal", `s="a,b"`, []string{`s="a,b"`}},
		{"list is literal", "s=[a,b]", []string{"s=[a,b]"}},
		{"dict is literal", "s={{a:1,b:2}}", []string{"s={a:1,b:2}"}},
		{"interpolation is literal", "s=${oc.env:USER,me}", []string{"s=${oc.env:USER,me}"}},
		{"other functions are literal", "s=int(3)", []string{"s=int(3)"}},
		{"argparse flags are not overrides", "--lr=1,2", []string{"--lr=1,2"}},
		{"a dash in the key is not an override", "a-b=1,2", []string{"a-b=1,2"}},
		{"placeholders in values", "out=a{rep},b", []string{"out=a0", "out=b"}},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			s, err := parseHydra([]string{"prog", tc.override})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range collect(t, s, expandOptions{}) {
				got = append(got, r.Args[1])
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("%s → %q, want %q", tc.override, got, tc.want)
			}
		})
	}
}

func TestSweepProgramIsNeverAnOverride(t *testing.T) {
	s, err := parseHydra([]string{"A=1,2", "x=1,2"})
	if err != nil {
		t.Fatal(err)
	}
	if got := argvs(collect(t, s, expandOptions{})); !slices.Equal(got, []string{"A=1,2 x=1", "A=1,2 x=2"}) {
		t.Errorf("runs = %q", got)
	}
}

func TestSweepErrors(t *testing.T) {
	tests := []struct {
		description string
		arg, want   string
	}{
		{"empty element", "a=b,,c", "argv[1]:5: empty value in a sweep"},
		{"trailing comma", "a=b,", "argv[1]:5: empty value"},
		{"unterminated quote", "a='x,y", "argv[1]:3: unterminated quote"},
		{"unclosed bracket", "a=[1,2", "argv[1]:3: unclosed ["},
		{"unmatched parenthesis", "a=1)", "argv[1]:4: unmatched )"},
		{"range without stop", "a=range()", "range"},
		{"range with a word", "a=range(1,x)", `"x" is not a finite number`},
		{"range step 0", "a=range(0,3,0)", "step must not be 0"},
		{"empty range", "a=range(3,0)", "the range is empty"},
		{"range too long", "a=range(0,1e12)", "more than"},
		{"range with four arguments", "a=range(1,2,3,4)", "want range(stop)"},
		{"range with unknown name", "a=range(begin=1,stop=3)", `no argument "begin"`},
		{"range positional after named", "a=range(stop=3,1)", "positional argument after a named one"},
		{"empty choice", "a=choice()", "choice() needs at least one value"},
		{"interval", "a=interval(0,1)", "interval() is not supported"},
		{"glob", "a=glob(*)", "glob() is not supported"},
		{"shuffle", "a=shuffle(1,2)", "shuffle() is not supported"},
		{"sweep in a sweep", "a=1,range(3)", "a sweep inside a sweep"},
		{"cast of a sweep", "a=int(1,2)", "a cast of a sweep"},
		{"unknown placeholder", "a={seed},2", "unknown placeholder {seed}"},
		{"too many runs", "a=range(100000) b=range(100000)", ""},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			args := append([]string{"prog"}, strings.Fields(tc.arg)...)
			_, err := parseHydra(args)
			if tc.want == "" {
				tc.want = "more than"
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParseHydra(%q) error = %v, want %q", args, err, tc.want)
			}
		})
	}
}

func TestSweepRunDirNeedsAnOutputDirectory(t *testing.T) {
	s, err := parseHydra([]string{"prog", "--out={run_dir}", "a=1,2"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Runs(expandOptions{}); err == nil || !strings.Contains(err.Error(), "{run_dir} needs an output directory") {
		t.Errorf("Runs without RunDir: %v", err)
	}
	runs := collect(t, s, expandOptions{OutputDir: "/out"})
	for _, r := range runs {
		if want := "--out=/out/runs/" + r.Name + "-" + r.ID; r.Args[1] != want || r.Args[1] != "--out="+run.Dir("/out", r) {
			t.Errorf("run %s: %q, want %s", r.ID, r.Args, want)
		}
	}
}

func TestFormatPythonFloat(t *testing.T) {
	tests := []struct {
		in   float64
		want string
	}{
		{0, "0.0"}, {5, "5.0"}, {-2.5, "-2.5"}, {0.1, "0.1"}, {1e-4, "0.0001"}, {1e-5, "1e-05"},
		{1e15, "1000000000000000.0"}, {1e16, "1e+16"}, {1.5e20, "1.5e+20"}, {math.Nextafter(0.3, 1), "0.30000000000000004"},
	}
	for _, tc := range tests {
		if got := formatPythonFloat(tc.in); got != tc.want {
			t.Errorf("formatPythonFloat(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
