//go:build cgo && linux

package resources

import (
	"context"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
)

// TestWatchGPUFaults: on go-nvml's DGX A100 mock, an Xid 79 on GPU 2 and
// a double-bit ECC error on GPU 3 are faults; an application's Xid 13 on
// GPU 1 is not; a GPU without event support is not watched; the watch
// ends with its context.
func TestWatchGPUFaults(t *testing.T) {
	server := dgxa100.New()
	dev := func(i int) *dgxa100.Device { return server.Devices[i].(*dgxa100.Device) }
	registered := map[string]uint64{}
	for i := range server.Devices {
		d := dev(i)
		d.GetSupportedEventTypesFunc = func() (uint64, nvml.Return) {
			if i == 7 {
				return 0, nvml.ERROR_NOT_SUPPORTED
			}
			return nvml.EventTypeXidCriticalError | nvml.EventTypeDoubleBitEccError | nvml.EventTypeSingleBitEccError, nvml.SUCCESS
		}
		d.RegisterEventsFunc = func(types uint64, _ nvml.EventSet) nvml.Return {
			registered[d.UUID] = types
			return nvml.SUCCESS
		}
	}
	events := make(chan nvml.EventData, 4)
	events <- nvml.EventData{Device: dev(1), EventType: nvml.EventTypeXidCriticalError, EventData: 13}
	events <- nvml.EventData{Device: dev(2), EventType: nvml.EventTypeXidCriticalError, EventData: 79}
	events <- nvml.EventData{Device: dev(3), EventType: nvml.EventTypeDoubleBitEccError}
	freed := make(chan struct{})
	uuids := feedEvents(server, events, func() { close(freed) })
	ctx, cancel := context.WithCancel(t.Context())
	faults := watchGPUFaults(ctx, server, uuids)
	if faults == nil {
		t.Fatal("no watch")
	}
	for _, want := range []struct{ uuid, reason string }{{dev(2).UUID, "Xid 79"}, {dev(3).UUID, "double-bit ECC error"}} {
		f := <-faults
		if f.UUID != want.uuid || f.Reason != want.reason || f.Time.IsZero() {
			t.Errorf("fault %+v, want %s on %s", f, want.reason, want.uuid)
		}
	}
	if len(registered) != 7 || registered[dev(0).UUID] != nvml.EventTypeXidCriticalError|nvml.EventTypeDoubleBitEccError {
		t.Errorf("registered %v: want the 7 GPUs with support, for Xid and double-bit ECC only", registered)
	}
	cancel()
	if _, open := <-faults; open {
		t.Error("a fault after the end")
	}
	<-freed
}

// feedEvents has the mock's event sets report the events sent on events
// (and time out in between, 50 times faster than asked), calling freed
// when a set is freed; it returns the mock's GPU UUIDs.
func feedEvents(server *dgxa100.Server, events <-chan nvml.EventData, freed func()) []string {
	server.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) {
		return &mock.EventSet{
			WaitFunc: func(timeout uint32) (nvml.EventData, nvml.Return) {
				select {
				case ev := <-events:
					return ev, nvml.SUCCESS
				case <-time.After(time.Duration(timeout) * time.Millisecond / 50):
					return nvml.EventData{}, nvml.ERROR_TIMEOUT
				}
			},
			FreeFunc: func() nvml.Return { freed(); return nvml.SUCCESS },
		}, nvml.SUCCESS
	}
	var uuids []string
	for _, d := range server.Devices {
		uuids = append(uuids, d.(*dgxa100.Device).UUID)
	}
	return uuids
}

// TestWatchGPUFaultsWithoutDriver: no driver, no watch, no crash.
func TestWatchGPUFaultsWithoutDriver(t *testing.T) {
	if watchGPUFaults(t.Context(), untouchable(t, nvml.ERROR_LIBRARY_NOT_FOUND), []string{"GPU-x"}) != nil {
		t.Error("a watch without a driver")
	}
}
