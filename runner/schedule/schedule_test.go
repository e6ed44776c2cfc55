package schedule

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/runner/failure"
)

const (
	gib    = uint64(1) << 30
	ms     = time.Millisecond
	sec    = time.Second
	minute = time.Minute
)

var (
	oneGPU     = pack.Request{GPUs: 1, CPUs: 4}
	twoGPUs    = pack.Request{GPUs: 2, CPUs: 8}
	quarterGPU = pack.Request{GPUShare: 250, CPUs: 2}
	bare       = pack.Request{}
)

// TestPolicy is the scheduling policy, rule by rule, in virtual time: each
// case is a sweep on a fixture topology and the starts (and ends) the
// policy decided, exactly.
func TestPolicy(t *testing.T) {
	tests := []struct {
		name, desc string
		cfg        Config
		runs       []simRun
		actions    []at
		starts     []string // every attempt's start, in order; nil: not checked
		ends       []string // every attempt's end; nil: not checked
		check      func(t *testing.T, r simResult)
	}{
		{
			name: "stagger/shorter-runs",
			desc: "runs shorter than the stagger: lane k opens at k×D, and an open lane takes the next run as soon as it is free, the first wave's each on a GPU of its own; no run waits for the clock while an open lane is free",
			cfg:  Config{Topology: fourGPUs, Request: oneGPU, Stagger: 300 * ms},
			runs: runsOf(6, oneGPU, 100*ms),
			starts: []string{
				"0s r0 lane0 GPU-0 [gpus=1 cpus=4] #1",
				"100ms r1 lane0 GPU-1 [gpus=1 cpus=4] #1",
				"200ms r2 lane0 GPU-2 [gpus=1 cpus=4] #1",
				"300ms r3 lane0 GPU-3 [gpus=1 cpus=4] #1",
				"300ms r4 lane1 GPU-2 [gpus=1 cpus=4] #1",
				"400ms r5 lane0 GPU-0 [gpus=1 cpus=4] #1",
			},
		},
		{
			name: "stagger/later-runs-do-not-wait",
			desc: "-j 2 --stagger 5s, four instant CPU runs: lane 1 opens at 5 s, and lane 0 has run all four long before; the sweep does not wait for it",
			cfg:  Config{Parallel: 2, Stagger: 5 * sec},
			runs: runsOf(4, pack.Request{}, 10*ms),
			starts: []string{
				"0s r0 lane0 - [gpus=0 cpus=0] #1",
				"10ms r1 lane0 - [gpus=0 cpus=0] #1",
				"20ms r2 lane0 - [gpus=0 cpus=0] #1",
				"30ms r3 lane0 - [gpus=0 cpus=0] #1",
			},
		},
		{
			name: "stagger/longer-than-the-sweep",
			desc: "a stagger of 1000 hours holds no run while lane 0 is free: the sweep ends when its runs do",
			cfg:  Config{Topology: fourGPUs, Request: oneGPU, Stagger: 1000 * time.Hour},
			runs: runsOf(3, oneGPU, sec),
			starts: []string{
				"0s r0 lane0 GPU-0 [gpus=1 cpus=4] #1",
				"1s r1 lane0 GPU-1 [gpus=1 cpus=4] #1",
				"2s r2 lane0 GPU-2 [gpus=1 cpus=4] #1",
			},
		},
		{
			name: "stagger/longer-runs",
			desc: "runs longer than the stagger: the wave is spaced, later starts take the first GPU that frees without waiting",
			cfg:  Config{Topology: fourGPUs, Request: oneGPU, Stagger: 300 * ms},
			runs: runsOf(6, oneGPU, 2*sec),
			starts: []string{
				"0s r0 lane0 GPU-0 [gpus=1 cpus=4] #1",
				"300ms r1 lane1 GPU-1 [gpus=1 cpus=4] #1",
				"600ms r2 lane2 GPU-2 [gpus=1 cpus=4] #1",
				"900ms r3 lane3 GPU-3 [gpus=1 cpus=4] #1",
				"2s r4 lane0 GPU-0 [gpus=1 cpus=4] #1",
				"2.3s r5 lane1 GPU-1 [gpus=1 cpus=4] #1",
			},
		},
		{
			name: "stagger/parallel-cap",
			desc: "the wave is no larger than Parallel: with 2 on 4 GPUs, two staggered starts, then each start as a lane frees",
			cfg:  Config{Topology: fourGPUs, Request: oneGPU, Stagger: 300 * ms, Parallel: 2},
			runs: runsOf(4, oneGPU, sec),
			starts: []string{
				"0s r0 lane0 GPU-0 [gpus=1 cpus=4] #1",
				"300ms r1 lane1 GPU-1 [gpus=1 cpus=4] #1",
				"1s r2 lane0 GPU-0 [gpus=1 cpus=4] #1",
				"1.3s r3 lane1 GPU-1 [gpus=1 cpus=4] #1",
			},
		},
		{
			name: "min-start-interval/spaced",
			desc: "--min-start-interval 100ms, two lanes, four instant runs: one start at a time, each 100 ms after the one before began, though a lane is free at once",
			cfg:  Config{Parallel: 2, MinStartInterval: 100 * ms},
			runs: runsOf(4, pack.Request{}, 10*ms),
			starts: []string{
				"0s r0 lane0 - [gpus=0 cpus=0] #1",
				"100ms r1 lane0 - [gpus=0 cpus=0] #1",
				"200ms r2 lane0 - [gpus=0 cpus=0] #1",
				"300ms r3 lane0 - [gpus=0 cpus=0] #1",
			},
		},
		{
			name: "min-start-interval/retries-take-their-turn",
			desc: "--min-start-interval 1s: a retry in place waits past its backoff for its turn, 1 s after the start before, and the next run waits 1 s after the retry's",
			cfg:  Config{Parallel: 2, MinStartInterval: sec, Retries: 1, RetryBackoff: 10 * ms},
			runs: []simRun{{req: pack.Request{}, dur: 10 * ms, fail: []string{"exit"}}, {req: pack.Request{}, dur: 5 * sec}},
			starts: []string{
				"0s r0 lane0 - [gpus=0 cpus=0] #1",
				"1s r0 lane0 - [gpus=0 cpus=0] #2",
				"2s r1 lane0 - [gpus=0 cpus=0] #1",
			},
		},
		{
			name: "default-cap/requests-bound",
			desc: "no Parallel: as many runs as their requests fit, 16 quarter-GPU runs on 4 GPUs at once",
			cfg:  Config{Topology: fourGPUs, Request: quarterGPU},
			runs: runsOf(40, quarterGPU, minute),
			check: func(t *testing.T, r simResult) {
				if r.maxRunning != 16 || r.makespan != 3*minute {
					t.Errorf("%d at once, makespan %v; want 16 and 3m0s", r.maxRunning, r.makespan)
				}
			},
		},
		{
			name: "default-cap/bare-runs",
			desc: "no Parallel: runs holding nothing of their own are one per CPU at once, nothing else bounds them",
			cfg:  Config{Topology: fourCPUs},
			runs: runsOf(10, bare, sec),
			check: func(t *testing.T, r simResult) {
				if r.maxRunning != 4 || r.makespan != 3*sec {
					t.Errorf("%d at once, makespan %v; want 4 (the CPUs) and 3s", r.maxRunning, r.makespan)
				}
			},
		},
		{
			name: "parallel/cap",
			desc: "Parallel caps runs at once below what fits, each in the lowest free lane",
			cfg:  Config{Topology: fourGPUs, Request: quarterGPU, Parallel: 3},
			runs: runsOf(5, quarterGPU, sec),
			starts: []string{
				"0s r0 lane0 GPU-0 [gpus=0.25 cpus=2] #1",
				"0s r1 lane1 GPU-0 [gpus=0.25 cpus=2] #1",
				"0s r2 lane2 GPU-0 [gpus=0.25 cpus=2] #1",
				"1s r3 lane0 GPU-0 [gpus=0.25 cpus=2] #1",
				"1s r4 lane1 GPU-0 [gpus=0.25 cpus=2] #1",
			},
		},
		{
			name: "no-topology/parallel",
			desc: "without a Topology nothing is placed and Parallel alone bounds the runs",
			cfg:  Config{Parallel: 2},
			runs: runsOf(3, bare, sec),
			starts: []string{
				"0s r0 lane0 - [gpus=0 cpus=0] #1",
				"0s r1 lane1 - [gpus=0 cpus=0] #1",
				"1s r2 lane0 - [gpus=0 cpus=0] #1",
			},
		},
		{
			name: "order/backfill",
			desc: "a 4-GPU run behind GPUs that free one by one lets one-GPU runs pass it for BackfillWait (90 s from the first pass at 1m), then reserves the GPUs as they free and starts when the last does, before the runs behind it",
			cfg:  Config{Topology: fourGPUs, BackfillWait: 90 * sec},
			runs: []simRun{
				{req: oneGPU, dur: 1 * minute}, {req: oneGPU, dur: 2 * minute}, {req: oneGPU, dur: 3 * minute}, {req: oneGPU, dur: 4 * minute},
				{req: pack.Request{GPUs: 4, CPUs: 8}, dur: minute},
				{req: oneGPU, dur: minute}, {req: oneGPU, dur: minute}, {req: oneGPU, dur: minute}, {req: oneGPU, dur: minute},
			},
			starts: []string{
				"0s r0 lane0 GPU-0 [gpus=1 cpus=4] #1",
				"0s r1 lane1 GPU-1 [gpus=1 cpus=4] #1",
				"0s r2 lane2 GPU-2 [gpus=1 cpus=4] #1",
				"0s r3 lane3 GPU-3 [gpus=1 cpus=4] #1",
				"1m0s r5 lane0 GPU-0 [gpus=1 cpus=4] #1",
				"2m0s r6 lane0 GPU-0 [gpus=1 cpus=4] #1",
				"2m0s r7 lane1 GPU-1 [gpus=1 cpus=4] #1",
				"4m0s r4 lane0 GPU-0,GPU-1,GPU-2,GPU-3 [gpus=4 cpus=8] #1",
				"5m0s r8 lane0 GPU-0 [gpus=1 cpus=4] #1",
			},
		},
		{
			name: "order/strict",
			desc: "a negative BackfillWait starts runs strictly in order: nothing passes the 4-GPU run",
			cfg:  Config{Topology: fourGPUs, BackfillWait: -1},
			runs: append(append(runsOf(2, oneGPU, minute), simRun{req: pack.Request{GPUs: 4, CPUs: 8}, dur: minute}), runsOf(2, oneGPU, minute)...),
			starts: []string{
				"0s r0 lane0 GPU-0 [gpus=1 cpus=4] #1",
				"0s r1 lane1 GPU-1 [gpus=1 cpus=4] #1",
				"1m0s r2 lane0 GPU-0,GPU-1,GPU-2,GPU-3 [gpus=4 cpus=8] #1",
				"2m0s r3 lane0 GPU-0 [gpus=1 cpus=4] #1",
				"2m0s r4 lane1 GPU-1 [gpus=1 cpus=4] #1",
			},
		},
		{
			name: "gate/settle",
			desc: "a run sharing its GPU by memory keeps others off that GPU until its memory settles; the next goes to another GPU meanwhile, then joins",
			cfg:  Config{Topology: node(1, 8, 2, 40<<30, 0), Measured: true},
			runs: runsOf(4, pack.Request{GPUMem: 10 * gib, CPUs: 1}, minute),
			// settle after 20 s, as the sampler would say
			starts: nil,
			check: func(t *testing.T, r simResult) {
				want := []string{
					"0s r0 lane0 GPU-0 [gpu_mem=10GiB cpus=1] #1",
					"0s r1 lane1 GPU-1 [gpu_mem=10GiB cpus=1] #1",
					"20s r2 lane2 GPU-0 [gpu_mem=10GiB cpus=1] #1",
					"20s r3 lane3 GPU-1 [gpu_mem=10GiB cpus=1] #1",
				}
				if !slices.Equal(r.starts, want) {
					t.Errorf("starts\n%s\nwant\n%s", strings.Join(r.starts, "\n"), strings.Join(want, "\n"))
				}
			},
		},
		{
			name: "gate/timeout",
			desc: "a gate whose memory never settles opens at SettleTimeout",
			cfg:  Config{Topology: node(1, 8, 1, 40<<30, 0), Measured: true, SettleTimeout: 30 * sec},
			runs: runsOf(2, pack.Request{GPUMem: 10 * gib, CPUs: 1}, minute),
			starts: []string{
				"0s r0 lane0 GPU-0 [gpu_mem=10GiB cpus=1] #1",
				"30s r1 lane1 GPU-0 [gpu_mem=10GiB cpus=1] #1",
			},
		},
		{
			name: "gate/unmeasured",
			desc: "where runs are not measured no reading of their memory can come: runs sharing a GPU by memory start as they fit, with no gate",
			cfg:  Config{Topology: node(1, 8, 1, 40<<30, 0), SettleTimeout: 30 * sec},
			runs: runsOf(2, pack.Request{GPUMem: 10 * gib, CPUs: 1}, minute),
			starts: []string{
				"0s r0 lane0 GPU-0 [gpu_mem=10GiB cpus=1] #1",
				"0s r1 lane1 GPU-0 [gpu_mem=10GiB cpus=1] #1",
			},
		},
		{
			name: "auto/learn",
			desc: "gpu_mem=auto: the shape's first run has its GPU alone and is measured (10 GiB); its claim shrinks to peak+margin (11 GiB), the waiting runs share the GPU by it, one gate at a time, until 38 GiB (the GPU less its headroom) are claimed",
			cfg:  Config{Topology: node(1, 8, 1, 40<<30, 0), Measured: true},
			runs: autoRuns(4, 10*gib, 10*sec, minute),
			starts: []string{
				"0s r0 lane0 GPU-0 [gpus=1 cpus=1] #1",
				"10s r1 lane1 GPU-0 [gpu_mem=11GiB cpus=1] #1",
				"20s r2 lane2 GPU-0 [gpu_mem=11GiB cpus=1] #1",
				"1m0s r3 lane0 GPU-0 [gpu_mem=11GiB cpus=1] #1",
			},
		},
		{
			name: "auto/unmeasured",
			desc: "gpu_mem=auto with a peak of 0 (NVML could not tell) teaches nothing: each run keeps a GPU",
			cfg:  Config{Topology: node(1, 8, 1, 40<<30, 0), Measured: true},
			runs: autoRuns(2, 0, 10*sec, minute),
			starts: []string{
				"0s r0 lane0 GPU-0 [gpus=1 cpus=1] #1",
				"1m0s r1 lane0 GPU-0 [gpus=1 cpus=1] #1",
			},
		},
		{
			name: "retry/backoff",
			desc: "an exit failure with Retries 2 is retried in place after RetryBackoff, then twice that; the third failure gives up",
			cfg:  Config{Topology: fourGPUs, Retries: 2, RetryBackoff: 10 * sec},
			runs: []simRun{{req: oneGPU, dur: sec, fail: []string{"exit", "exit", "exit"}}},
			ends: []string{
				"1s r0 failed exit: retry at 11s",
				"12s r0 failed exit: retry at 32s",
				"33s r0 failed exit",
			},
		},
		{
			name: "retry/budgets",
			desc: "host-oom and not-found get no retry unless Retry names them; Retry sets a class's own budget",
			cfg:  Config{Topology: fourGPUs, Retries: 3, Retry: map[failure.Class]int{"signal": 1}},
			runs: []simRun{
				{req: oneGPU, dur: sec, fail: []string{"host-oom"}},
				{req: oneGPU, dur: sec, fail: []string{"not-found"}},
				{req: oneGPU, dur: sec, fail: []string{"signal", "signal"}},
			},
			ends: []string{
				"1s r0 failed host-oom",
				"1s r1 failed not-found",
				"1s r2 failed signal: retry at 1s",
				"2s r2 failed signal",
			},
		},
		{
			name: "retry/cuda-oom-anew",
			desc: "a cuda-oom retry asks for more GPU memory and is placed anew, at the queue's head, ahead of runs that waited",
			cfg:  Config{Topology: node(1, 8, 1, 40<<30, 0), Retries: 1, Measured: true},
			runs: []simRun{
				{req: pack.Request{GPUMem: 20 * gib, CPUs: 1}, dur: sec, fail: []string{"cuda-oom"}},
				{req: pack.Request{GPUMem: 20 * gib, CPUs: 1}, dur: minute},
				{req: pack.Request{GPUMem: 20 * gib, CPUs: 1}, dur: minute},
			},
			check: func(t *testing.T, r simResult) {
				if !slices.Contains(r.ends, "1s r0 failed cuda-oom: retry anew") {
					t.Errorf("ends %q: want r0's retry placed anew", r.ends)
				}
				i := slices.IndexFunc(r.starts, func(s string) bool { return strings.Contains(s, " r0 ") && strings.HasSuffix(s, "#2") })
				j := slices.IndexFunc(r.starts, func(s string) bool { return strings.Contains(s, " r2 ") })
				if i < 0 || j < 0 || i > j || !strings.Contains(r.starts[i], "gpu_mem=30GiB") {
					t.Errorf("starts %q: want r0's retry with gpu_mem=30GiB before r2", r.starts)
				}
			},
		},
		{
			name: "retry/gpu-mem-anew",
			desc: "a run stopped for using more GPU memory than its gpu_mem and the headroom (gpu-mem) is retried as a cuda-oom run is: with half as much again, placed anew",
			cfg:  Config{Topology: node(1, 8, 1, 40<<30, 0), Retries: 1, Measured: true},
			runs: []simRun{
				{req: pack.Request{GPUMem: 10 * gib, CPUs: 1}, dur: sec, fail: []string{"gpu-mem"}},
				{req: pack.Request{GPUMem: 10 * gib, CPUs: 1}, dur: minute},
			},
			check: func(t *testing.T, r simResult) {
				if !slices.Contains(r.ends, "1s r0 failed gpu-mem: retry anew") {
					t.Errorf("ends %q: want r0's retry placed anew", r.ends)
				}
				if !slices.ContainsFunc(r.starts, func(s string) bool { return strings.Contains(s, " r0 ") && strings.Contains(s, "gpu_mem=15GiB") }) {
					t.Errorf("starts %q: want r0's retry with gpu_mem=15GiB", r.starts)
				}
			},
		},
		{
			name: "retry/host-oom-anew",
			desc: "a host-oom retry named in Retry asks for half as much memory again, placed anew",
			cfg:  Config{Topology: fourGPUs, Retry: map[failure.Class]int{"host-oom": 1}},
			runs: []simRun{{req: pack.Request{CPUs: 1, Mem: 8 * gib}, dur: sec, fail: []string{"host-oom"}}},
			starts: []string{
				"0s r0 lane0 - [gpus=0 cpus=1 mem=8GiB] #1",
				"1s r0 lane0 - [gpus=0 cpus=1 mem=12GiB] #2",
			},
		},
		{
			name: "fault/retry-elsewhere",
			desc: "a GPU that faults is retired: the run on it fails gpu-error and is retried once on another GPU with no retry budget; nothing starts on the retired GPU",
			cfg:  Config{Topology: node(1, 8, 2, 40<<30, 0)},
			runs: []simRun{
				{req: oneGPU, dur: 10 * sec, fail: []string{"gpu-error"}},
				{req: oneGPU, dur: 20 * sec},
				{req: oneGPU, dur: 20 * sec},
			},
			actions: []at{{5 * sec, func(s *Scheduler) { s.Fault("GPU-0") }}},
			starts: []string{
				"0s r0 lane0 GPU-0 [gpus=1 cpus=4] #1",
				"0s r1 lane1 GPU-1 [gpus=1 cpus=4] #1",
				"20s r0 lane0 GPU-1 [gpus=1 cpus=4] #2",
				"30s r2 lane0 GPU-1 [gpus=1 cpus=4] #1",
			},
		},
		{
			name: "fault/none-left",
			desc: "with every GPU retired the sweep drains: nothing more starts",
			cfg:  Config{Topology: node(1, 8, 1, 40<<30, 0)},
			runs: runsOf(3, oneGPU, 10*sec),
			actions: []at{{5 * sec, func(s *Scheduler) {
				if retired, none := s.Fault("GPU-0"); !retired || !none {
					panic("GPU-0 not retired")
				}
			}}},
			check: func(t *testing.T, r simResult) {
				if len(r.starts) != 1 || !r.drained {
					t.Errorf("starts %q, drained %v; want one start and a drain", r.starts, r.drained)
				}
			},
		},
		{
			name: "fault/refused",
			desc: "a waiting run that the GPUs left after a fault can never serve is refused (a *RunError), and the runs behind it still start",
			cfg:  Config{Topology: node(1, 8, 2, 40<<30, 0), BackfillWait: -1},
			runs: []simRun{
				{req: oneGPU, dur: 10 * sec},
				{req: oneGPU, dur: 10 * sec},
				{req: twoGPUs, dur: 10 * sec},
				{req: oneGPU, dur: 10 * sec},
			},
			actions: []at{{5 * sec, func(s *Scheduler) { s.Fault("GPU-1") }}},
			check: func(t *testing.T, r simResult) {
				if len(r.refused) != 1 || !strings.HasPrefix(r.refused[0], "5s r2: ") || !strings.Contains(r.refused[0], "never fits") {
					t.Errorf("refused %q; want r2, the 2-GPU run, as the fault came at 5s", r.refused)
				}
				if !slices.Contains(r.starts, "10s r3 lane0 GPU-0 [gpus=1 cpus=4] #1") {
					t.Errorf("starts %q; want r3 on GPU-0 at 10s", r.starts)
				}
			},
		},
		{
			name: "max-failures",
			desc: "once MaxFailures runs have failed nothing more starts",
			cfg:  Config{Topology: fourCPUs, Parallel: 1, MaxFailures: 2},
			runs: []simRun{
				{req: bare, dur: sec, fail: []string{"exit"}},
				{req: bare, dur: sec},
				{req: bare, dur: sec, fail: []string{"exit"}},
				{req: bare, dur: sec},
			},
			ends: []string{"1s r0 failed exit", "2s r1", "3s r2 failed exit: halt"},
		},
		{
			name: "deadlines",
			desc: "nothing starts at or after the drain deadline; at the terminate deadline Next says so",
			cfg:  Config{Topology: fourCPUs, Parallel: 1},
			runs: runsOf(5, bare, 20*sec),
			actions: []at{{0, func(s *Scheduler) {
				s.SetDeadlines(simStart.Add(25*sec), simStart.Add(50*sec))
			}}},
			check: func(t *testing.T, r simResult) {
				if len(r.starts) != 2 || !r.drained || r.terminated != -1 {
					t.Errorf("starts %q, drained %v, terminated at %v; want 2 starts, a drain, and the sweep over before the terminate deadline", r.starts, r.drained, r.terminated)
				}
			},
		},
		{
			name: "deadlines/moved",
			desc: "SetDeadlines moves them: a terminate deadline brought forward is said at its time",
			cfg:  Config{Topology: fourCPUs, Parallel: 1},
			runs: runsOf(3, bare, 20*sec),
			actions: []at{{10 * sec, func(s *Scheduler) {
				s.SetDeadlines(simStart.Add(15*sec), simStart.Add(18*sec))
			}}},
			check: func(t *testing.T, r simResult) {
				if len(r.starts) != 1 || r.terminated != 18*sec {
					t.Errorf("starts %q, terminated at %v; want 1 start and Terminate at 18s", r.starts, r.terminated)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			runs := tc.runs
			if tc.name == "gate/settle" {
				for i := range runs {
					runs[i].settle, runs[i].peak = 20*sec, 10*gib
				}
			}
			r := simulate(t, tc.cfg, runs, tc.actions...)
			if tc.starts != nil && !slices.Equal(r.starts, tc.starts) {
				t.Errorf("%s\nstarts\n%s\nwant\n%s", tc.desc, strings.Join(r.starts, "\n"), strings.Join(tc.starts, "\n"))
			}
			if tc.ends != nil && !slices.Equal(r.ends, tc.ends) {
				t.Errorf("%s\nends\n%s\nwant\n%s", tc.desc, strings.Join(r.ends, "\n"), strings.Join(tc.ends, "\n"))
			}
			if tc.check != nil {
				tc.check(t, r)
			}
			if t.Failed() {
				t.Logf("%s\nstarts:\n%s\nends:\n%s\nrefused: %q", tc.desc, strings.Join(r.starts, "\n"), strings.Join(r.ends, "\n"), r.refused)
			}
		})
	}
}

// autoRuns returns n gpu_mem=auto runs of one shape whose memory settles
// at peak after settle.
func autoRuns(n int, peak uint64, settle, dur time.Duration) []simRun {
	runs := runsOf(n, pack.Request{AutoGPUMem: true, CPUs: 1}, dur)
	for i := range runs {
		runs[i].shape, runs[i].peak, runs[i].settle = "train.py", peak, settle
	}
	return runs
}

// TestShape: the runs gpu_mem=auto measures once are those whose commands
// differ only in numbers.
func TestShape(t *testing.T) {
	same := [][2][]string{
		{{"python", "train.py", "seed=1", "lr=0.1"}, {"python", "train.py", "seed=22", "lr=0.003"}},
		{{"bash", "-c", "python t.py --epochs 10"}, {"bash", "-c", "python t.py --epochs 200"}},
	}
	differ := [][2][]string{
		{{"python", "train.py", "model=big"}, {"python", "train.py", "model=small"}},
		{{"python", "train.py", "a", "b"}, {"python", "train.py", "a b"}}, // arguments keep their bounds
		{{"python", "train.py"}, {"python", "eval.py"}},
	}
	for _, p := range same {
		if Shape(p[0]) != Shape(p[1]) {
			t.Errorf("%q and %q: shapes %q and %q, want one", p[0], p[1], Shape(p[0]), Shape(p[1]))
		}
	}
	for _, p := range differ {
		if Shape(p[0]) == Shape(p[1]) {
			t.Errorf("%q and %q: one shape %q, want two", p[0], p[1], Shape(p[0]))
		}
	}
}
