//go:build cgo && linux

package resources

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/fstest"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
)

// dgxServer returns go-nvml's DGX A100 mock with the calls it lacks filled
// in: a PCI bus id per GPU, and GPU i local to NUMA node i of the dgxA100
// fixture (CPUs 16i..16i+15 and their siblings 128+16i..128+16i+15).
func dgxServer() *dgxa100.Server {
	s := dgxa100.New()
	for i, d := range s.Devices {
		dev := d.(*dgxa100.Device)
		dev.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) {
			var p nvml.PciInfo
			for j, c := range fmt.Sprintf("%08X:%02X:00.0", 0, 7+16*i) {
				p.BusId[j] = int8(c)
			}
			return p, nvml.SUCCESS
		}
		dev.GetCpuAffinityFunc = func(numCPUs int) ([]uint, nvml.Return) {
			mask := make([]uint, (numCPUs+63)/64)
			for _, base := range []int{16 * i, 128 + 16*i} {
				for c := base; c < min(base+16, numCPUs); c++ {
					mask[c/64] |= 1 << (c % 64)
				}
			}
			return mask, nvml.SUCCESS
		}
		dev.GetNumaNodeIdFunc = func() (int, nvml.Return) { return i, nvml.SUCCESS }
		// An energy counter that a joule more has gone through at every
		// reading.
		var mj atomic.Uint64
		dev.GetTotalEnergyConsumptionFunc = func() (uint64, nvml.Return) { return mj.Add(1000), nvml.SUCCESS }
		dev.GetMPSComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.SUCCESS }
	}
	return s
}

