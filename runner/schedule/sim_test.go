package schedule

import (
	"container/heap"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/runner/failure"
)

// Fixture topologies, in the style of kubelet's cpumanager tests.

// node returns a topology of sockets × cores CPUs (no SMT, one NUMA node
// per socket) with gpus whole GPUs spread evenly over the sockets, each
// with gpuMem bytes of memory, and mem bytes of host memory.
func node(sockets, cores, gpus int, gpuMem, mem uint64) pack.Topology {
	var t pack.Topology
	for s := range sockets {
		for c := range cores {
			t.CPUs = append(t.CPUs, pack.CPU{ID: s*cores + c, Core: c, Socket: s, NUMA: s})
		}
	}
	for i := range gpus {
		numa := i * sockets / max(gpus, 1)
		var local []int
		for c := range cores {
			local = append(local, numa*cores+c)
		}
		t.GPUs = append(t.GPUs, pack.GPU{Index: i, UUID: fmt.Sprintf("GPU-%d", i), NUMA: numa, LocalCPUs: local, MemoryBytes: gpuMem})
	}
	t.Memory = mem
	return t
}

var (
	// fourGPUs is a common 2-socket server: 2 × 16 cores, GPUs 0-1 on
	// socket 0 and 2-3 on socket 1, 40 GiB each, 256 GiB of memory.
	fourGPUs = node(2, 16, 4, 40<<30, 256<<30)
	// fourCPUs is a small machine without GPUs.
	fourCPUs = node(1, 4, 0, 0, 16<<30)
)

// simRun is a run of a simulated sweep.
type simRun struct {
	req   pack.Request
	shape string
	dur   time.Duration // each attempt's length
	// fail holds the classes of its first attempts' failures; the attempt
	// after them succeeds.
	fail []string
	// settle is when, after an attempt's start, its GPU memory settles at
	// peak (the sampler's report); zero: never reported, it ends first.
	settle time.Duration
	peak   uint64
}

// at is something the test does to the scheduler at a virtual time: a GPU
// fault, moved deadlines.
type at struct {
	after time.Duration
	do    func(*Scheduler)
}

// simEvent is a future event of the simulation.
type simEvent struct {
	when    time.Time
	seq     int // ties in the order they were made
	kind    int // end, settle, restart, action
	key     Key
	attempt int
	do      func(*Scheduler)
}

const (
	evAction = iota
	evEnd
	evSettle
	evRestart
)

type simEvents []simEvent

func (h simEvents) Len() int { return len(h) }
func (h simEvents) Less(i, j int) bool {
	if !h[i].when.Equal(h[j].when) {
		return h[i].when.Before(h[j].when)
	}
	return h[i].seq < h[j].seq
}
func (h simEvents) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *simEvents) Push(x any)   { *h = append(*h, x.(simEvent)) }
func (h *simEvents) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// simResult is what a simulated sweep did.
type simResult struct {
	starts     []string // "300ms r1 lane1 GPU-1 #1", one per attempt started
	ends       []string // "300ms r1 failed cuda-oom: retry anew", one per attempt
	makespan   time.Duration
	maxRunning int
	refused    []string
	halted     bool // MaxFailures
	drained    bool
	terminated time.Duration // when Next said Terminate; -1 never
}

var simStart = time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)

