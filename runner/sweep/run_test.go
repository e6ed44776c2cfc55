package sweep

import (
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/nodepack/nodepack/pack"

	"github.com/nodepack/nodepack/runner/run"
)

func readAll(t *testing.T, text string) ([]run.Run, error) {
	t.Helper()
	var runs []run.Run
	for run, err := range readTaskFile(strings.NewReader(text), "tasks.txt", pack.Request{}) {
		if err != nil {
			return runs, err
		}
		runs = append(runs, run)
	}
	return runs, nil
}

func TestReadTaskFile(t *testing.T) {
	runs, err := readAll(t, "# header\n\necho a\n  # indented comment\r\necho b\r\n   \necho a\n")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range runs {
		got = append(got, strings.Join(r.Args, "|")+" @"+r.Origin)
	}
	want := []string{"bash|-c|echo a @tasks.txt:3", "bash|-c|echo b @tasks.txt:5", "bash|-c|echo a @tasks.txt:7"}
	if !slices.Equal(got, want) {
		t.Errorf("runs = %q, want %q", got, want)
	}
	for i, r := range runs {
		if r.Index != i {
			t.Errorf("run %d: Index = %d", i, r.Index)
		}
		if !run.ValidID(r.ID) {
			t.Errorf("run %d: ID %q is not a valid file name", i, r.ID)
		}
	}
	if len(runs[0].ID) != 12 || runs[2].ID != runs[0].ID+"-2" || runs[1].ID == runs[0].ID {
		t.Errorf("IDs = %q, %q, %q; want 12 hex digits, distinct, repeat suffixed -2", runs[0].ID, runs[1].ID, runs[2].ID)
	}
}

func TestReadTaskFileIDsAreStable(t *testing.T) {
	before, _ := readAll(t, "echo a\necho b\n")
	after, _ := readAll(t, "echo new\n# note\necho a\necho other\necho b\n")
	if before[0].ID != after[1].ID || before[1].ID != after[3].ID {
		t.Errorf("IDs changed when lines were added: %q,%q → %q,%q", before[0].ID, before[1].ID, after[1].ID, after[3].ID)
	}
}

func TestReadTaskFileErrors(t *testing.T) {
	tests := []struct {
		name, text, want string
	}{
		{"too long", "echo ok\n" + strings.Repeat("x", maxLineBytes+1) + "\n", "tasks.txt:2: line is longer than"},
		{"nul", "echo ok\n\necho \x00\n", "tasks.txt:3: line contains a NUL byte"},
		{"an option of bash's own", "echo ok\n--version\n", "tasks.txt:2: the line starts with '-': bash -c would read it as an option"},
		{"a + option", "echo ok\n+x echo\n", "tasks.txt:2: the line starts with '+'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runs, err := readAll(t, tt.text)
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Fatalf("err = %v, want prefix %q", err, tt.want)
			}
			if len(runs) != 1 {
				t.Errorf("got %d runs before the error, want 1", len(runs))
			}
		})
	}
	// The longest allowed line and invalid UTF-8 are accepted.
	if _, err := readAll(t, strings.Repeat("y", maxLineBytes)+"\necho \xff\xfe\n"); err != nil {
		t.Errorf("err = %v, want nil", err)
	}
}

// endlessReader yields "echo zzz…" lines forever and counts the bytes read.
type endlessReader struct{ read int }

func (r *endlessReader) Read(p []byte) (int, error) {
	line := "echo " + strings.Repeat("z", 50) + "\n"
	n := 0
	for n+len(line) <= len(p) {
		n += copy(p[n:], line)
	}
	r.read += n
	return n, nil
}

func TestReadTaskFileIsLazy(t *testing.T) {
	r := &endlessReader{}
	n := 0
	for _, err := range readTaskFile(r, "endless", pack.Request{}) {
		if err != nil {
			t.Fatal(err)
		}
		if n++; n == 10 {
			break
		}
	}
	if r.read > 1<<20 {
		t.Errorf("read %d bytes for 10 runs", r.read)
	}
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, io.ErrUnexpectedEOF }

func TestReadTaskFileReadError(t *testing.T) {
	for _, err := range readTaskFile(failingReader{}, "in", pack.Request{}) {
		if !errors.Is(err, io.ErrUnexpectedEOF) || !strings.HasPrefix(err.Error(), "in:1: ") {
			t.Errorf("err = %v, want in:1: …unexpected EOF", err)
		}
	}
}

// TestTaskFileParams: a "#nodepack params" line gives the next command,
// and only it, parameters and a name made of them; its command and ID are
// the line's alone. A request line may come between.
func TestTaskFileParams(t *testing.T) {
	text := "#nodepack params {\"model\": \"convnet\", \"lr\": 0.1}\n#nodepack gpus=2\npython app.py model=convnet lr=0.1\npython app.py other\n  #nodepack params{\"seed\": 3}\necho seed 3\n"
	runs, err := readAll(t, text)
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := readAll(t, "python app.py model=convnet lr=0.1\npython app.py other\necho seed 3\n")
	if len(runs) != 3 {
		t.Fatalf("%d runs, want 3", len(runs))
	}
	for i, want := range []struct{ params, name string }{
		{`{"model":"convnet","lr":0.1}`, "model=convnet,lr=0.1"},
		{"", "python_app.py_other"},
		{`{"seed":3}`, "seed=3"},
	} {
		r := runs[i]
		if string(r.Params) != want.params || r.Name != want.name || r.ID != plain[i].ID || !slices.Equal(r.Args, plain[i].Args) {
			t.Errorf("run %d: params %s, name %q, id %s, args %q; want %s, %q and the plain line's id %s and args", i, r.Params, r.Name, r.ID, r.Args, want.params, want.name, plain[i].ID)
		}
	}
	if runs[0].Request == nil || runs[0].Request.GPUs != 2 {
		t.Errorf("the request line between params and command was lost: %+v", runs[0].Request)
	}
	for _, tc := range []struct{ name, text, want string }{
		{"two for one command", "#nodepack params {\"a\": 1}\n#nodepack params {\"a\": 2}\necho\n", "tasks.txt:2: a second #nodepack params line for the command after line 1"},
		{"none follows", "echo\n#nodepack params {\"a\": 1}\n# only comments\n", "tasks.txt:2: #nodepack params for no command"},
		{"not an object", "#nodepack params [1, 2]\necho\n", "tasks.txt:1:18: #nodepack params: want a JSON object"},
		{"bad JSON, column in the line", "  #nodepack params {\"a\": tru}\necho\n", "tasks.txt:1:"},
		{"a request inside", "#nodepack params {\"nodepack\": {\"gpus\": 1}}\necho\n", "a task line's request goes on a #nodepack line of its own"},
		{"empty", "#nodepack params {}\necho\n", "an empty object"},
	} {
		if _, err := readAll(t, tc.text); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", tc.name, err, tc.want)
		}
	}
	// Not a params line: a request, or a comment that looks like one.
	if runs, err := readAll(t, "#nodepack paramsx=1\necho\n"); err == nil {
		t.Errorf("#nodepack paramsx=1 was taken: %+v", runs)
	}
	if runs, err := readAll(t, "#nodepacker params {\"a\": 1}\necho\n"); err != nil || runs[0].Params != nil {
		t.Errorf("a comment was read as params: %+v, %v", runs, err)
	}
}
