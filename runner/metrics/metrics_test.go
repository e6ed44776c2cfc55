package metrics

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func appendFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

func readPoints(t *testing.T, r *Reader, final bool) []Point {
	t.Helper()
	var got []Point
	if err := r.Read(final, func(p Point) { got = append(got, p) }); err != nil {
		t.Fatal(err)
	}
	return got
}

func TestReaderJSONLines(t *testing.T) {
	tests := []struct {
		description   string
		text          string
		want          []Point
		malformed     int
		long          int
		waitingOnLast bool // the last line has no newline
	}{
		{"steps as given, every number but the step", `{"step": 200, "loss": 0.41, "acc": 0.83}` + "\n",
			[]Point{{200, "loss", 0.41}, {200, "acc", 0.83}}, 0, 0, false},
		{"no step: the line after the last step", `{"loss": 1}` + "\n" + `{"step": 10, "loss": 0.5}` + "\n" + `{"loss": 0.4}` + "\n",
			[]Point{{1, "loss", 1}, {10, "loss", 0.5}, {11, "loss", 0.4}}, 0, 0, false},
		{"text, lists and objects are no values", `{"step": 1, "name": "x", "l": [1], "o": {"a": 1}, "ok": true, "loss": 2}` + "\n",
			[]Point{{1, "loss", 2}}, 0, 0, false},
		{"malformed lines are skipped and counted", "not json\n[1, 2]\n{\"loss\": 1\n{\"loss\": 3}\n\n{\"loss\": 4} trailing\n",
			[]Point{{1, "loss", 3}}, 4, 0, false},
		{"Python's bare NaN and Infinity, not inside strings", `{"step": 3, "loss": NaN, "gn": -Infinity, "note": "NaN: Infinity"}` + "\n",
			[]Point{{3, "loss", math.NaN()}, {3, "gn", math.Inf(-1)}}, 0, 0, false},
		{"CRLF line ends", "{\"step\": 2, \"loss\": 1}\r\n", []Point{{2, "loss", 1}}, 0, 0, false},
		{"a step that is no finite number makes the line malformed", `{"step": NaN, "loss": 1}` + "\n" + `{"step": Infinity, "loss": 2}` + "\n" + `{"loss": 3}` + "\n",
			[]Point{{1, "loss", 3}}, 2, 0, false},
		{"a line longer than maxLine is skipped, the next one read",
			`{"pad": "` + strings.Repeat("x", maxLine) + `"}` + "\n" + `{"step": 5, "loss": 9}` + "\n",
			[]Point{{5, "loss", 9}}, 0, 1, false},
		{"an unfinished last line waits", `{"step": 1, "loss": 1}` + "\n" + `{"step": 2, "lo`,
			[]Point{{1, "loss", 1}}, 0, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), FileName)
			appendFile(t, path, tc.text)
			r := &Reader{Path: path}
			got := readPoints(t, r, false)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) || r.Malformed != tc.malformed || r.Long != tc.long {
				t.Errorf("got %v (malformed %d, long %d), want %v (%d, %d)", got, r.Malformed, r.Long, tc.want, tc.malformed, tc.long)
			}
			if tc.waitingOnLast {
				appendFile(t, path, `ss": 0.5}`)
				if got := readPoints(t, r, false); len(got) != 0 {
					t.Errorf("a line without its newline was taken before the run ended: %v", got)
				}
				if got, want := readPoints(t, r, true), []Point{{2, "loss", 0.5}}; !reflect.DeepEqual(got, want) {
					t.Errorf("final read = %v, want %v", got, want)
				}
			}
		})
	}
}

// TestReaderIncremental: each Read takes only what was appended since the
// last, including a line split across the two.
func TestReaderIncremental(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	r := &Reader{Path: path}
	if got := readPoints(t, r, false); got != nil {
		t.Fatalf("no file yet: %v", got)
	}
	appendFile(t, path, "{\"step\": 1, \"loss\": 3}\n{\"step\": 2, ")
	appendFile(t, path, "")
	if got := readPoints(t, r, false); !reflect.DeepEqual(got, []Point{{1, "loss", 3}}) {
		t.Fatalf("first read: %v", got)
	}
	appendFile(t, path, "\"loss\": 2}\n{\"step\": 3, \"loss\": 1}\n")
	if got := readPoints(t, r, false); !reflect.DeepEqual(got, []Point{{2, "loss", 2}, {3, "loss", 1}}) {
		t.Fatalf("second read: %v", got)
	}
	if got := readPoints(t, r, true); got != nil {
		t.Fatalf("nothing new: %v", got)
	}
}

