//go:build cgo && linux

package resources

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/bits"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"golang.org/x/sys/unix"

	"github.com/nodepack/nodepack/resources/usage"
)

// This file is the only one that uses NVML. Two rules from experience:
// after a failed Init nothing else may be called on that library value, not
// even Shutdown (the process dies with a symbol lookup error), and functions
// newer drivers added are looked up before they are called.

// newNVML returns the system's libnvidia-ml; tests put go-nvml's mock
// in its place.
var newNVML = func() nvml.Interface { return nvml.New() }

// probeNVML detects GPUs through the system's libnvidia-ml.
func probeNVML(root fs.FS) ([]GPU, []string) {
	return nvmlGPUs(newNVML(), root)
}

// nvmlGPUs lists the GPUs lib can see, in NVML index order. It never fails:
// no library or no driver means no GPUs, and a device that cannot be read
// (no permission under a device cgroup, a lost GPU) is skipped; each case is
// explained in the warnings.
func nvmlGPUs(lib nvml.Interface, root fs.FS) ([]GPU, []string) {
	if ret := lib.Init(); ret != nvml.SUCCESS {
		if ret == nvml.ERROR_LIBRARY_NOT_FOUND {
			return nil, nil // a CPU-only node: nothing to warn about
		}
		return nil, []string{fmt.Sprintf("NVML not available (%v): no GPUs detected", ret)}
	}
	defer lib.Shutdown()

	count, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, []string{fmt.Sprintf("nvml: device count: %v: no GPUs detected", ret)}
	}
	has := func(symbol string) bool { return lib.Extensions().LookupSymbol(symbol) == nil }
	nCPUs := possibleCPUs(root)

	var gpus []GPU
	var warnings []string
	for i := range count {
		d, ret := lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			warnings = append(warnings, fmt.Sprintf("gpu %d: skipped: %v", i, ret))
			continue
		}
		uuid, ret := d.GetUUID()
		if ret != nvml.SUCCESS {
			warnings = append(warnings, fmt.Sprintf("gpu %d: skipped: uuid: %v", i, ret))
			continue
		}
		g := GPU{Index: i, UUID: uuid, NUMA: -1}
		if idx, ret := d.GetIndex(); ret == nvml.SUCCESS {
			g.Index = idx
		}
		if name, ret := d.GetName(); ret == nvml.SUCCESS {
			g.Name = name
		}
		if m, ret := d.GetMemoryInfo(); ret == nvml.SUCCESS {
			g.MemoryBytes = m.Total
		}
		if p, ret := d.GetPciInfo(); ret == nvml.SUCCESS {
			g.PCIBusID = cString(p.BusId[:])
		}
		g.NUMA, g.CPUs = gpuLocality(d, has, root, g.PCIBusID, nCPUs)
		if has("nvmlDeviceGetMigMode") {
			if current, _, ret := d.GetMigMode(); ret == nvml.SUCCESS && current == nvml.DEVICE_MIG_ENABLE {
				g.MIGEnabled = true
				var w []string
				g.MIG, w = migDevices(d, has, g.Index)
				warnings = append(warnings, w...)
			}
		}
		gpus = append(gpus, g)
	}
	return gpus, warnings
}

// gpuLocality returns the GPU's NUMA node and local CPUs: sysfs of its PCI
// device first (it is what the kernel uses), then NVML.
func gpuLocality(d nvml.Device, has func(string) bool, root fs.FS, busID string, nCPUs int) (int, []int) {
	numa, cpus := -1, []int(nil)
	if dir := sysfsPCIDir(busID); dir != "" {
		if n, err := readInt(root, path.Join(dir, "numa_node")); err == nil && n >= 0 {
			numa = n
		}
		if list, err := readList(root, path.Join(dir, "local_cpulist")); err == nil {
			cpus = list
		}
	}
	if cpus == nil && has("nvmlDeviceGetCpuAffinity") {
		if mask, ret := d.GetCpuAffinity(nCPUs); ret == nvml.SUCCESS {
			cpus = maskToCPUs(mask)
		}
	}
	if numa < 0 && has("nvmlDeviceGetNumaNodeId") {
		if n, ret := d.GetNumaNodeId(); ret == nvml.SUCCESS && n >= 0 {
			numa = n
		}
	}
	return numa, cpus
}

