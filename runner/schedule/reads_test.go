package schedule

import (
	"math"
	"testing"
	"time"

	"github.com/nodepack/nodepack/pack"
)

// TestNextRead: a run's metrics are read next when it reaches its next
// rung at its pace, within [least, interval]; while its pace is unknown,
// twice as far apart each time; past its last rung, every interval.
func TestNextRead(t *testing.T) {
	p, err := NewPruner(Prune{Metric: "loss", FirstStep: 10, MaxStep: 30}) // rungs 10, 30
	if err != nil {
		t.Fatal(err)
	}
	p.Judge("done", 10, 0.5, nil)
	p.Judge("done", 30, 0.4, nil)
	t0 := time.Unix(1e9, 0)
	none := math.Inf(-1)
	const least, interval = 50 * time.Millisecond, 2 * time.Second
	for _, tc := range []struct {
		desc            string
		id              string
		was, now        Pace
		early           time.Duration
		wait, nextEarly time.Duration
	}{
		{"5 steps a second at step 5: rung 10 in a second", "a", Pace{t0, 0}, Pace{t0.Add(time.Second), 5}, FirstRead, time.Second, FirstRead},
		{"about to reach it: no sooner than least", "a", Pace{t0, 0}, Pace{t0.Add(time.Second), 9.99}, FirstRead, least, FirstRead},
		{"slow: no later than interval", "a", Pace{t0, 0}, Pace{t0.Add(time.Second), 1}, FirstRead, interval, FirstRead},
		{"no step yet: the doubling", "a", Pace{t0, none}, Pace{t0.Add(FirstRead), none}, FirstRead, 2 * FirstRead, 2 * FirstRead},
		{"no step since the read before: the doubling, up to interval", "a", Pace{t0, 3}, Pace{t0.Add(time.Second), 3}, 1500 * time.Millisecond, interval, interval},
		{"judged at its last rung: every interval", "done", Pace{t0, 0}, Pace{t0.Add(time.Second), 31}, FirstRead, interval, FirstRead},
	} {
		wait, early := p.NextRead(tc.id, tc.was, tc.now, tc.early, least, interval)
		if wait != tc.wait || early != tc.nextEarly {
			t.Errorf("%s: wait %v, early %v; want %v, %v", tc.desc, wait, early, tc.wait, tc.nextEarly)
		}
	}
}

// TestCheckpointFirst: a stop asks for a checkpoint first only with a
// signal to ask by, when it is no kill, and when the run keeps
// checkpoints; whether it keeps them is asked only then.
func TestCheckpointFirst(t *testing.T) {
	for _, tc := range []struct {
		signal, kill, keeps, want, asked bool
	}{
		{signal: true, keeps: true, want: true, asked: true},
		{signal: true, keeps: false, want: false, asked: true},
		{signal: false, keeps: true},
		{signal: true, kill: true, keeps: true},
	} {
		asked := false
		got := CheckpointFirst(tc.signal, tc.kill, func() bool { asked = true; return tc.keeps })
		if got != tc.want || asked != tc.asked {
			t.Errorf("signal %v kill %v keeps %v: %v (asked %v), want %v (asked %v)", tc.signal, tc.kill, tc.keeps, got, asked, tc.want, tc.asked)
		}
	}
}

// TestGPUMemLimit: a run that shares its one GPU by gpu_mem may use what
// it asked for and the GPU's headroom; others have no such limit.
func TestGPUMemLimit(t *testing.T) {
	gpu := pack.GPU{UUID: "GPU-0", MemoryBytes: 80 << 30}
	for _, tc := range []struct {
		desc string
		as   pack.Assignment
		want uint64
	}{
		{"gpu_mem=10G beside others", pack.Assignment{GPUs: []pack.GPU{gpu}, SharedGPUs: true, Request: pack.Request{GPUMem: 10 << 30}}, 10<<30 + 4<<30},
		{"a GPU of its own", pack.Assignment{GPUs: []pack.GPU{gpu}, Request: pack.Request{GPUs: 1}}, 0},
		{"a share by fraction", pack.Assignment{GPUs: []pack.GPU{gpu}, SharedGPUs: true, Request: pack.Request{GPUShare: pack.GPUWhole / 4}}, 0},
		{"no GPU", pack.Assignment{}, 0},
	} {
		if got := GPUMemLimit(tc.as); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.desc, got, tc.want)
		}
	}
}