// TestReaderHugeLineBoundedMemory: a 64 MiB line without a newline, then
// more, costs the reader at most maxLine of buffer; the line is skipped
// (too long, or not read: over ReadBudget), and the next one read.
func TestReaderHugeLineBoundedMemory(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	chunk := []byte(strings.Repeat("y", 1<<20))
	for range 64 {
		f.Write(chunk)
	}
	f.Close()
	r := &Reader{Path: path}
	readPoints(t, r, false)
	if cap(r.rest) > maxLine {
		t.Errorf("kept %d bytes of an unfinished line, want at most %d", cap(r.rest), maxLine)
	}
	appendFile(t, path, "\n{\"step\": 7, \"loss\": 1}\n")
	if got := readPoints(t, r, true); !reflect.DeepEqual(got, []Point{{7, "loss", 1}}) || r.Long == 0 && r.Skipped < 60<<20 {
		t.Errorf("after the huge line: %v, long %d, %d bytes skipped", got, r.Long, r.Skipped)
	}
}

func TestPatterns(t *testing.T) {
	tests := []struct {
		description string
		patterns    []string
		log         string
		want        []Point
	}{
		{"first group, the k-th match is step k", []string{`loss=loss=(\S+)`}, "epoch 1 loss=0.9\nnoise\nepoch 2 loss=0.5\n",
			[]Point{{1, "loss", 0.9}, {2, "loss", 0.5}}},
		{"named step and value", []string{`loss=step (?P<step>\d+) .*loss (?P<value>\S+)`}, "step 100 lr 0.1 loss 0.7\nstep 200 lr 0.1 loss 0.6\n",
			[]Point{{100, "loss", 0.7}, {200, "loss", 0.6}}},
		{"a step group first, the value the other group", []string{`acc=it (?P<step>\d+): (\S+)`}, "it 5: 0.25\n",
			[]Point{{5, "acc", 0.25}}},
		{"no number: no point; nan and inf are numbers", []string{`loss=loss=(\S+)`}, "loss=nan\nloss=inf\nloss=0x10\nloss=abc\nloss=1e-3\n",
			[]Point{{1, "loss", math.NaN()}, {2, "loss", math.Inf(1)}, {3, "loss", 0.001}}},
		{"a step group that is no finite number: no point", []string{`loss=step (?P<step>\S+) loss (?P<value>\S+)`}, "step inf loss 1\nstep nan loss 2\nstep 3 loss 3\n",
			[]Point{{3, "loss", 3}}},
		{"two patterns count their steps apart", []string{`a=a=(\d+)`, `b=b=(\d+)`}, "a=1\na=2 b=7\n",
			[]Point{{1, "a", 1}, {2, "a", 2}, {1, "b", 7}}},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			var ps []Pattern
			for _, s := range tc.patterns {
				p, err := ParsePattern(s)
				if err != nil {
					t.Fatal(err)
				}
				ps = append(ps, p)
			}
			path := filepath.Join(t.TempDir(), "stdout.log")
			appendFile(t, path, tc.log)
			if got := readPoints(t, &Reader{Path: path, Patterns: ps}, true); fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	for _, bad := range []string{"loss", "=x", "loss=", "loss=("} {
		if _, err := ParsePattern(bad); err == nil {
			t.Errorf("ParsePattern(%q) took it", bad)
		}
	}
}

func TestSummary(t *testing.T) {
	var s Summary
	s.Limit = 8
	for i := 1; i <= 1000; i++ {
		s.Add(Point{Step: float64(i), Name: "loss", Value: 1 / float64(i)})
	}
	m := s.Get("loss")
	if len(m.Points) > 8 || m.N != 1000 || m.Last != 0.001 || m.LastStep != 1000 || m.Max != 1 || m.Min != 0.001 {
		t.Fatalf("summary %+v", m)
	}
	curve := m.Curve(5)
	if len(curve) != 5 || curve[0] != [2]float64{1, 1} || curve[4] != [2]float64{1000, 0.001} {
		t.Errorf("Curve(5) = %v: want 5 points from the first to the last", curve)
	}
	for i := 1; i < len(m.Points); i++ {
		if m.Points[i][0]-m.Points[i-1][0] != m.Points[1][0]-m.Points[0][0] {
			t.Errorf("points not evenly thinned: %v", m.Points)
			break
		}
	}
	// A lower step starts the series over: the curve is the new stretch.
	s.Add(Point{Step: 1, Name: "loss", Value: 5})
	s.Add(Point{Step: 2, Name: "loss", Value: 4})
	if m := s.Get("loss"); m.N != 2 || m.Max != 5 || fmt.Sprint(m.Curve(10)) != "[[1 5] [2 4]]" {
		t.Errorf("after a restart: %+v", m)
	}
	// The same step twice is no restart.
	s.Add(Point{Step: 2, Name: "loss", Value: 3})
	if m := s.Get("loss"); m.N != 3 || m.Last != 3 {
		t.Errorf("the same step twice: %+v", m)
	}
	// A NaN is the last value, and no point of the curve.
	s.Add(Point{Step: 3, Name: "loss", Value: math.NaN()})
	if m := s.Get("loss"); !math.IsNaN(m.Last) || m.N != 3 || fmt.Sprint(m.Curve(10)) != "[[1 5] [2 4] [2 3]]" {
		t.Errorf("after a NaN: %+v, curve %v", m, m.Curve(10))
	}
	s.Add(Point{Step: 1, Name: "acc", Value: 0.5})
	s.Add(Point{Step: 3, Name: "gn", Value: math.Inf(1)})
	names, values := s.Final()
	if fmt.Sprint(names) != "[loss acc gn]" || string(values[0]) != `"nan"` || string(values[1]) != "0.5" || string(values[2]) != `"inf"` {
		t.Errorf("Final = %v %s", names, values)
	}
}

// TestManyLinesBounded: 300,000 lines (8.6 MB) cost a Summary no more
// than its limit of points, and one Read no more than ReadBudget bytes:
// the newest, so the last value is the run's last; the rest is skipped
// and counted.
func TestManyLinesBounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	var b strings.Builder
	for i := range 300_000 {
		fmt.Fprintf(&b, "{\"step\": %d, \"loss\": %g}\n", i, 1/float64(i+1))
	}
	appendFile(t, path, b.String())
	var s Summary
	r := &Reader{Path: path}
	if err := r.Read(true, s.Add); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(path)
	m := s.Get("loss")
	if m == nil || len(m.Points) > defaultLimit || m.LastStep != 299_999 || m.Last != 1/float64(300_000) {
		t.Fatalf("series %+v: want at most %d points and the last line's value", m, defaultLimit)
	}
	if read := st.Size() - r.Skipped; read > ReadBudget || r.Skipped == 0 || m.N >= 300_000 {
		t.Errorf("read %d bytes of %d (%d skipped), %d points: want at most %d read, the newest", read, st.Size(), r.Skipped, m.N, ReadBudget)
	}
}

