package pack

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// queueStep is one call in a queue sequence, at a time in minutes: push a
// named run, take the next one (want its name, "busy", or "name: error"),
// or release a started run.
type queueStep struct {
	at      int // minutes after the start
	push    string
	front   bool // push at the head
	request Request
	next    string // want: name, "busy", or "name: never"
	release string
}

func push(name string, r Request) queueStep { return queueStep{push: name, request: r} }
func pushFront(name string, r Request) queueStep {
	return queueStep{push: name, request: r, front: true}
}
func next(at int, want string) queueStep       { return queueStep{at: at, next: want} }
func releaseRun(at int, name string) queueStep { return queueStep{at: at, release: name} }

func TestQueue(t *testing.T) {
	one := Request{GPUs: 1, CPUs: 2}
	two := Request{GPUs: 2, CPUs: 2}
	quarter := Request{GPUShare: 250, CPUs: 1}
	tests := []struct {
		description string
		topo        Topology
		maxWait     time.Duration
		steps       []queueStep
	}{
		{
			description: "a retry pushed to the front starts before the runs that wait",
			topo:        topoFourGPU,
			maxWait:     10 * time.Minute,
			steps: []queueStep{
				push("a", one), push("b", one), push("c", one), push("d", one), push("e", one),
				next(0, "a"), next(0, "b"), next(0, "c"), next(0, "d"),
				releaseRun(1, "a"), pushFront("a again", two), next(1, "e"), // backfill: a again waits for two
				releaseRun(2, "b"), next(2, "busy"), releaseRun(3, "e"), next(3, "a again"),
			},
		},
		{
			description: "runs start in input order while they fit",
			topo:        topoFourGPU,
			maxWait:     10 * time.Minute,
			steps: []queueStep{
				push("a", one), push("b", two), push("c", one), push("d", one),
				next(0, "a"), next(0, "b"), next(0, "c"), next(0, "busy"),
				releaseRun(1, "a"), next(1, "d"),
			},
		},
		{
			description: "backfill: smaller runs start ahead of a 2-GPU run that does not fit yet",
			topo:        topoFourGPU,
			maxWait:     10 * time.Minute,
			steps: []queueStep{
				push("x1", one), push("x2", one), push("x3", one),
				next(0, "x1"), next(0, "x2"), next(0, "x3"),
				push("big", two), push("q1", quarter), push("q2", quarter),
				next(0, "q1"), next(0, "q2"), next(0, "busy"),
				releaseRun(1, "x1"), next(1, "busy"), // the quarters keep the fourth GPU
				releaseRun(2, "x2"), next(2, "big"),
			},
		},
		{
			description: "no starvation: passed for the bounded wait, the 2-GPU run reserves what frees up",
			topo:        topoFourGPU,
			maxWait:     10 * time.Minute,
			steps: []queueStep{
				push("x1", one), push("x2", one), push("x3", one), push("x4", one),
				next(0, "x1"), next(0, "x2"), next(0, "x3"), next(0, "x4"),
				push("big", two), push("s1", one), push("s2", one), push("s3", one),
				releaseRun(1, "x1"), next(1, "s1"), // backfill: big has waited 0 minutes
				releaseRun(5, "x2"), next(5, "s2"), // 4 minutes since it was first passed
				releaseRun(11, "x3"), next(11, "busy"), // 10 minutes: reserved, s3 waits though a GPU is free
				releaseRun(12, "x4"), next(12, "big"), next(12, "busy"),
				releaseRun(13, "s1"), next(13, "s3"),
			},
		},
		{
			description: "a reserved run holds only what it waits for: runs behind it use the rest",
			topo:        topoFourGPU,
			maxWait:     10 * time.Minute,
			steps: []queueStep{
				push("x1", one), push("x2", one), push("x3", one), push("x4", one),
				next(0, "x1"), next(0, "x2"), next(0, "x3"), next(0, "x4"),
				push("big", two), push("s1", one), push("s2", one),
				releaseRun(1, "x1"), next(1, "s1"), // backfill
				// Reserved: big waits for GPUs 2 and 3 (NUMA node 1), the
				// pair with fewer runs on it, so s2 may not take GPU 2...
				releaseRun(20, "x3"), next(20, "busy"),
				// ...but may take GPU 0, which big does not wait for.
				releaseRun(21, "s1"), next(21, "s2"),
				releaseRun(22, "x4"), next(22, "big"),
			},
		},
		{
			description: "a zero wait starts runs strictly in order",
			topo:        topoFourGPU,
			steps: []queueStep{
				push("x1", one), push("x2", one), push("x3", one),
				next(0, "x1"), next(0, "x2"), next(0, "x3"),
				push("big", two), push("small", one),
				next(0, "busy"),
				// x1 on GPU 0 and x2 on GPU 1 (NUMA node 0), x3 on GPU 2:
				// GPUs 0 and 3 are free but on two NUMA nodes, so big waits
				// for GPUs of one node, and small behind it too.
				releaseRun(1, "x1"), next(1, "busy"),
				releaseRun(2, "x2"), next(2, "big"), next(2, "small"),
			},
		},
		{
			description: "host memory is admitted in order too",
			topo:        Topology{CPUs: topoCPUOnly.CPUs, Memory: 64 << 30},
			maxWait:     time.Minute,
			steps: []queueStep{
				push("m40", Request{CPUs: 1, Mem: 40 << 30}), push("m30", Request{CPUs: 1, Mem: 30 << 30}),
				push("m20", Request{CPUs: 1, Mem: 20 << 30}), push("m10", Request{CPUs: 1, Mem: 10 << 30}),
				next(0, "m40"), next(0, "m20"), next(0, "busy"),
				releaseRun(2, "m40"), next(2, "m30"), next(2, "m10"),
			},
		},
		{
			description: "a run that can never fit comes out with its error",
			topo:        topoFourGPU,
			maxWait:     time.Minute,
			steps: []queueStep{
				push("huge", Request{GPUs: 8, CPUs: 1}), push("a", one),
				next(0, "huge: never"), next(0, "a"),
			},
		},
	}
	start := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)
	for _, tc := range tests {
		t.Run(tc.description, func(t *testing.T) {
			a := NewAllocator(tc.topo)
			q := NewQueue[string](a, tc.maxWait)
			running := map[string]Assignment{}
			for i, s := range tc.steps {
				now := start.Add(time.Duration(s.at) * time.Minute)
				switch {
				case s.push != "" && s.front:
					q.PushFront(s.push, s.request)
				case s.push != "":
					q.Push(s.push, s.request)
				case s.release != "":
					as, ok := running[s.release]
					if !ok {
						t.Fatalf("step %d: %s is not running", i, s.release)
					}
					a.Release(as)
					delete(running, s.release)
				default:
					name, as, err := q.Next(now)
					got := name
					switch {
					case errors.Is(err, ErrBusy):
						got = "busy"
					case errors.Is(err, ErrNeverFits):
						got = name + ": never"
					case err != nil:
						got = name + ": " + err.Error()
					default:
						running[name] = as
					}
					if got != s.next {
						t.Errorf("step %d (minute %d): Next = %q, want %q", i, s.at, got, s.next)
					}
				}
			}
		})
	}
}

