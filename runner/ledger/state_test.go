package ledger

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/nodepack/nodepack/runner/schedule"
)

// TestPolicyState: what a log hands a resumed sweep's policy: each run's
// attempts, which runs are paused, each shape's last density decision and
// the judgements, in order.
func TestPolicyState(t *testing.T) {
	density := func(from, to int, final bool) string {
		f := ""
		if final {
			f = `,"final":true`
		}
		return `{"type":"density","time":"2026-01-01T00:00:02Z","shape":"python train.py --seed=#","from":` + ledgerItoa(from) + `,"to":` + ledgerItoa(to) + f + "}\n"
	}
	text := ledgerHeader +
		ledgerStarted("a", 1) + ledgerFinished("a", 1, "failed", true) + ledgerStarted("a", 2) + ledgerFinished("a", 2, "ok", false) +
		ledgerStarted("b", 1) +
		`{"type":"rung","time":"2026-01-01T00:00:02Z","id":"b","attempt":1,"metric":"loss","rung":0,"rung_step":3,"step":3,"value":0.9,"cutoff":0.5,"others":2,"paused":true}` + "\n" +
		ledgerFinished("b", 1, "paused", false) +
		density(1, 2, false) + density(2, 3, true) + ledgerEnd
	path := filepath.Join(t.TempDir(), "ledger.jsonl")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	log, err := ReadFile(path, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st := log.PolicyState()
	if got := [3]int{st.Attempts("a"), st.Attempts("b"), st.Attempts("c")}; got != [3]int{2, 1, 0} {
		t.Errorf("attempts of a, b and a run it never saw: %v, want 2, 1, 0", got)
	}
	if st.Paused("a") || !st.Paused("b") || st.Paused("c") {
		t.Errorf("paused: a %v, b %v, c %v; want only b", st.Paused("a"), st.Paused("b"), st.Paused("c"))
	}
	if d := st.Densities["python train.py --seed=#"]; d != (schedule.DensityStart{Level: 3, Final: true}) || len(st.Densities) != 1 {
		t.Errorf("densities %+v, want the last decision: 3 runs per GPU, final", st.Densities)
	}
	if len(st.Judgements) != 1 || st.Judgements[0].Run != "b" || !st.Judgements[0].Pause {
		t.Errorf("judgements %+v, want b's pause", st.Judgements)
	}
	// A log without a paused run answers without a lookup: nothing paused.
	if fresh := (&Log{}).PolicyState(); fresh.Paused("b") || fresh.Attempts("b") != 0 {
		t.Errorf("an empty log: %+v", fresh)
	}
}