func TestNVMLDGXA100(t *testing.T) {
	server := dgxServer()
	n, err := Detect(t.Context(), Options{
		Root:        dgxA100.tree(),
		Getenv:      envOf(nil),
		AllowedCPUs: func() ([]int, error) { return seq(0, 255), nil },
		GPUProbe:    func() ([]GPU, []string) { return nvmlGPUs(server, dgxA100.tree()) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if n.GPUSource != sourceNVML || len(n.GPUs) != 8 {
		t.Fatalf("source %q, %d gpus; want nvml, 8", n.GPUSource, len(n.GPUs))
	}
	for i, g := range n.GPUs {
		want := server.Devices[i].(*dgxa100.Device).UUID
		if g.Index != i || g.UUID != want || !strings.HasPrefix(g.UUID, "GPU-") {
			t.Errorf("gpu %d: index %d uuid %q, want %q", i, g.Index, g.UUID, want)
		}
		if g.MemoryBytes != 42949672960 || !strings.Contains(g.Name, "A100") {
			t.Errorf("gpu %d: %q %d bytes", i, g.Name, g.MemoryBytes)
		}
		if wantBus := fmt.Sprintf("00000000:%02X:00.0", 7+16*i); g.PCIBusID != wantBus {
			t.Errorf("gpu %d: pci %q, want %q", i, g.PCIBusID, wantBus)
		}
		wantCPUs := append(seq(16*i, 16*i+15), seq(128+16*i, 128+16*i+15)...)
		if g.NUMA != i || !slices.Equal(g.CPUs, wantCPUs) {
			t.Errorf("gpu %d: numa %d cpus %v, want %d %v", i, g.NUMA, g.CPUs, i, wantCPUs)
		}
	}
	if len(n.Warnings) != 0 {
		t.Errorf("warnings: %q", n.Warnings)
	}
}

// TestNVMLLocalityFromSysfs: the kernel's view of the PCI device wins over
// NVML's, and local CPUs are narrowed to the allowed ones.
func TestNVMLLocalityFromSysfs(t *testing.T) {
	server := dgxServer()
	root := dgxA100.tree()
	root["sys/bus/pci/devices/0000:07:00.0/numa_node"] = &fstest.MapFile{Data: []byte("3\n")}
	root["sys/bus/pci/devices/0000:07:00.0/local_cpulist"] = &fstest.MapFile{Data: []byte("48-63,176-191\n")}
	n, err := Detect(t.Context(), Options{
		Root: root, Getenv: envOf(nil),
		AllowedCPUs: func() ([]int, error) { return seq(48, 55), nil },
		GPUProbe:    func() ([]GPU, []string) { return nvmlGPUs(server, root) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if g := n.GPUs[0]; g.NUMA != 3 || !slices.Equal(g.CPUs, seq(48, 55)) {
		t.Errorf("gpu 0: numa %d cpus %v, want 3 48-55", g.NUMA, g.CPUs)
	}
	if g := n.GPUs[1]; len(g.CPUs) != 0 || g.NUMA != 1 {
		t.Errorf("gpu 1: numa %d cpus %v, want 1 and none allowed", g.NUMA, g.CPUs)
	}
}

// untouchable fails the test on any call but Init: after a
// failed Init, NVML must not be touched again, not even by Shutdown.
func untouchable(t *testing.T, initRet nvml.Return) *mock.Interface {
	return &mock.Interface{
		InitFunc:     func() nvml.Return { return initRet },
		ShutdownFunc: func() nvml.Return { t.Error("Shutdown called after a failed Init"); return nvml.SUCCESS },
		DeviceGetCountFunc: func() (int, nvml.Return) {
			t.Error("DeviceGetCount called after a failed Init")
			return 0, nvml.ERROR_UNINITIALIZED
		},
	}
}

func TestNVMLErrors(t *testing.T) {
	for _, tc := range []struct {
		description string
		ret         nvml.Return
		wantWarning bool
	}{
		{"library missing: a CPU-only node, no warning", nvml.ERROR_LIBRARY_NOT_FOUND, false},
		{"driver not loaded", nvml.ERROR_DRIVER_NOT_LOADED, true},
		{"no permission", nvml.ERROR_NO_PERMISSION, true},
	} {
		t.Run(tc.description, func(t *testing.T) {
			gpus, warnings := nvmlGPUs(untouchable(t, tc.ret), fstest.MapFS{})
			if len(gpus) != 0 {
				t.Errorf("gpus %v, want none", gpus)
			}
			if tc.wantWarning && (len(warnings) != 1 || !strings.Contains(warnings[0], tc.ret.Error())) || !tc.wantWarning && len(warnings) != 0 {
				t.Errorf("warnings %q; want a warning naming %v: %v", warnings, tc.ret, tc.wantWarning)
			}
		})
	}
}

func TestNVMLSkipsDeviceWithoutPermission(t *testing.T) {
	server := dgxServer()
	inner := server.DeviceGetHandleByIndexFunc
	server.DeviceGetHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		if i == 3 {
			return nil, nvml.ERROR_NO_PERMISSION
		}
		return inner(i)
	}
	gpus, warnings := nvmlGPUs(server, dgxA100.tree())
	var idx []int
	for _, g := range gpus {
		idx = append(idx, g.Index)
	}
	if !slices.Equal(idx, []int{0, 1, 2, 4, 5, 6, 7}) {
		t.Errorf("indices %v, want all but 3", idx)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "gpu 3") || !strings.Contains(warnings[0], "ERROR_NO_PERMISSION") {
		t.Errorf("warnings %q", warnings)
	}
}

// migGPU puts device 0 of server in MIG mode with n MIG devices.
func migGPU(server *dgxa100.Server, n int) []string {
	dev := server.Devices[0].(*dgxa100.Device)
	dev.MigMode = nvml.DEVICE_MIG_ENABLE
	var uuids []string
	var migs []nvml.Device
	for j := range n {
		uuid := fmt.Sprintf("MIG-%08d-aaaa-bbbb-cccc-%012d", j, j)
		uuids = append(uuids, uuid)
		migs = append(migs, &mock.Device{
			GetUUIDFunc:       func() (string, nvml.Return) { return uuid, nvml.SUCCESS },
			GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) { return nvml.Memory{Total: 5 << 30}, nvml.SUCCESS },
		})
	}
	dev.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) { return 7, nvml.SUCCESS }
	dev.GetMigDeviceHandleByIndexFunc = func(j int) (nvml.Device, nvml.Return) {
		if j >= len(migs) {
			return nil, nvml.ERROR_NOT_FOUND
		}
		return migs[j], nvml.SUCCESS
	}
	return uuids
}

func TestNVMLMIG(t *testing.T) {
	server := dgxServer()
	uuids := migGPU(server, 3)
	gpus, warnings := nvmlGPUs(server, dgxA100.tree())
	if len(warnings) != 0 {
		t.Errorf("warnings %q", warnings)
	}
	g := gpus[0]
	if !g.MIGEnabled || len(g.MIG) != 3 {
		t.Fatalf("gpu 0: mig %v %+v, want 3 devices", g.MIGEnabled, g.MIG)
	}
	for j, m := range g.MIG {
		if m.UUID != uuids[j] || m.MemoryBytes != 5<<30 {
			t.Errorf("mig %d = %+v, want %s", j, m, uuids[j])
		}
	}
	if gpus[1].MIGEnabled || len(gpus[1].MIG) != 0 {
		t.Errorf("gpu 1 should not be in MIG mode")
	}
	topo := Node{GPUs: gpus}.Topology()
	if len(topo.GPUs) != 3+7 || !topo.GPUs[0].MIG || topo.GPUs[0].Parent != g.UUID || topo.GPUs[3].MIG {
		t.Errorf("topology gpus %+v: want the 3 MIG devices then 7 whole GPUs", topo.GPUs)
	}
}

// TestNVMLOldDriver: functions the driver lacks are never called.
func TestNVMLOldDriver(t *testing.T) {
	server := dgxServer()
	missing := map[string]bool{"nvmlDeviceGetMigMode": true, "nvmlDeviceGetNumaNodeId": true, "nvmlDeviceGetCpuAffinity": true}
	server.LookupSymbolFunc = func(symbol string) error {
		if missing[symbol] {
			return fmt.Errorf("undefined symbol: %s", symbol)
		}
		return nil
	}
	for _, d := range server.Devices {
		dev := d.(*dgxa100.Device)
		dev.GetMigModeFunc = func() (int, int, nvml.Return) { t.Error("GetMigMode called"); return 0, 0, nvml.SUCCESS }
		dev.GetNumaNodeIdFunc = func() (int, nvml.Return) { t.Error("GetNumaNodeId called"); return 0, nvml.SUCCESS }
		dev.GetCpuAffinityFunc = func(int) ([]uint, nvml.Return) { t.Error("GetCpuAffinity called"); return nil, nvml.SUCCESS }
	}
	gpus, _ := nvmlGPUs(server, dgxA100.tree())
	if len(gpus) != 8 || gpus[0].NUMA != -1 || gpus[0].CPUs != nil {
		t.Errorf("got %d gpus, gpu 0 numa %d cpus %v; want 8, unknown locality", len(gpus), gpus[0].NUMA, gpus[0].CPUs)
	}
}

func TestMaskToCPUs(t *testing.T) {
	got := maskToCPUs([]uint{0b1011, 0, 1 << 63, 1})
	want := []int{0, 1, 3, 191, 192}
	if !slices.Equal(got, want) {
		t.Errorf("maskToCPUs = %v, want %v", got, want)
	}
}
