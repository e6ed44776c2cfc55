package metrics

import "testing"

// TestParseRank: NAME[:min|max], the direction as the name suggests when
// unsaid.
func TestParseRank(t *testing.T) {
	tests := []struct {
		spec, name string
		higher, ok bool
	}{
		{"loss", "loss", false, true},
		{"val_acc", "val_acc", true, true},
		{"acc:min", "acc", false, true},
		{"loss:max", "loss", true, true},
		{"loss:down", "loss", false, false},
	}
	for _, tc := range tests {
		if name, higher, ok := ParseRank(tc.spec); name != tc.name || higher != tc.higher || ok != tc.ok {
			t.Errorf("ParseRank(%q) = %q, %v, %v; want %q, %v, %v", tc.spec, name, higher, ok, tc.name, tc.higher, tc.ok)
		}
	}
}
