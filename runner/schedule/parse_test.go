package schedule

import (
	"testing"
	"time"
)

// TestParsePrune: the --prune grammar, what it reads and what it refuses.
func TestParsePrune(t *testing.T) {
	p, every, err := ParsePrune("acc,eta=2,first=5,max=80,rule=curve,every=2s")
	if err != nil || p != (Prune{Metric: "acc", Max: true, Eta: 2, FirstStep: 5, MaxStep: 80, Curve: true}) || every != 2*time.Second {
		t.Errorf("a full policy: %+v every %v, %v", p, every, err)
	}
	if p, every, err := ParsePrune("loss"); err != nil || p.Metric != "loss" || p.Max || every != 0 {
		t.Errorf("the metric alone: %+v every %v, %v", p, every, err)
	}
	// The default rule: forecast with max and without first; the rank
	// rule (asha) with first, or without max (no last step to forecast).
	for s, forecast := range map[string]bool{
		"loss:min,max=40": true, "loss:min,max=40,eta=2": true, "loss:min,first=3,max=40": false, "loss:min": false,
		"loss:min,max=40,rule=asha": false, "loss:min,first=3,max=40,rule=forecast": true,
	} {
		if p, _, err := ParsePrune(s); err != nil || p.Forecast != forecast {
			t.Errorf("ParsePrune(%q): %+v, %v: want the forecast rule %v", s, p, err, forecast)
		}
	}
	for s, want := range map[string]string{
		"":                 "want METRIC[:min|max], then eta=, first=, max=, rule= or every= keys, e.g. loss:min,first=100,max=2700",
		"loss:up":          `"loss:up": want loss:min or loss:max`,
		"loss,,eta=3":      `"loss,,eta=3": an empty item between commas`,
		"loss,eta":         `"eta": want KEY=VALUE (eta, first, max, rule, every)`,
		"loss,eta=3,eta=4": "eta given twice",
		"loss,eta=1":       "eta=1: want at least 2",
		"loss,first=0":     "first=0: want a step above 0",
		"loss,rule=hyper":  "rule=hyper: want forecast, asha, median or curve",
		"loss,every=-1s":   "every=-1s: want a duration above 0",
		"loss,speed=3":     `unknown key "speed": want eta, first, max, rule or every`,
	} {
		if _, _, err := ParsePrune(s); err == nil || err.Error() != want {
			t.Errorf("ParsePrune(%q): %v, want %q", s, err, want)
		}
	}
}
