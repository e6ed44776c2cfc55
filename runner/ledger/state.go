package ledger

import "github.com/nodepack/nodepack/runner/schedule"

// PolicyState is what the sessions of this log leave the scheduling
// policy of a resumed sweep, in one value: each run's attempts and whether
// it is paused, where each shape's density stood after its last decision,
// and the pruning judgements in the order they were recorded.
func (log *Log) PolicyState() schedule.State {
	st := schedule.State{Runs: policyPast{log: log}, Judgements: log.Judgements()}
	for i := range log.runs {
		if states[log.runs[i].state] == StatePaused {
			st.Runs = policyPast{log: log, anyPaused: true}
			break
		}
	}
	if len(log.Densities) > 0 {
		st.Densities = make(map[string]schedule.DensityStart, len(log.Densities))
		for _, d := range log.Densities { // oldest first: the last decision stands
			st.Densities[d.Shape] = schedule.DensityStart{Level: d.To, Final: d.Final}
		}
	}
	return st
}

// policyPast is a log's runs as schedule.Past.
type policyPast struct {
	log       *Log
	anyPaused bool // a lookup per run only where there are paused runs to find
}

func (p policyPast) PriorAttempts(id string) int { return p.log.PriorAttempts(id) }

func (p policyPast) PausedRun(id string) bool {
	if !p.anyPaused {
		return false
	}
	r, ok := p.log.Run(id)
	return ok && r.State == StatePaused
}
