package sweep

import (
	"encoding/json"
	"strings"
	"testing"
)

// searcher opens the proposals of a searcher's sweep of cmd.
func searcher(t testing.TB, cmd ...string) *Proposals {
	t.Helper()
	src, err := Spec{Search: "searcher.py", Command: cmd}.Open()
	if err != nil {
		t.Fatal(err)
	}
	p, err := src.Proposals("searcher")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestReplies: each reply grammar's line, as docs/search.md says it.
func TestReplies(t *testing.T) {
	p := searcher(t, "python", "train.py")
	out := strings.Join([]string{
		`{"lr": 0.1, "width": 64}`,
		``,
		`# a comment`,
		`{"nodepack": "wait"}`,
		`{"lr": 0.01, "nodepack": {"gpus": 2, "cpus": 4}}`,
		`{"lr": 0.1, "width": 64}`,
		`{"nodepack": "done"}`,
	}, "\n")
	var got []Reply
	for rep, err := range p.Replies(strings.NewReader(out), 7) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, rep)
	}
	if len(got) != 5 {
		t.Fatalf("%d replies, want 5: %+v", len(got), got)
	}
	first, wait, big, again, done := got[0], got[1], got[2], got[3], got[4]
	if strings.Join(first.Run.Args, " ") != "python train.py --lr=0.1 --width=64" || first.Run.Index != 7 || first.Run.Origin != "searcher:1" || first.Line != 1 {
		t.Errorf("first: %+v", first)
	}
	if !wait.Wait || wait.Line != 4 || !done.Done || done.Line != 7 {
		t.Errorf("control words: %+v %+v", wait, done)
	}
	if big.Run.Request == nil || big.Run.Request.GPUs != 2 || big.Run.Request.CPUs != 4 || big.Run.Index != 8 {
		t.Errorf("a proposal with a request: %+v", big.Run)
	}
	if again.Run.ID != first.Run.ID || again.Run.Index != 9 {
		t.Errorf("the same proposal again: ID %s index %d, want %s (one run), index 9", again.Run.ID, again.Run.Index, first.Run.ID)
	}
	// An earlier session's run made again from its ledger's record is the
	// run the proposal made.
	params, _ := json.Marshal(map[string]any{"lr": 0.1, "width": 64})
	rerun, err := p.Again(params, "", 0, "searcher:1")
	if err != nil || rerun.ID != first.Run.ID || strings.Join(rerun.Args, " ") != strings.Join(first.Run.Args, " ") {
		t.Errorf("Again: %+v %v, want ID %s", rerun, err, first.Run.ID)
	}
}

// TestRepliesRefused: a reply that is no run names the searcher's line
// and column, and ends the replies.
func TestRepliesRefused(t *testing.T) {
	p := searcher(t, "train", "--at={index}")
	for _, tc := range []struct{ out, want string }{
		{"lr=0.1\n", "searcher:1:1: "},
		{"{\"lr\": 1}\n[1, 2]\n", "searcher:2:1: "},
		{`{"nodepack": "later"}`, `searcher:1:13: unknown word "later"`},
		{`{"nodepack": {"gpus": "many"}}`, "searcher:1:"},
		{`{"lr": 1} {"lr": 2}`, "searcher:1:"},
		{strings.Repeat("a", 2<<20) + "\n", "searcher:1"},
	} {
		n := 0
		var last error
		for _, err := range p.Replies(strings.NewReader(tc.out), 0) {
			n++
			last = err
		}
		if last == nil || !strings.HasPrefix(last.Error(), tc.want) {
			t.Errorf("%.40q: %v, want an error starting %q", tc.out, last, tc.want)
		}
	}
}

// FuzzReplies: any searcher output is a sequence of replies, each a run
// of the command, wait or done, or it stops with an error naming the
// searcher's line; nothing panics.
func FuzzReplies(f *testing.F) {
	for _, s := range []string{`{"lr": 0.1}` + "\n", `{"nodepack": "wait"}` + "\n" + `{"nodepack": "done"}`, `{"a": [1, {"b": null}], "nodepack": {"gpus": 0.5}}`,
		"\n# c\n{}\n", `{"nodepack": 1}`, `{"nodepack": "done", "x": 1}`, "[1]\n", `{"a": "\u0000"}`} {
		f.Add(s)
	}
	p := searcher(f, "p", "{index}")
	f.Fuzz(func(t *testing.T, text string) {
		n := 0
		for rep, err := range p.Replies(strings.NewReader(text), 0) {
			if err != nil {
				if !strings.HasPrefix(err.Error(), "searcher:") {
					t.Errorf("error %q does not name the searcher's line", err)
				}
				return
			}
			switch {
			case rep.Wait, rep.Done:
				if rep.Wait == rep.Done || rep.Run.Args != nil {
					t.Fatalf("a control word and a run: %+v", rep)
				}
			default:
				if len(rep.Run.Args) < 2 || rep.Run.Args[0] != "p" || rep.Run.Index != n || rep.Run.ID == "" {
					t.Fatalf("run %d: %+v", n, rep.Run)
				}
				n++
			}
		}
	})
}

// TestSearchDefinition: a searcher's command chooses the runs and does
// not define the sweep: another searcher or budget goes on in the same
// directory, while another command is another sweep.
func TestSearchDefinition(t *testing.T) {
	open := func(search string, cmd ...string) Definition {
		src, err := Spec{Search: search, Command: cmd}.Open()
		if err != nil {
			t.Fatal(err)
		}
		return src.Definition()
	}
	tpe30, tpe40, random := open("python3 tpe.py 30", "python", "train.py"), open("python3 tpe.py 40", "python", "train.py"), open("python3 random_search.py", "python", "train.py")
	other := open("python3 tpe.py 30", "python", "eval.py")
	if tpe30.Key() != tpe40.Key() || tpe30.Key() != random.Key() || len(tpe40.Changes(tpe30)) != 0 || len(random.Changes(tpe30)) != 0 {
		t.Errorf("another searcher changes the sweep: keys %s %s %s, changes %q", tpe30.Key(), tpe40.Key(), random.Key(), random.Changes(tpe30))
	}
	if other.Key() == tpe30.Key() || len(other.Changes(tpe30)) != 1 {
		t.Errorf("another command is the same sweep: %q", other.Changes(tpe30))
	}
	if tpe30.Label() != "tpe" || tpe30.Source != "python3 tpe.py 30" || tpe30.Kind != KindSearch {
		t.Errorf("definition %+v, label %q", tpe30, tpe30.Label())
	}
}