// FuzzReader: any bytes, read in two parts, never panic, and give points
// at finite steps, the same as one read of the whole (a value may be NaN
// or an infinity: a loss gone NaN is recorded as such).
func FuzzReader(f *testing.F) {
	f.Add([]byte("{\"step\": 1, \"loss\": 0.5}\n{\"loss\": 1e308}\n"), 10)
	f.Add([]byte("not json\n{\"a\": [1, {\"b\": 2}]}\r\n{"), 3)
	f.Add([]byte("loss=1 step 3\n"), 0)
	f.Fuzz(func(t *testing.T, data []byte, cut int) {
		cut = min(max(cut, 0), len(data))
		p, _ := ParsePattern(`loss=loss=(\S+)`)
		for _, patterns := range [][]Pattern{nil, {p}} {
			dir := t.TempDir()
			whole, parts := filepath.Join(dir, "a"), filepath.Join(dir, "b")
			appendFile(t, whole, string(data))
			appendFile(t, parts, string(data[:cut]))
			one := readPoints(t, &Reader{Path: whole, Patterns: patterns}, true)
			r := &Reader{Path: parts, Patterns: patterns}
			two := readPoints(t, r, false)
			appendFile(t, parts, string(data[cut:]))
			two = append(two, readPoints(t, r, true)...)
			if !slices.EqualFunc(one, two, samePoint) {
				t.Fatalf("one read %v, two reads %v", one, two)
			}
			for _, pt := range one {
				if math.IsNaN(pt.Step) || math.IsInf(pt.Step, 0) {
					t.Fatalf("a point at no finite step: %v", pt)
				}
			}
		}
	})
}

// samePoint is a == b, a NaN value equal to a NaN value.
func samePoint(a, b Point) bool {
	return a.Step == b.Step && a.Name == b.Name && (a.Value == b.Value || math.IsNaN(a.Value) && math.IsNaN(b.Value))
}

// FuzzParseObject: the compact path reads what encoding/json reads, and
// the same.
func FuzzParseObject(f *testing.F) {
	f.Add(`{"loss":0.41,"acc":"nan","l":[1,{"a":"}"}],"s":"a,b"}`)
	f.Add(`{"lr": 0.1}`)
	f.Add(`{"a":1,"a":2}`)
	f.Fuzz(func(t *testing.T, obj string) {
		m, keys, ok := parseCompact([]byte(obj))
		if !ok {
			return
		}
		dec := json.NewDecoder(strings.NewReader(obj))
		var want map[string]json.RawMessage
		if err := dec.Decode(&want); err != nil || dec.More() {
			t.Fatalf("parseCompact took %q, which encoding/json refuses: %v", obj, err)
		}
		if len(keys) != len(want) || len(m) != len(want) {
			t.Fatalf("%q: keys %v, want %v", obj, keys, want)
		}
		for k, v := range want {
			if string(m[k]) != string(v) {
				t.Fatalf("%q: %s = %s, want %s", obj, k, m[k], v)
			}
		}
	})
}

