//go:build cgo && linux

package resources

import (
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
	server := dgxa100.New()
	utils := []uint32{10, 50, 90}
	for i, d := range server.Devices[:2] {
		dev := d.(*dgxa100.Device)
		n := 0
		dev.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
			n++
			return nvml.Memory{Total: 40 << 30, Used: uint64(n) << 30}, nvml.SUCCESS
		}
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
	sp := s.Start(1, true, uuids) // its timer never fires: samples are taken by hand
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
