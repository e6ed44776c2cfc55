package ledger

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// poolHeader is a pool task's header of a sweep of 3 runs.
func poolHeader(task string) string {
	return `{"type":"header","time":"2026-01-01T00:00:00Z","format":"nodepack.ledger/v1","pid":1,"host":"elsewhere","pool":"` + task + `","total":3,"shard":{"index":0,"count":1}}` + "\n"
}

// TestPoolDedupe: the ledgers of a pool's tasks count each run once, by
// its best record: a run a dead task left running and the task that took
// it over ran to success is one success; after a takeover (a claims
// folder with a claim's next generation) two successes of one run are
// one; a ledger's runs of another shard are not folded with them.
func TestPoolDedupe(t *testing.T) {
	for _, tc := range []struct {
		name     string
		a, b     string
		takeover bool
		want     string // counts of the two ledgers together
	}{
		{"running-then-succeeded", ledgerStarted("r1", 1) + ledgerStarted("r2", 1) + ledgerFinished("r2", 1, "ok", false),
			ledgerStarted("r1", 1) + ledgerFinished("r1", 1, "ok", false), false, "map[succeeded:2]"},
		{"interrupted-twice", ledgerStarted("r1", 1) + ledgerFinished("r1", 1, "interrupted", false),
			ledgerStarted("r1", 1) + ledgerFinished("r1", 1, "interrupted", false), false, "map[interrupted:1]"},
		{"failed-beats-interrupted", ledgerStarted("r1", 1) + ledgerFinished("r1", 1, "interrupted", false),
			ledgerStarted("r1", 1) + ledgerFinished("r1", 1, "failed", false), false, "map[failed:1]"},
		{"twice-succeeded-after-a-takeover", ledgerStarted("r1", 1) + ledgerFinished("r1", 1, "ok", false),
			ledgerStarted("r1", 1) + ledgerFinished("r1", 1, "ok", false) + ledgerStarted("r3", 1) + ledgerFinished("r3", 1, "ok", false), true, "map[succeeded:2]"},
		{"twice-succeeded-without-a-takeover-is-left", ledgerStarted("r1", 1) + ledgerFinished("r1", 1, "ok", false),
			ledgerStarted("r1", 1) + ledgerFinished("r1", 1, "ok", false), false, "map[succeeded:2]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, PoolFileName("a")), []byte(poolHeader("a")+tc.a+ledgerEnd), 0o644)
			os.WriteFile(filepath.Join(dir, PoolFileName("b")), []byte(poolHeader("b")+tc.b+ledgerEnd), 0o644)
			if tc.takeover {
				os.MkdirAll(filepath.Join(dir, "claims"), 0o755)
				os.WriteFile(filepath.Join(dir, "claims", "0.1"), nil, 0o644)
			}
			d, err := ReadDir(dir, ReadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			sum := map[State]int{}
			for _, log := range d.Logs {
				for s, n := range log.Count() {
					sum[s] += n
				}
			}
			if got := fmt.Sprint(sum); got != tc.want {
				t.Errorf("counts %s, want %s", got, tc.want)
			}
			skip, _ := d.ResumeFilter(nil)
			if tc.want == "map[succeeded:2]" && !skip("r1") {
				t.Error("a resume would run r1 again")
			}
		})
	}
	// Static shards never share runs: their ledgers are not folded.
	dir := t.TempDir()
	shard := func(i int) string {
		return fmt.Sprintf(`{"type":"header","time":"2026-01-01T00:00:00Z","format":"nodepack.ledger/v1","pid":1,"shard":{"index":%d,"count":2}}`+"\n", i)
	}
	os.WriteFile(filepath.Join(dir, FileName(0, 2)), []byte(shard(0)+ledgerStarted("r1", 1)+ledgerEnd), 0o644)
	os.WriteFile(filepath.Join(dir, FileName(1, 2)), []byte(shard(1)+ledgerStarted("r1", 1)+ledgerFinished("r1", 1, "ok", false)+ledgerEnd), 0o644)
	d, err := ReadDir(dir, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c := d.Logs[0].Count(); c[StateInterrupted] != 1 {
		t.Errorf("a static shard's run was folded into another shard's: %v", c)
	}
}
