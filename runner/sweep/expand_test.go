package sweep

import (
	"iter"
	"slices"
	"strings"
	"testing"

	"github.com/nodepack/nodepack/pack"

	"github.com/nodepack/nodepack/runner/run"
)

func ids(t *testing.T, seq iter.Seq2[run.Run, error]) []string {
	t.Helper()
	var out []string
	for r, err := range seq {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r.ID)
	}
	return out
}

func mustGrid(t *testing.T, yml string) *gridSweep {
	t.Helper()
	g, err := readGrid(strings.NewReader(yml), "params.yml")
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// seqOrPanic takes a source's (sequence, error) as one argument; the
// sources in these tests are valid.
func seqOrPanic(seq iter.Seq2[run.Run, error], err error) iter.Seq2[run.Run, error] {
	if err != nil {
		panic(err)
	}
	return seq
}

// TestIDsFollowContent checks the identity promise: a run's ID depends on
// its argv, added environment and rep, not on its position, so a ledger
// recognises finished runs after the source grows.
func TestIDsFollowContent(t *testing.T) {
	tasks := "echo a\necho b\necho a\n"
	t.Run("a task file keeps its IDs through Expand", func(t *testing.T) {
		plain := ids(t, readTaskFile(strings.NewReader(tasks), "t", pack.Request{}))
		expanded := ids(t, expand(readTaskFile(strings.NewReader(tasks), "t", pack.Request{}), expandOptions{Reps: 1}))
		if !slices.Equal(plain, expanded) || plain[2] != plain[0]+"-2" {
			t.Errorf("ReadTaskFile IDs %q, through Expand %q", plain, expanded)
		}
	})
	t.Run("more reps keep the IDs of the earlier reps", func(t *testing.T) {
		two := ids(t, expand(readTaskFile(strings.NewReader(tasks), "t", pack.Request{}), expandOptions{Reps: 2}))
		three := ids(t, expand(readTaskFile(strings.NewReader(tasks), "t", pack.Request{}), expandOptions{Reps: 3}))
		for _, id := range two {
			if !slices.Contains(three, id) {
				t.Errorf("ID %s of --reps 2 is missing with --reps 3", id)
			}
		}
		if len(compactSet(three)) != 9 {
			t.Errorf("--reps 3 IDs are not distinct: %q", three)
		}
	})
	t.Run("a grown grid keeps the IDs of its old combinations", func(t *testing.T) {
		before := ids(t, seqOrPanic(mustGrid(t, "a: [1, 2]\nb: [x, y]\n").Runs([]string{"p"}, expandOptions{})))
		after := ids(t, seqOrPanic(mustGrid(t, "a: [0, 1, 2, 3]\nb: [x, y, z]\n").Runs([]string{"p"}, expandOptions{})))
		for _, id := range before {
			if !slices.Contains(after, id) {
				t.Errorf("ID %s lost when the grid grew", id)
			}
		}
	})
	t.Run("lines added before do not change IDs, even with {index}", func(t *testing.T) {
		cmd := []string{"p", "--i={index}", "--id={run_id}"}
		before := ids(t, seqOrPanic(readParams(strings.NewReader(`{"a":1}`+"\n"+`{"a":2}`+"\n"), "r", cmd, expandOptions{})))
		after := ids(t, seqOrPanic(readParams(strings.NewReader(`{"a":0}`+"\n"+`{"a":1}`+"\n"+`{"a":2}`+"\n"), "r", cmd, expandOptions{})))
		if !slices.Equal(before, after[1:]) {
			t.Errorf("IDs %q became %q", before, after[1:])
		}
	})
	t.Run("identical runs are told apart the same way every time", func(t *testing.T) {
		text := `{"a":1}` + "\n" + `{"a":1}` + "\n"
		first := ids(t, seqOrPanic(readParams(strings.NewReader(text), "r", []string{"p"}, expandOptions{})))
		again := ids(t, seqOrPanic(readParams(strings.NewReader(text), "r", []string{"p"}, expandOptions{})))
		if first[1] != first[0]+"-2" || !slices.Equal(first, again) {
			t.Errorf("IDs %q then %q; want X, X-2 both times", first, again)
		}
	})
	t.Run("added environment is part of the ID", func(t *testing.T) {
		r := run.Run{Args: []string{"p"}}
		withEnv := r
		withEnv.Env = []string{"X=1"}
		got := ids(t, expand(run.Runs(r, withEnv), expandOptions{}))
		if got[0] == got[1] || strings.Contains(got[1], "-") {
			t.Errorf("IDs %q: the env should make a different ID, not a repeat", got)
		}
	})
}

func compactSet(s []string) map[string]bool {
	m := map[string]bool{}
	for _, x := range s {
		m[x] = true
	}
	return m
}

func TestExpandStopsAtTheFirstError(t *testing.T) {
	var n int
	for _, err := range expand(readTaskFile(strings.NewReader("true\nbad\x00\ntrue\n"), "t", pack.Request{}), expandOptions{Reps: 2}) {
		n++
		if err != nil {
			if !strings.Contains(err.Error(), "t:2: line contains a NUL byte") {
				t.Errorf("error = %v", err)
			}
			break
		}
	}
	if n != 3 {
		t.Errorf("%d items before and with the error, want 2 runs and the error", n)
	}
}
