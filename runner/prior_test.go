package runner

import "testing"

// TestPruneOf: an earlier session's policy is read from nodepack's own
// flags, never from the runs' command after "--".
func TestPruneOf(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		ok   bool
		max  bool
	}{
		{[]string{"nodepack", "run", "--prune", "acc:max,max=8", "t.txt"}, true, true},
		{[]string{"nodepack", "run", "--prune=loss,max=8", "t.txt"}, true, false},
		{[]string{"nodepack", "run", "--params", "p.jsonl", "--", "python", "train.py", "--prune", "acc:max,max=8"}, false, false},
	} {
		p, ok := pruneOf(tc.argv)
		if ok != tc.ok || ok && p.Max != tc.max {
			t.Errorf("pruneOf(%q) = %+v, %v; want ok %v, max %v", tc.argv, p, ok, tc.ok, tc.max)
		}
	}
}
