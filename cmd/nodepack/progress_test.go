package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/nodepack/nodepack/runner/run"
)

// TestProgressCountsAPromotionOnce: a paused run counts as finished when
// it pauses; its promotion's end does not count it again, so the count
// ends at total/total (the README's pause journey: 5 runs, 6 attempts).
func TestProgressCountsAPromotionOnce(t *testing.T) {
	var out bytes.Buffer
	p := newProgress(&out, 5, 0, false)
	for _, reason := range []run.Reason{run.OK, run.Paused, run.Paused, run.Paused, run.Paused} {
		p.event(run.Event{Kind: run.Finished, Reason: reason, Run: run.Run{ID: "r"}})
	}
	p.event(run.Event{Kind: run.Finished, Reason: run.OK, Promoted: true, Attempt: 2, Run: run.Run{ID: "r"}})
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 6 || !strings.Contains(lines[5], "[5/5] ok") {
		t.Errorf("lines:\n%s\nwant six, the promotion's [5/5] ok", out.String())
	}
}
