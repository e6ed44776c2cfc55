package schedule

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/nodepack/nodepack/runner/run"
)

// report is one metric report of a run in a pruning table case; a run
// written "a!" had ended by then (Finish, not Judge).
type report struct {
	run   string
	step  float64
	value float64
}

// TestPrune: the pruning policy as table cases, each a sequence of
// reports and the judgements it must give, written run@rung:value/stop
// (or go), cutoffs aside.
func TestPrune(t *testing.T) {
	nan := math.NaN()
	tests := []struct {
		description string
		prune       Prune
		reports     []report
		want        string // the judgements, in order
	}{
		{"the first run at a rung goes on; a worse one after it is stopped (eta 3: the best third go on)",
			Prune{Metric: "loss", FirstStep: 10, MaxStep: 100},
			[]report{{"a", 10, 0.5}, {"b", 10, 0.9}, {"c", 10, 0.4}},
			"a@0:0.5/go b@0:0.9/stop c@0:0.4/go"},
		{"pause or prune: a run judged out that keeps checkpoints is paused, one that keeps none is stopped for good; one that goes on is neither",
			Prune{Metric: "loss", FirstStep: 10, MaxStep: 100},
			[]report{{"a+", 10, 0.5}, {"b+", 10, 0.9}, {"c", 10, 0.9}},
			"a@0:0.5/go b@0:0.9/pause c@0:0.9/stop"},
		{"a step between rungs judges nothing; the first step past a rung is judged with its value",
			Prune{Metric: "loss", FirstStep: 10, MaxStep: 100},
			[]report{{"a", 5, 0.9}, {"a", 12, 0.7}, {"a", 20, 0.6}},
			"a@0:0.7/go"},
		{"the same step twice is judged once",
			Prune{Metric: "loss", FirstStep: 10, MaxStep: 100},
			[]report{{"a", 10, 0.5}, {"b", 10, 0.6}, {"a", 10, 0.1}, {"b", 10, 0.1}},
			"a@0:0.5/go b@0:0.6/stop"},
		{"steps skipped: a run that jumps past two rungs is judged at each, in order, until one stops it",
			Prune{Metric: "loss", FirstStep: 10, MaxStep: 1000},
			[]report{{"a", 10, 0.5}, {"a", 30, 0.3}, {"b", 35, 0.9}},
			"a@0:0.5/go a@1:0.3/go b@0:0.9/stop"},
		{"rungs filled out of order: a later rung's first run goes on, whatever the earlier rung holds",
			Prune{Metric: "loss", FirstStep: 10, MaxStep: 1000},
			[]report{{"a", 30, 0.8}, {"b", 10, 0.1}, {"c", 10, 0.2}, {"b", 30, 0.05}},
			// c: 0.2 is within the best third of 0.1 and 0.8 (cutoff 0.33).
			"a@0:0.8/go a@1:0.8/go b@0:0.1/go c@0:0.2/go b@1:0.05/go"},
		{"a tie with the cutoff goes on",
			Prune{Metric: "loss", FirstStep: 1, Eta: 2, MaxStep: 10},
			[]report{{"a", 1, 0.5}, {"b", 1, 0.5}},
			"a@0:0.5/go b@0:0.5/go"},
		{"a run that ends before the first rung is never judged",
			Prune{Metric: "loss", FirstStep: 100, MaxStep: 1000},
			[]report{{"a", 10, 0.9}, {"a", 99, 0.8}},
			""},
		{"eta 2: the better half goes on (cutoff: the median of the runs before)",
			Prune{Metric: "loss", FirstStep: 1, Eta: 2, MaxStep: 10},
			[]report{{"a", 1, 1}, {"b", 1, 2}, {"c", 1, 3}, {"d", 1, 1.4}, {"e", 1, 1.6}, {"f", 1, 1.8}},
			// e: the median of 1, 1.4, 2 and 3 is 1.7; f: of 1, 1.4, 1.6, 2 and 3, 1.6.
			"a@0:1/go b@0:2/stop c@0:3/stop d@0:1.4/go e@0:1.6/go f@0:1.8/stop"},
		{"eta 4: only the best quarter goes on",
			Prune{Metric: "loss", FirstStep: 1, Eta: 4, MaxStep: 100},
			[]report{{"a", 1, 1}, {"b", 1, 2}, {"c", 1, 3}, {"d", 1, 4}, {"e", 1, 1.4}, {"f", 1, 1.9}},
			// e: the first quartile of 1 to 4 is 1.75; f: of 1, 1.4, 2, 3, 4, 1.4.
			"a@0:1/go b@0:2/stop c@0:3/stop d@0:4/stop e@0:1.4/go f@0:1.9/stop"},
		{"higher is better: an accuracy",
			Prune{Metric: "acc", Max: true, FirstStep: 1, Eta: 2, MaxStep: 10},
			[]report{{"a", 1, 0.5}, {"b", 1, 0.4}, {"c", 1, 0.9}},
			"a@0:0.5/go b@0:0.4/stop c@0:0.9/go"},
		{"no rung at or past the last step: the run's budget",
			Prune{Metric: "loss", FirstStep: 10, Eta: 3, MaxStep: 90},
			[]report{{"a", 10, 1}, {"a", 30, 1}, {"a", 90, 1}, {"a", 270, 1}},
			"a@0:1/go a@1:1/go"},
		{"a NaN stops its run at the rung, and is not a value others are judged by",
			Prune{Metric: "loss", FirstStep: 1, MaxStep: 10},
			[]report{{"a", 1, nan}, {"b", 1, 5}, {"c", 1, 9}},
			"a@0:NaN/stop b@0:5/go c@0:9/stop"},
		{"the median rule",
			Prune{Metric: "loss", FirstStep: 1, Median: true, MaxStep: 10},
			[]report{{"a", 1, 1}, {"b", 1, 3}, {"c", 1, 1.9}, {"d", 1, 2.1}},
			"a@0:1/go b@0:3/stop c@0:1.9/go d@0:2.1/stop"},
		{"a run that ended before it was read counts at every rung it reached, and is never stopped; later runs are judged against it",
			Prune{Metric: "loss", FirstStep: 1, MaxStep: 10},
			[]report{{"a!", 1, 0.5}, {"a!", 3, 0.3}, {"a!", 9, 0.2}, {"b!", 1, 0.9}, {"b!", 3, 0.8}, {"c", 1, 0.7}},
			// b ended worse than a at both rungs it reached: recorded, not
			// stopped. c, running, is outside the best third of 0.5 and 0.9.
			"a@0:0.5/go a@1:0.3/go a@2:0.2/go b@0:0.9/go b@1:0.8/go c@0:0.7/stop"},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			got := judgements(t, tc.prune, tc.reports, func(j run.Judgement) string {
				return fmt.Sprintf("%s@%d:%v", j.Run, j.Rung, j.Value)
			})
			if got != tc.want {
				t.Errorf("judgements\n  %s\nwant\n  %s", got, tc.want)
			}
		})
	}
}

