//go:build cgo && linux

package resources

import (
	"cmp"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"

	"github.com/nodepack/nodepack/resources/usage"
)

// TestNVMLSampling samples two GPUs of go-nvml's DGX A100 mock whose memory
// use and utilisation change between samples; a MIG-like device without a
// utilisation counter still reports memory.
func TestNVMLSampling(t *testing.T) {
	server := sampledServer()
	utils := []uint32{10, 50, 90}
	for i, d := range server.Devices[:2] {
		dev := d.(*dgxa100.Device)
		n := 0
		dev.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
			n++
			return nvml.Memory{Total: 40 << 30, Used: uint64(n) << 30}, nvml.SUCCESS
		}
		dev.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.SUCCESS }
		dev.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
			if i == 1 {
				return nvml.Utilization{}, nvml.ERROR_NOT_SUPPORTED
			}
			return nvml.Utilization{Gpu: utils[(n-1)%len(utils)]}, nvml.SUCCESS
		}
	}
	reader := newNVMLReader(server)
	if reader == nil {
		t.Fatal("the mock did not initialise")
	}
	uuids := []string{server.Devices[0].(*dgxa100.Device).UUID, server.Devices[1].(*dgxa100.Device).UUID, "GPU-missing"}
	s := &UsageSampler{interval: time.Hour, gpus: reader}
	sp := s.Start(usage.Target{Root: 1, SkipRoot: true, GPUs: uuids}) // samples are taken by hand
	for range 3 {
		sp.sample(s, nil)
	}
	got := sp.Stop()
	want := []usage.GPU{
		{UUID: uuids[0], PeakMemoryBytes: 3 << 30, MeanUtilization: 50, Samples: 3},
		{UUID: uuids[1], PeakMemoryBytes: 3 << 30, MeanUtilization: 0, Samples: 3},
		{UUID: "GPU-missing"},
	}
	if got.Samples != 3 || len(got.GPUs) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got.GPUs[i] != want[i] {
			t.Errorf("gpu %d: %+v, want %+v", i, got.GPUs[i], want[i])
		}
	}
}

// TestNVMLSettle drives the readiness gate's measurement with go-nvml's
// DGX A100 mock: the run's own processes on the GPU follow a scripted
// memory curve (loading, allocating, holding) while another run's process
// on the same GPU keeps growing; the sampler reports the run settled when
// its own memory has held for the rule's samples, with its peak, and
// records the run's own peak apart from the device's.
func TestNVMLSettle(t *testing.T) {
	const gib = 1 << 30
	server := sampledServer()
	dev := server.Devices[0].(*dgxa100.Device)
	const run, child, other = 4100, 4101, 5200
	curve := []uint64{0, 0, 2 * gib, 6 * gib, 9 * gib, 9 * gib, 9*gib + gib/256, 9 * gib} // the run's child
	n := 0
	dev.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		i := min(n, len(curve)-1)
		n++
		procs := []nvml.ProcessInfo{
			{Pid: other, UsedGpuMemory: uint64(n) * gib}, // not the run's: never counted
			{Pid: run, UsedGpuMemory: nvmlValueNotAvailable},
		}
		if curve[i] > 0 {
			procs = append(procs, nvml.ProcessInfo{Pid: child, UsedGpuMemory: curve[i]})
		}
		return procs, nvml.SUCCESS
	}
	dev.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
		return nvml.Memory{Total: 40 * gib, Used: uint64(n) * gib}, nvml.SUCCESS
	}
	dev.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{Gpu: 50}, nvml.SUCCESS }
	reader := newNVMLReader(server)
	if reader == nil {
		t.Fatal("the mock did not initialise")
	}
	settledAt, peak := -1, uint64(0)
	s := &UsageSampler{interval: time.Hour, gpus: reader}
	sample := 0
	sp := s.Start(usage.Target{Root: run, GPUs: []string{dev.UUID}, Settle: &usage.Settle{
		Interval: time.Hour, Samples: 2,
		Done: func(p uint64) {
			if settledAt >= 0 {
				t.Error("Done called twice")
			}
			settledAt, peak = sample, p
		},
	}})
	for sample = range len(curve) {
		sp.sample(s, []int{run, child})
	}
	got := sp.Stop()
	// 9 GiB first at sample 4, held at 5 and 6 (within 1%): settled at 6.
	if settledAt != 6 || peak != 9*gib+gib/256 {
		t.Errorf("settled at sample %d with peak %d; want 6, %d", settledAt, peak, uint64(9*gib+gib/256))
	}
	g := got.GPUs[0]
	if g.ProcessPeakMemoryBytes != 9*gib+gib/256 || g.PeakMemoryBytes != uint64(len(curve)-1)*gib {
		t.Errorf("own peak %d, device peak %d", g.ProcessPeakMemoryBytes, g.PeakMemoryBytes)
	}
}

