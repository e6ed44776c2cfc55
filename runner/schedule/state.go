package schedule

import "github.com/nodepack/nodepack/runner/run"

// State is what the earlier sessions of a sweep leave its policy, handed
// over in one value when the sweep resumes (the ledger's fold makes it:
// ledger.Log.PolicyState): each run's attempts and whether it is paused
// (Runs; nil for a sweep that never ran), where each shape's density
// stood (Densities, by the shape written with spaces between its
// arguments), and the pruning judgements, in order. The zero State is a
// fresh sweep.
type State struct {
	Runs       Past
	Densities  map[string]DensityStart
	Judgements []run.Judgement
}

// Past is the runs of earlier sessions as the policy resumes them.
type Past interface {
	// PriorAttempts is how many attempts run id had: its next one
	// counts on from there.
	PriorAttempts(id string) int
	// PausedRun says run id was paused (judged out, keeping its
	// checkpoints): under the same pruning policy it waits for a
	// promotion; without it, it runs from its checkpoint.
	PausedRun(id string) bool
}

// Attempts is how many attempts run id had in earlier sessions.
func (st State) Attempts(id string) int {
	if st.Runs == nil {
		return 0
	}
	return max(0, st.Runs.PriorAttempts(id))
}

// Paused says run id was paused in an earlier session.
func (st State) Paused(id string) bool { return st.Runs != nil && st.Runs.PausedRun(id) }

// Resume starts the scheduler from what earlier sessions left (st): each
// shape's density where the last decision left it (a level past
// pack.AutoRunsPerGPU is taken as that, one below 1 is ignored).
func (s *Scheduler) Resume(st State) { s.resumed = st.Densities }

// Resume replays the judgements earlier sessions recorded (st.Judgements):
// their values join the rungs, and their pauses are the policy's.
func (p *Pruner) Resume(st State) {
	for _, j := range st.Judgements {
		p.Replay(j)
	}
}