// judgements hands the reports to a Pruner of policy p in order ("a+": a
// keeps checkpoints; "a!": a has ended, Finish) and writes the judgements
// of the runs whose names do not start with "_", each as at says and its
// verdict: stop, go or pause.
func judgements(t *testing.T, policy Prune, reports []report, at func(run.Judgement) string) string {
	t.Helper()
	p, err := NewPruner(policy)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range reports {
		name, keeps := strings.CutSuffix(r.run, "+")
		take := func(id string, step, value float64) []run.Judgement {
			return p.Judge(id, step, value, func() bool { return keeps })
		}
		if n, ended := strings.CutSuffix(name, "!"); ended {
			take, name = p.Finish, n
		}
		for _, j := range take(name, r.step, r.value) {
			if strings.HasPrefix(j.Run, "_") {
				continue
			}
			verdict := map[bool]string{true: "stop", false: "go"}[j.Stop]
			if j.Pause {
				verdict = "pause"
			}
			got = append(got, at(j)+"/"+verdict)
		}
	}
	return strings.Join(got, " ")
}

// TestPruneReplay: a pruner that replays the judgements of another makes
// the same decisions from there on, and does not judge a run again at a
// rung it was judged at (an interrupted run that runs again is judged at
// its next rungs only).
func TestPruneReplay(t *testing.T) {
	cfg := Prune{Metric: "loss", FirstStep: 10, MaxStep: 1000}
	first, _ := NewPruner(cfg)
	var recorded []run.Judgement
	for _, r := range []report{{"a", 10, 0.5}, {"b", 10, 0.7}, {"c", 10, 0.45}, {"a", 30, 0.4}} {
		recorded = append(recorded, first.Judge(r.run, r.step, r.value, nil)...)
	}
	again, _ := NewPruner(cfg)
	for _, j := range recorded {
		again.Replay(j)
	}
	for _, r := range []report{{"c", 10, 0.1}, {"c", 30, 0.39}, {"d", 10, 0.9}, {"d", 10, 0.3}} {
		a, b := first.Judge(r.run, r.step, r.value, nil), again.Judge(r.run, r.step, r.value, nil)
		if fmt.Sprint(a) != fmt.Sprint(b) {
			t.Errorf("after %+v: the first pruner judged %+v, the replayed one %+v", r, a, b)
		}
	}
	if got := again.Judge("a", 30, 9, nil); len(got) != 0 {
		t.Errorf("a was judged at rung 1 before: judged again %+v", got)
	}
	// A rung the policy does not have is left out.
	other, _ := NewPruner(Prune{Metric: "loss", FirstStep: 5, MaxStep: 1000})
	other.Replay(recorded[0])
	if _, ok := other.Judged("a"); ok {
		t.Error("a judgement at another policy's rung was replayed")
	}
	// So is a judgement of another metric at the same rungs: a loss is no
	// accuracy.
	acc, _ := NewPruner(Prune{Metric: "acc", Max: true, FirstStep: 10, MaxStep: 1000})
	for _, j := range recorded {
		acc.Replay(j)
	}
	if _, ok := acc.Judged("a"); ok {
		t.Error("a judgement of loss was replayed into a policy that judges acc")
	}
	if got := acc.Judge("e", 10, 0.1, nil); len(got) != 1 || got[0].Others != 0 || got[0].Stop {
		t.Errorf("the first acc at rung 0 was judged %+v: want against no other value, and on", got)
	}
}