// TestQueueMixedSweepFillsTheNode packs a mixed sweep on the 2-socket,
// 8-GPU fixture and checks at every start that the node is never
// over-committed and that each run got its request, and at the end that
// no GPU is left free.
func TestQueueMixedSweepFillsTheNode(t *testing.T) {
	topo := withGPUMemory(topoDGXA100, 40<<30)
	a := NewAllocator(topo)
	q := NewQueue[int](a, time.Minute)
	requests := []Request{
		{GPUs: 2, CPUs: 16}, {GPUs: 1, CPUs: 16}, {GPUShare: 250, CPUs: 4}, {GPUMem: 12 << 30, CPUs: 4}, {CPUs: 8},
	}
	for i := range 40 {
		q.Push(i, requests[i%len(requests)])
	}
	now := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)
	var live []Assignment
	for q.Len() > 0 {
		i, as, err := q.Next(now)
		if errors.Is(err, ErrBusy) {
			// Release the oldest run and try again a minute later.
			a.Release(live[0])
			live = live[1:]
			now = now.Add(time.Minute)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		req := requests[i%len(requests)]
		checkAssignment(t, topo, live, req, as)
		live = append(live, as)
		checkBookkeeping(t, a, live)
	}
	var names []string
	for _, as := range live {
		names = append(names, as.Request.Class())
	}
	if free, _ := a.Free(); len(free) > 0 || len(live) < 6 {
		t.Errorf("at the end, %d GPUs free with %d runs: %s", len(free), len(live), strings.Join(names, ", "))
	}
}