// migDevices lists the MIG devices of a GPU in MIG mode.
func migDevices(d nvml.Device, has func(string) bool, index int) ([]MIG, []string) {
	if !has("nvmlDeviceGetMaxMigDeviceCount") || !has("nvmlDeviceGetMigDeviceHandleByIndex") {
		return nil, []string{fmt.Sprintf("gpu %d: MIG mode is on but the driver cannot list MIG devices", index)}
	}
	n, ret := d.GetMaxMigDeviceCount()
	if ret != nvml.SUCCESS {
		return nil, []string{fmt.Sprintf("gpu %d: MIG device count: %v", index, ret)}
	}
	var migs []MIG
	var warnings []string
	for j := range n {
		m, ret := d.GetMigDeviceHandleByIndex(j)
		if errors.Is(ret, nvml.ERROR_NOT_FOUND) || errors.Is(ret, nvml.ERROR_INVALID_ARGUMENT) {
			continue // an empty MIG slot
		}
		if ret != nvml.SUCCESS {
			warnings = append(warnings, fmt.Sprintf("gpu %d: MIG device %d: skipped: %v", index, j, ret))
			continue
		}
		uuid, ret := m.GetUUID()
		if ret != nvml.SUCCESS {
			warnings = append(warnings, fmt.Sprintf("gpu %d: MIG device %d: skipped: uuid: %v", index, j, ret))
			continue
		}
		mig := MIG{UUID: uuid}
		if mem, ret := m.GetMemoryInfo(); ret == nvml.SUCCESS {
			mig.MemoryBytes = mem.Total
		}
		migs = append(migs, mig)
	}
	return migs, warnings
}

// maskToCPUs decodes NVML's CPU mask: bit j of word i is CPU i*wordsize+j.
func maskToCPUs(mask []uint) []int {
	var cpus []int
	for i, word := range mask {
		for word != 0 {
			j := bits.TrailingZeros(word)
			cpus = append(cpus, i*bits.UintSize+j)
			word &^= 1 << j
		}
	}
	return cpus
}

// cString converts NVML's NUL-terminated char array.
func cString(b []int8) string {
	var sb strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		sb.WriteByte(byte(c))
	}
	return sb.String()
}

// openGPUReader opens NVML for sampling; nil without a driver.
func openGPUReader() gpuReader {
	if r := newNVMLReader(newNVML()); r != nil {
		return r
	}
	return nil
}

// nvmlReader samples GPUs through an initialised NVML library; devices are
// looked up by UUID once.
type nvmlReader struct {
	lib     nvml.Interface
	mu      sync.Mutex
	devices map[string]nvml.Device
}

// newNVMLReader initialises lib; nil if that fails.
func newNVMLReader(lib nvml.Interface) *nvmlReader {
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return nil
	}
	return &nvmlReader{lib: lib, devices: make(map[string]nvml.Device)}
}

// device returns the handle of the GPU or MIG device uuid; nil if NVML
// does not know it.
func (r *nvmlReader) device(uuid string) nvml.Device {
	r.mu.Lock()
	defer r.mu.Unlock()
	d, found := r.devices[uuid]
	if !found {
		var ret nvml.Return
		if d, ret = r.lib.DeviceGetHandleByUUID(uuid); ret != nvml.SUCCESS {
			d = nil
		}
		r.devices[uuid] = d
	}
	return d
}

// processMemory sums the GPU memory that the processes pids use on the
// device uuid, as NVML's compute processes report it. NVML reports host
// PIDs: inside a PID namespace (a container) they match none of pids, and
// the sum is 0. ok is false when NVML cannot tell.
func (r *nvmlReader) processMemory(uuid string, pids []int) (bytes uint64, foreign, ok bool) {
	d := r.device(uuid)
	if d == nil {
		return 0, false, false
	}
	procs, ret := d.GetComputeRunningProcesses()
	if ret != nvml.SUCCESS {
		return 0, false, false
	}
	// Under MPS (a site's daemon), the clients are listed apart from the
	// MPS server, which the list above holds.
	if mps, ret := d.GetMPSComputeRunningProcesses(); ret == nvml.SUCCESS {
		for _, p := range mps {
			if !slices.ContainsFunc(procs, func(q nvml.ProcessInfo) bool { return q.Pid == p.Pid }) {
				procs = append(procs, p)
			}
		}
	}
	foreign = len(procs) > 0
	for _, p := range procs {
		mine := slices.Contains(pids, int(p.Pid))
		if p.UsedGpuMemory != nvmlValueNotAvailable && mine {
			bytes += p.UsedGpuMemory
		}
		foreign = foreign && !mine && !processExists(int(p.Pid))
	}
	return bytes, foreign, true
}

// processExists reports whether pid names a process of this PID
// namespace (one of another user's counts).
func processExists(pid int) bool {
	err := unix.Kill(pid, 0)
	return err == nil || err == unix.EPERM
}