func TestNewPrunerRefuses(t *testing.T) {
	for _, p := range []Prune{{}, {Metric: "loss", Eta: 1}, {Metric: "loss", FirstStep: -1}, {Metric: "loss", FirstStep: 10, MaxStep: 10},
		{Metric: "loss", MaxStep: math.NaN()}, {Metric: "loss", MaxStep: math.Inf(1)}, {Metric: "loss", FirstStep: math.Inf(1)}} {
		if _, err := NewPruner(p); err == nil {
			t.Errorf("NewPruner(%+v) took it", p)
		}
	}
	p, _ := NewPruner(Prune{Metric: "loss", FirstStep: 100, MaxStep: 2700})
	if got := fmt.Sprint(p.Rungs()); got != "[100 300 900]" {
		t.Errorf("rungs %s, want [100 300 900]", got)
	}
	// Without a last step, the rungs stop before they overflow.
	p, _ = NewPruner(Prune{Metric: "loss", FirstStep: 1e300, Eta: 1 << 30})
	if got := fmt.Sprint(p.Rungs()); got != "[1e+300]" {
		t.Errorf("rungs %s, want [1e+300]", got)
	}
}

// TestPausePromote: pause and promote as table cases. Each op is a
// report "run step value" (a curve of points "run step1:value1,
// step2:value2…"), "pause run" (the run's last judgement stopped it, and
// it keeps checkpoints), or "promote=run" ("promote=-": none may win).
func TestPausePromote(t *testing.T) {
	rank := Prune{Metric: "loss", FirstStep: 10, MaxStep: 1000}
	curve := Prune{Metric: "loss", FirstStep: 6, Eta: 3, MaxStep: 54, Curve: true}
	acc := Prune{Metric: "acc", Max: true, FirstStep: 10, MaxStep: 1000}
	// exp returns the points of final + 1.5·e^(−s/tau) at steps from..to.
	exp := func(final, tau float64, from, to int) string {
		var pts []string
		for s := from; s <= to; s++ {
			pts = append(pts, fmt.Sprintf("%d:%v", s, final+1.5*math.Exp(-float64(s)/tau)))
		}
		return strings.Join(pts, ",")
	}
	tests := []struct {
		description string
		prune       Prune
		ops         []string
	}{
		{"a paused run is promoted once later runs make its value one of the rung's best third, not before",
			rank, []string{"a 10 0.5", "b 10 0.9", "pause b", "promote=-",
				"c 10 0.95", "pause c", "d 10 1", "e 10 1.1", "f 10 1.2",
				// 0.5 0.9 0.95 1 1.1 1.2: the best third lie below 0.933.
				"promote=b", "promote=-"}},
		{"best first: the smaller share of the rung's values better than its own",
			rank, []string{"a 10 0.1", "b 10 0.5", "pause b", "c 10 0.4", "pause c", "d 10 2", "e 10 2", "f 10 2", "g 10 2", "h 10 2",
				"promote=c", "promote=b", "promote=-"}},
		{"ties: the furthest rung first, then the first paused",
			rank, []string{"a 10 0.1", "a 30 0.1", "b 10 0.5", "pause b", "c 10 0.1", "c 30 0.5", "pause c", "x 10 0.5", "x 30 0.5", "y 10 3", "y 30 3", "z 10 3", "z 30 3", "w 10 3",
				"promote=c", "promote=b"}},
		{"a run that runs again is no candidate: promoted by its caller, or started over",
			rank, []string{"a 10 0.5", "b 10 0.9", "pause b", "b 11 0.8", "c 10 2", "d 10 2", "e 10 2", "promote=-"}},
		{"promoted and judged out again at its next rung, it is paused again and a candidate there",
			rank, []string{"a 10 0.5", "a 30 0.2", "b 10 0.9", "pause b", "c 10 2", "d 10 2", "promote=b", "b 30 0.8", "pause b", "promote=-",
				"e 10 2", "e 30 2", "f 10 2", "f 30 2", "promote=b"}},
		{"a NaN never wins",
			rank, []string{"a 10 0.5", "b 10 NaN", "pause b", "c 10 9", "d 10 9", "e 10 9", "promote=-"}},
		{"higher is better: an accuracy",
			acc, []string{"a 10 0.9", "b 10 0.5", "pause b", "promote=-", "c 10 0.1", "d 10 0.1", "e 10 0.2", "promote=b"}},
		{"higher is better, best first: the higher accuracy",
			acc, []string{"a 10 0.9", "b 10 0.5", "pause b", "c 10 0.6", "pause c", "d 10 0.1", "e 10 0.1", "f 10 0.1", "g 10 0.1", "h 10 0.1",
				"promote=c", "promote=b", "promote=-"}},
		{"the curve rule: a run paused with too few points to forecast is promoted once, to get them",
			Prune{Metric: "loss", FirstStep: 3, Eta: 3, MaxStep: 54, Curve: true},
			[]string{"a " + exp(0.3, 5, 1, 3), "b " + exp(0.9, 5, 1, 3), "pause b", "promote=b", "promote=-"}},
		{"the curve rule: a run paused by its forecast is promoted once the rung's forecasts make its optimistic one of the best third",
			curve, []string{"a " + exp(0.3, 5, 1, 6), "b " + exp(0.6, 5, 1, 6), "pause b", "promote=-",
				"c " + exp(0.9, 5, 1, 6), "d " + exp(0.9, 5, 1, 6), "e " + exp(1.0, 5, 1, 6), "f " + exp(1.1, 5, 1, 6),
				"promote=b", "promote=-"}},
	}
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			p, err := NewPruner(tc.prune)
			if err != nil {
				t.Fatal(err)
			}
			last := map[string]run.Judgement{}
			for _, op := range tc.ops {
				f := strings.Fields(op)
				switch {
				case f[0] == "pause":
					j := last[f[1]]
					if !j.Stop {
						t.Fatalf("%s: %s's last judgement %+v did not stop it", op, f[1], j)
					}
					p.Pause(j)
				case strings.HasPrefix(f[0], "promote="):
					want := strings.TrimPrefix(f[0], "promote=")
					id, ok := p.Promote()
					if !ok {
						id = "-"
					}
					if id != want {
						t.Fatalf("%s: promoted %s", op, id)
					}
				default:
					var pts [][2]float64
					if len(f) == 3 {
						var s, v float64
						fmt.Sscan(f[1], &s)
						fmt.Sscan(f[2], &v)
						if f[2] == "NaN" {
							v = math.NaN()
						}
						pts = append(pts, [2]float64{s, v})
					} else {
						for _, pt := range strings.Split(f[1], ",") {
							var s, v float64
							fmt.Sscanf(pt, "%v:%v", &s, &v)
							pts = append(pts, [2]float64{s, v})
						}
					}
					for _, pt := range pts {
						for _, j := range p.Judge(f[0], pt[0], pt[1], nil) {
							last[f[0]] = j
						}
					}
				}
			}
		})
	}
}

