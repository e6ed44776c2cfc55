package schedule

import (
	"math"
	"testing"
	"time"

	"github.com/nodepack/nodepack/pack"
)

// TestNextRead: a run's metrics are read next just after it reaches its
// next rung at its measured step time (a quarter of a step when it is due
// already), within [least, interval]; while its step time is unknown,
// twice as far apart each time, from FirstRead again at its first step;
// past its last rung, every interval.
func TestNextRead(t *testing.T) {
	p, err := NewPruner(Prune{Metric: "loss", FirstStep: 10, MaxStep: 30}) // rungs 10, 30
	if err != nil {
		t.Fatal(err)
	}
	p.Judge("done", 10, 0.5, nil)
	p.Judge("done", 30, 0.4, nil)
	t0 := time.Unix(1e9, 0)
	ms := time.Millisecond
	none := math.Inf(-1)
	const least, interval = 10 * time.Millisecond, 2 * time.Second
	for _, tc := range []struct {
		desc            string
		id              string
		pace            Pace
		now             time.Time
		early           time.Duration
		wait, nextEarly time.Duration
	}{
		{"0.2 s a step, at step 5 as of this read: rung 10 in a second, and an eighth of a step", "a", Pace{t0, 5, 200 * ms}, t0, FirstRead, 1025 * ms, FirstRead},
		{"a read since that saw no new step: still from when it moved", "a", Pace{t0, 5, 200 * ms}, t0.Add(400 * ms), FirstRead, 625 * ms, FirstRead},
		{"due already (its step came late): a quarter of a step", "a", Pace{t0, 5, 200 * ms}, t0.Add(2 * time.Second), FirstRead, 50 * ms, FirstRead},
		{"fast: no sooner than least", "a", Pace{t0, 9, ms}, t0, FirstRead, least, FirstRead},
		{"slow: no later than interval", "a", Pace{t0, 1, time.Second}, t0, FirstRead, interval, FirstRead},
		{"no step yet: the doubling", "a", Pace{t0, none, 0}, t0.Add(FirstRead), FirstRead, 2 * FirstRead, 2 * FirstRead},
		{"its first step, seen at this read: FirstRead again, for its step time", "a", Pace{t0, 3, 0}, t0, 800 * ms, FirstRead, FirstRead},
		{"no step since the first: the doubling, up to interval", "a", Pace{t0, 3, 0}, t0.Add(time.Second), 1500 * ms, interval, interval},
		{"judged at its last rung: every interval", "done", Pace{t0, 31, 200 * ms}, t0, FirstRead, interval, FirstRead},
	} {
		wait, early := p.NextRead(tc.id, tc.pace, tc.now, tc.early, least, interval)
		if wait != tc.wait || early != tc.nextEarly {
			t.Errorf("%s: wait %v, early %v; want %v, %v", tc.desc, wait, early, tc.wait, tc.nextEarly)
		}
	}
}

// TestPaceSaw: a run's step time is measured between the two last reads
// that saw its furthest step move; a read that saw no new step changes
// nothing.
func TestPaceSaw(t *testing.T) {
	t0 := time.Unix(1e9, 0)
	p := Pace{Step: math.Inf(-1)}
	if p = p.Saw(t0, math.Inf(-1)); p.At != (time.Time{}) || p.PerStep != 0 {
		t.Errorf("no step seen: %+v", p)
	}
	if p = p.Saw(t0, 3); p != (Pace{t0, 3, 0}) {
		t.Errorf("the first step: %+v, want at t0, step 3, no step time", p)
	}
	if p = p.Saw(t0.Add(time.Second), 3); p != (Pace{t0, 3, 0}) {
		t.Errorf("no new step: %+v, want as it was", p)
	}
	if p = p.Saw(t0.Add(2*time.Second), 7); p != (Pace{t0.Add(2 * time.Second), 7, 500 * time.Millisecond}) {
		t.Errorf("4 steps in 2 s: %+v, want 0.5 s a step", p)
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