// simulate runs a sweep of runs through a Scheduler of cfg in virtual
// time, as package execute does: it adds runs while the scheduler has
// room, starts what Next decides, tells it each start, settle and end,
// and moves the clock to the next event or to Next's Wake.
func simulate(t testing.TB, cfg Config, runs []simRun, actions ...at) simResult {
	t.Helper()
	s, err := New(cfg, simStart)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	res := simResult{terminated: -1}
	now := simStart
	var events simEvents
	seq := 0
	push := func(e simEvent) {
		e.seq = seq
		seq++
		heap.Push(&events, e)
	}
	for _, a := range actions {
		push(simEvent{when: simStart.Add(a.after), kind: evAction, do: a.do})
	}
	index := map[Key]int{}
	attempts := map[Key]int{}
	lanes := map[Key]int{}
	running := 0
	next := 0
	start := func(k Key, lane int, as pack.Assignment) {
		r := runs[index[k]]
		attempts[k]++
		lanes[k] = lane
		n := attempts[k]
		running++
		res.maxRunning = max(res.maxRunning, running)
		res.starts = append(res.starts, fmt.Sprintf("%v r%d lane%d %s #%d", now.Sub(simStart), index[k], lane, place(as), n))
		s.Began(k, now)
		if s.Started(k, n, now) && r.settle > 0 && r.settle < r.dur {
			push(simEvent{when: now.Add(r.settle), kind: evSettle, key: k, attempt: n})
		}
		push(simEvent{when: now.Add(r.dur), kind: evEnd, key: k, attempt: n})
	}
	for {
		for next < len(runs) && s.Room() {
			k, err := s.Add(runs[next].req, runs[next].shape)
			if err != nil {
				res.refused = append(res.refused, fmt.Sprintf("r%d: %v", next, err))
			} else {
				index[k] = next
			}
			next++
		}
		plan, err := s.Next(now)
		if err != nil {
			res.refused = append(res.refused, fmt.Sprintf("%v r%d: %v", now.Sub(simStart), index[err.(*RunError).Key], err))
		}
		if plan.Terminate && res.terminated < 0 {
			res.terminated = now.Sub(simStart)
		}
		res.drained = res.drained || plan.Drain
		for _, st := range plan.Starts {
			start(st.Key, st.Lane, st.Place)
		}
		if len(plan.Starts) > 0 {
			continue // the starts armed gates: ask again, as execute's loop is woken
		}
		if len(events) == 0 {
			if plan.Drain || res.halted || next >= len(runs) && s.Waiting() == 0 {
				break
			}
			if plan.Wake.IsZero() {
				t.Fatalf("%d runs wait, none runs and nothing will happen", s.Waiting())
			}
		}
		when := plan.Wake
		if len(events) > 0 && (when.IsZero() || events[0].when.Before(when)) {
			when = events[0].when
		}
		now = when
		for len(events) > 0 && !events[0].when.After(now) {
			e := heap.Pop(&events).(simEvent)
			r := runs[index[e.key]]
			switch e.kind {
			case evAction:
				e.do(s)
			case evSettle:
				s.Settled(e.key, e.attempt, r.peak)
			case evRestart:
				if at, ok := s.Turn(e.key, now); !ok {
					push(simEvent{when: at, kind: evRestart, key: e.key})
				} else if s.MayStart(now) {
					start(e.key, lanes[e.key], s.Assignment(e.key))
				} else {
					s.Release(e.key)
				}
			case evEnd:
				running--
				end := End{Outcome: Succeeded, Attempt: attempts[e.key], Peak: r.peak}
				if e.attempt <= len(r.fail) {
					end.Outcome, end.Class = Failed, failure.Class(r.fail[e.attempt-1])
				}
				after := s.Ended(e.key, end, now)
				if !after.Retry || after.Anew {
					s.Release(e.key)
				}
				line := fmt.Sprintf("%v r%d", now.Sub(simStart), index[e.key])
				if end.Outcome == Failed {
					line += " failed " + string(end.Class)
				}
				switch {
				case after.Anew:
					line += ": retry anew"
				case after.Retry:
					line += fmt.Sprintf(": retry at %v", after.At.Sub(simStart))
					push(simEvent{when: after.At, kind: evRestart, key: e.key})
				}
				if after.Halt {
					line += ": halt"
					res.halted = true
				}
				res.ends = append(res.ends, line)
				res.makespan = now.Sub(simStart)
			}
		}
	}
	return res
}

// place renders an assignment: its GPUs ("-" for none) and the request
// it serves.
func place(as pack.Assignment) string {
	var gpus []string
	for _, g := range as.GPUs {
		gpus = append(gpus, g.UUID)
	}
	s := strings.Join(gpus, ",")
	if s == "" {
		s = "-"
	}
	return s + " [" + as.Request.String() + "]"
}

// runsOf returns n runs asking for req, each lasting dur.
func runsOf(n int, req pack.Request, dur time.Duration) []simRun {
	runs := make([]simRun, n)
	for i := range runs {
		runs[i] = simRun{req: req, dur: dur}
	}
	return runs
}