// TestRepause: a pause an earlier session recorded makes its run a
// candidate again after Replay, unless the run was judged after it.
func TestRepause(t *testing.T) {
	cfg := Prune{Metric: "loss", FirstStep: 10, MaxStep: 1000}
	first, _ := NewPruner(cfg)
	var recorded []run.Judgement
	for _, r := range []report{{"a", 10, 0.5}, {"b", 10, 0.9}, {"c", 10, 0.95}, {"a", 30, 0.4}} {
		for _, j := range first.Judge(r.run, r.step, r.value, nil) {
			j.Pause = j.Stop
			recorded = append(recorded, j)
		}
	}
	// c was promoted, and judged again at rung 1: its pause is over.
	recorded = append(recorded, run.Judgement{Run: "c", Metric: "loss", Rung: 1, Step: 30, At: 30, Value: 0.3, Cutoff: 0.4})
	again, _ := NewPruner(cfg)
	for _, j := range recorded {
		again.Replay(j)
	}
	if again.Repause("a") || again.Repause("c") || again.Repause("z") {
		t.Error("a run not paused at its last judgement is a candidate again")
	}
	if !again.Repause("b") || again.PausedRuns() != 1 {
		t.Fatalf("b, paused, is not a candidate again (%d paused)", again.PausedRuns())
	}
	for _, r := range []report{{"d", 10, 2}, {"e", 10, 2}, {"f", 10, 2}} {
		again.Judge(r.run, r.step, r.value, nil)
	}
	if id, ok := again.Promote(); !ok || id != "b" {
		t.Errorf("promoted %q, %v: want b, now within the best third of its rung", id, ok)
	}
}