// TestNVMLSettleBlind: where no reading of a run's own GPU memory can come,
// the sampler says why through Settle.Blind, once, and never calls Done:
// no NVML; a GPU NVML does not know (at the start); a driver that does not
// say what each process uses (at the first sample); and processes on the
// GPU none of which is in this PID namespace, for more samples in a row
// than a settle takes. A process of this namespace that is not the run's
// is only another run.
func TestNVMLSettleBlind(t *testing.T) {
	const gib = 1 << 30
	const absent = 1<<31 - 2 // no PID namespace hands this out
	type result struct{ why string }
	settle := func(got chan<- result) *usage.Settle {
		return &usage.Settle{Interval: time.Hour, Samples: 2,
			Done:  func(uint64) { got <- result{"done"} },
			Blind: func(why string) { got <- result{why} }}
	}
	for _, tc := range []struct {
		name    string
		procs   func() ([]nvml.ProcessInfo, nvml.Return)
		uuid    string // the run's GPU; "" for the mock's first
		noNVML  bool
		samples int
		want    string // "" for no word
	}{
		{name: "no NVML", noNVML: true, want: "NVML is not available"},
		{name: "a GPU NVML does not know", uuid: "GPU-00000000-0000-0000-0000-000000000000", want: "NVML does not know GPU GPU-00000000"},
		{name: "no per-process memory", samples: 1, procs: func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.ERROR_NOT_SUPPORTED },
			want: "the driver does not say what each process uses"},
		{name: "another PID namespace", samples: 3, procs: func() ([]nvml.ProcessInfo, nvml.Return) {
			return []nvml.ProcessInfo{{Pid: absent, UsedGpuMemory: 4 * gib}}, nvml.SUCCESS
		}, want: "another PID namespace"},
		{name: "another PID namespace, not for long enough", samples: 2, procs: func() ([]nvml.ProcessInfo, nvml.Return) {
			return []nvml.ProcessInfo{{Pid: absent, UsedGpuMemory: 4 * gib}}, nvml.SUCCESS
		}},
		{name: "another run of this namespace", samples: 5, procs: func() ([]nvml.ProcessInfo, nvml.Return) {
			return []nvml.ProcessInfo{{Pid: uint32(os.Getpid()), UsedGpuMemory: 4 * gib}}, nvml.SUCCESS
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			server := sampledServer()
			dev := server.Devices[0].(*dgxa100.Device)
			if tc.procs != nil {
				dev.GetComputeRunningProcessesFunc = tc.procs
			}
			dev.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) { return nvml.Memory{Total: 40 * gib, Used: 4 * gib}, nvml.SUCCESS }
			dev.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{Gpu: 50}, nvml.SUCCESS }
			s := &UsageSampler{interval: time.Hour}
			if !tc.noNVML {
				s.gpus = newNVMLReader(server)
			}
			uuid := cmp.Or(tc.uuid, dev.UUID)
			got := make(chan result, 4)
			sp := s.Start(usage.Target{Root: 4100, GPUs: []string{uuid}, Settle: settle(got)})
			for range tc.samples {
				sp.sample(s, []int{4100})
			}
			sp.Stop()
			var said []string
			if tc.want != "" {
				said = append(said, (<-got).why) // Blind may come from its own goroutine
			}
			for len(got) > 0 {
				said = append(said, (<-got).why)
			}
			switch {
			case tc.want == "" && len(said) > 0:
				t.Errorf("said %q; want no word", said)
			case tc.want != "" && (len(said) != 1 || !strings.Contains(said[0], tc.want)):
				t.Errorf("said %q; want one Blind with %q", said, tc.want)
			}
		})
	}
}

// TestNVMLGPULimit: the sampler calls GPULimit.Exceeded once, with the
// run's own memory on its GPU (its processes', not another run's) the
// first time a sample finds it over the limit.
func TestNVMLGPULimit(t *testing.T) {
	const gib = 1 << 30
	server := sampledServer()
	dev := server.Devices[0].(*dgxa100.Device)
	const run, other = 4100, 5200
	curve := []uint64{1 * gib, 4 * gib, 9 * gib, 12 * gib, 13 * gib} // the run's
	n := 0
	dev.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		i := min(n, len(curve)-1)
		n++
		return []nvml.ProcessInfo{{Pid: other, UsedGpuMemory: 30 * gib}, {Pid: run, UsedGpuMemory: curve[i]}}, nvml.SUCCESS
	}
	dev.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) { return nvml.Memory{Total: 80 * gib, Used: 40 * gib}, nvml.SUCCESS }
	dev.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{Gpu: 50}, nvml.SUCCESS }
	s := &UsageSampler{interval: time.Hour, gpus: newNVMLReader(server)}
	var over []uint64
	sample := 0
	sp := s.Start(usage.Target{Root: run, GPUs: []string{dev.UUID}, GPULimit: &usage.Limit{Bytes: 10 * gib, Interval: time.Hour,
		Exceeded: func(b uint64) { over = append(over, b, uint64(sample)) }}})
	for sample = range len(curve) {
		sp.sample(s, []int{run})
	}
	sp.Stop()
	if len(over) != 2 || over[0] != 12*gib || over[1] != 3 {
		t.Errorf("Exceeded(bytes, at sample) = %v; want once, 12 GiB at sample 3", over)
	}
}