func TestField(t *testing.T) {
	obj := []byte(`{"loss":[[0,2.2],[100,1.6]],"acc":[[0,0.3]],"x\"y":1}`)
	for _, tc := range []struct{ key, want string }{{"loss", "[[0,2.2],[100,1.6]]"}, {"acc", "[[0,0.3]]"}, {"nope", ""}} {
		if got := string(Field(obj, tc.key)); got != tc.want {
			t.Errorf("Field(%s) = %q, want %q", tc.key, got, tc.want)
		}
	}
	if Field([]byte(`{"loss":[1,}`), "loss") != nil || Field([]byte(`{"loss":01}`), "loss") != nil {
		t.Error("Field took invalid JSON")
	}
}

// TestReport: what an attempt's record holds of a run's metrics: the last
// values, metrics.json's on top, a metric gone NaN said as "nan" and left
// out of its curve, the malformed lines counted, and the curves valid JSON
// (a ledger record must encode).
func TestReport(t *testing.T) {
	dir := t.TempDir()
	run := "runs/a"
	appendFile(t, filepath.Join(dir, run, FileName), `{"step": 1, "loss": 2, "acc": 0.1}`+"\n"+"junk\n"+`{"step": 2, "loss": 1.5, "acc": 0.2}`+"\n"+`{"step": 3, "loss": NaN}`+"\n")
	appendFile(t, filepath.Join(dir, run, finalFile), `{"acc": 0.25, "test_acc": 0.3}`)
	final, curves, skipped := Report(dir, run, "", nil, 12)
	if string(final) != `{"loss":"nan","acc":0.25,"test_acc":0.3}` || skipped != 1 {
		t.Errorf("final %s, skipped %d", final, skipped)
	}
	if !json.Valid(curves) || string(curves) != `{"loss":[[1,2],[2,1.5]],"acc":[[1,0.1],[2,0.2]]}` {
		t.Errorf("curves %s: want valid JSON without the NaN", curves)
	}
	// A run without metrics has none; a broken metrics.json is said.
	final, curves, _ = Report(dir, "runs/none", "", nil, 12)
	if string(final) != "{}" || curves != nil {
		t.Errorf("no metrics: %s %s", final, curves)
	}
	appendFile(t, filepath.Join(dir, "runs/bad", finalFile), `{"acc": `)
	if final, _, _ = Report(dir, "runs/bad", "", nil, 12); !json.Valid(final) || !strings.Contains(string(final), `"metrics_error":`) {
		t.Errorf("a broken metrics.json: %s", final)
	}
}

// FuzzFlatLine: the scan of flat lines reads what encoding/json reads,
// and the same: points, steps, and whether the line was one.
func FuzzFlatLine(f *testing.F) {
	for _, s := range []string{`{"step": 200, "loss": 0.41, "acc": 0.83}`, `{"loss": NaN, "gn": -Infinity, "s": "x", "b": true, "z": null}`,
		`{}`, ` { "loss" : 1e400 , "step" : 3 } `, `{"step": "a", "loss": 01}`, `{"step": Infinity}`, `{"a": 1}}`, `{"a": [1]}`, `{"a\"b": 1}`, `{"a": -0.5e-3}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		var fast, slow []Point
		rf, rs := &Reader{steps: []float64{5}}, &Reader{steps: []float64{5}}
		ok, handled := rf.flat([]byte(line), func(p Point) { fast = append(fast, p) })
		if !handled {
			return
		}
		want := rs.objectJSON([]byte(line), func(p Point) { slow = append(slow, p) })
		if ok != want || fmt.Sprint(fast) != fmt.Sprint(slow) || ok && rf.steps[0] != rs.steps[0] {
			t.Fatalf("%q: the scan says %v %v (step %v), encoding/json %v %v (step %v)", line, ok, fast, rf.steps, want, slow, rs.steps)
		}
	})
}

// BenchmarkReadLines is the metrics file a run writes as fast as it can
// (yes '{"loss":0.5}'): how many bytes a second one Read takes.
func BenchmarkReadLines(b *testing.B) {
	path := filepath.Join(b.TempDir(), FileName)
	appendFile(&testing.T{}, path, strings.Repeat("{\"step\": 12345, \"loss\": 0.4321, \"acc\": 0.87}\n", ReadBudget/46))
	st, _ := os.Stat(path)
	b.SetBytes(st.Size())
	for b.Loop() {
		var s Summary
		r := &Reader{Path: path}
		r.Read(true, s.Add)
	}
}