// nvmlValueNotAvailable is NVML_VALUE_NOT_AVAILABLE, what UsedGpuMemory
// holds when the driver cannot tell (Windows WDDM, some MIG setups).
const nvmlValueNotAvailable = ^uint64(0)

func (r *nvmlReader) readGPU(uuid string) (used uint64, util float64, hasUtil, ok bool) {
	d := r.device(uuid)
	if d == nil {
		return 0, 0, false, false
	}
	m, ret := d.GetMemoryInfo()
	if ret != nvml.SUCCESS {
		return 0, 0, false, false
	}
	// MIG devices have no utilisation counter.
	if u, ret := d.GetUtilizationRates(); ret == nvml.SUCCESS {
		return m.Used, float64(u.Gpu), true, true
	}
	return m.Used, 0, false, true
}

func (r *nvmlReader) energy(uuid string) (uint64, bool) {
	d := r.device(uuid)
	if d == nil {
		return 0, false
	}
	mj, ret := d.GetTotalEnergyConsumption()
	return mj, ret == nvml.SUCCESS
}

func (r *nvmlReader) close() { r.lib.Shutdown() }

// WatchGPUFaults reports the hardware faults of the GPUs uuids as NVML
// delivers them, until ctx ends: an Xid error other than those an
// application causes itself, or a double-bit ECC error. It returns nil
// when NVML cannot watch any of them (no driver, no event support), and
// then nothing is reported.
func WatchGPUFaults(ctx context.Context, uuids []string) <-chan usage.GPUFault {
	return watchGPUFaults(ctx, newNVML(), uuids)
}

// applicationXids are the Xid errors that the application on the GPU
// causes (a bad memory access, an exception in its kernel, a context
// switch timeout): they say nothing about the GPU, which the next run may
// use. NVIDIA's device plugin leaves out the same ones.
var applicationXids = map[uint64]bool{13: true, 31: true, 43: true, 45: true, 68: true, 109: true}

// faultEvents are the NVML events that report a fault.
const faultEvents = nvml.EventTypeXidCriticalError | nvml.EventTypeDoubleBitEccError

func watchGPUFaults(ctx context.Context, lib nvml.Interface, uuids []string) <-chan usage.GPUFault {
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return nil
	}
	set, ret := lib.EventSetCreate()
	if ret != nvml.SUCCESS {
		lib.Shutdown()
		return nil
	}
	watched := 0
	for _, uuid := range uuids {
		d, ret := lib.DeviceGetHandleByUUID(uuid)
		if ret != nvml.SUCCESS {
			continue
		}
		supported, ret := d.GetSupportedEventTypes()
		if ret != nvml.SUCCESS || supported&faultEvents == 0 {
			continue
		}
		if d.RegisterEvents(supported&faultEvents, set) == nvml.SUCCESS {
			watched++
		}
	}
	if watched == 0 {
		set.Free()
		lib.Shutdown()
		return nil
	}
	faults := make(chan usage.GPUFault, len(uuids))
	go func() {
		defer lib.Shutdown()
		defer set.Free()
		defer close(faults)
		for ctx.Err() == nil {
			ev, ret := set.Wait(500) // milliseconds: how late the end of ctx is seen
			if ret != nvml.SUCCESS {
				if ret != nvml.ERROR_TIMEOUT {
					time.Sleep(500 * time.Millisecond) // not a busy loop on a broken set
				}
				continue
			}
			fault, ok := faultOf(ev)
			if !ok {
				continue
			}
			select {
			case faults <- fault:
			case <-ctx.Done():
			}
		}
	}()
	return faults
}

// faultOf turns an NVML event into a fault; false for an application's
// Xid or an event of no GPU NVML can name.
func faultOf(ev nvml.EventData) (usage.GPUFault, bool) {
	var reason string
	switch {
	case ev.EventType&nvml.EventTypeDoubleBitEccError != 0:
		reason = "double-bit ECC error"
	case ev.EventType&nvml.EventTypeXidCriticalError != 0 && !applicationXids[ev.EventData]:
		reason = fmt.Sprintf("Xid %d", ev.EventData)
	default:
		return usage.GPUFault{}, false
	}
	if ev.Device == nil {
		return usage.GPUFault{}, false
	}
	uuid, ret := ev.Device.GetUUID()
	if ret != nvml.SUCCESS {
		return usage.GPUFault{}, false
	}
	return usage.GPUFault{UUID: uuid, Reason: reason, Time: time.Now()}, true
}