// TestNVMLEnergy shares a GPU's energy counter among the runs on it: a
// run gets an even share of each advance while it is on the GPU, none
// from before it started or after it stopped, and the runs' energy sums
// to the counter's advance while any ran. A GPU without a counter gives
// none.
func TestNVMLEnergy(t *testing.T) {
	server := sampledServer()
	dev := server.Devices[0].(*dgxa100.Device)
	var counter uint64 = 1_000_000 // millijoules since the driver loaded
	dev.GetTotalEnergyConsumptionFunc = func() (uint64, nvml.Return) { return counter, nvml.SUCCESS }
	dev.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.SUCCESS }
	dev.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) { return nvml.Memory{Total: 40 << 30}, nvml.SUCCESS }
	dev.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{Gpu: 50}, nvml.SUCCESS }
	s := &UsageSampler{interval: time.Hour, gpus: newNVMLReader(server)}
	start := counter
	counter += 5_000 // before any run: nobody's
	a := s.Start(usage.Target{Root: 4100, GPUs: []string{dev.UUID}})
	counter += 10_000 // a alone: 10 J
	a.sample(s, []int{4100})
	b := s.Start(usage.Target{Root: 4200, GPUs: []string{dev.UUID}})
	counter += 8_000 // a and b: 4 J each
	b.sample(s, []int{4200})
	counter += 2_000 // a and b: 1 J each, shared when a stops
	gotA := a.Stop()
	counter += 6_000 // b alone: 6 J
	gotB := b.Stop()
	counter += 7_000 // after both: nobody's
	ea, eb := gotA.GPUs[0].EnergyJoules, gotB.GPUs[0].EnergyJoules
	if ea != 15 || eb != 11 {
		t.Errorf("energy a %v J, b %v J; want 15 and 11", ea, eb)
	}
	if advance := float64(counter-start-12_000) / 1e3; ea+eb != advance {
		t.Errorf("the runs' energy sums to %v J, the counter advanced %v J while they ran", ea+eb, advance)
	}

	dev.GetTotalEnergyConsumptionFunc = func() (uint64, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
	c := s.Start(usage.Target{Root: 4300, GPUs: []string{dev.UUID}})
	c.sample(s, []int{4300})
	if got := c.Stop(); got.GPUs[0].EnergyJoules != 0 {
		t.Errorf("a GPU without a counter: %v J, want none", got.GPUs[0].EnergyJoules)
	}
}

// sampledServer is go-nvml's DGX A100 mock as the sampler reads it: its
// GPUs have no energy counter unless a test gives one (the mock has no
// default, and calling a method it lacks panics).
func sampledServer() *dgxa100.Server {
	server := dgxa100.New()
	for _, d := range server.Devices {
		d := d.(*dgxa100.Device)
		d.GetTotalEnergyConsumptionFunc = func() (uint64, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
		d.GetMPSComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.ERROR_NOT_SUPPORTED }
	}
	return server
}

// TestNVMLMPSClients: under an MPS daemon a site runs, the driver lists
// the runs' processes as MPS clients, apart from the MPS server: their
// memory is the run's own, for the gate and the memory promise alike.
func TestNVMLMPSClients(t *testing.T) {
	const gib = 1 << 30
	server := sampledServer()
	dev := server.Devices[0].(*dgxa100.Device)
	const run, mpsServer = 4100, 4000
	dev.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		return []nvml.ProcessInfo{{Pid: mpsServer, UsedGpuMemory: 9 * gib}}, nvml.SUCCESS
	}
	dev.GetMPSComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		return []nvml.ProcessInfo{{Pid: run, UsedGpuMemory: 3 * gib}}, nvml.SUCCESS
	}
	dev.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) { return nvml.Memory{Total: 40 * gib, Used: 9 * gib}, nvml.SUCCESS }
	dev.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{Gpu: 50}, nvml.SUCCESS }
	s := &UsageSampler{interval: time.Hour, gpus: newNVMLReader(server)}
	var over uint64
	sp := s.Start(usage.Target{Root: run, GPUs: []string{dev.UUID}, GPULimit: &usage.Limit{Bytes: 2 * gib, Interval: time.Hour,
		Exceeded: func(b uint64) { over = b }}})
	sp.sample(s, []int{run})
	got := sp.Stop()
	if own := got.GPUs[0].ProcessPeakMemoryBytes; own != 3*gib || over != 3*gib {
		t.Errorf("the run's own GPU memory %d, over its limit at %d; want its MPS client's 3 GiB for both", own, over)
	}
}
