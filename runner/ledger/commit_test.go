package ledger

import (
	"encoding/json"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/nodepack/nodepack/runner/run"
)

// syncedDisk is a fullDisk that remembers how much of it was synced.
type syncedDisk struct {
	fullDisk
	mu     sync.Mutex
	syncs  int
	synced int // bytes on disk at the last Sync
}

func (d *syncedDisk) Sync() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.syncs++
	d.synced = len(d.b)
	return nil
}

func (d *syncedDisk) durable() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return string(d.b[:d.synced])
}

func finishedEvent(i int) run.Event {
	return run.Event{Kind: run.Finished, Run: run.Run{ID: "run" + strconv.Itoa(i)}, Attempt: 1, Reason: run.OK}
}

// TestPostIsDurableWhenDone: a finished record posted to the ledger is on
// disk and synced by the time its done function runs; done functions run
// in the order of the posts; records posted together share a commit, so
// there are far fewer fsyncs than records.
func TestPostIsDurableWhenDone(t *testing.T) {
	disk := &syncedDisk{fullDisk: fullDisk{room: 1 << 30, noReserve: true}}
	l := &Writer{path: "disk", dir: ".", past: &Log{byID: newIDIndex()}, file: disk}
	if err := l.WriteHeader(Header{Version: "test"}); err != nil {
		t.Fatal(err)
	}
	const n = 200
	var order []int
	var problems []string
	for i := range n {
		l.Post(startedEvent(i), nil)
		l.Post(finishedEvent(i), func(err error) {
			order = append(order, i) // done functions never run concurrently
			if err != nil {
				problems = append(problems, err.Error())
			}
			log, rerr := readLedger(strings.NewReader(disk.durable()), "disk")
			if r, ok := log.Run("run" + strconv.Itoa(i)); rerr != nil || !ok || r.State != StateSucceeded {
				problems = append(problems, "run"+strconv.Itoa(i)+" reported before it was durable")
			}
		})
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if len(problems) > 0 {
		t.Errorf("%d problems, the first: %s", len(problems), problems[0])
	}
	for i, got := range order {
		if got != i {
			t.Fatalf("done functions ran in the order %v…, want the posts' order", order[:i+1])
		}
	}
	if len(order) != n {
		t.Fatalf("%d done functions ran by Flush's return, want %d", len(order), n)
	}
	if disk.syncs > n/2 {
		t.Errorf("%d fsyncs for %d finished records: want them grouped", disk.syncs, n)
	}
	t.Logf("%d records in %d fsyncs", 2*n, disk.syncs)
}

// TestPostAfterAFullDisk: records a failed commit took are reported lost,
// in order, and nothing is written after them.
func TestPostAfterAFullDisk(t *testing.T) {
	disk := &fullDisk{room: 500, noReserve: true}
	l := &Writer{path: "disk", dir: ".", past: &Log{byID: newIDIndex()}, file: disk}
	if err := l.WriteHeader(Header{Version: "test"}); err != nil {
		t.Fatal(err)
	}
	var errs []error
	for i := range 20 {
		l.Post(finishedEvent(i), func(err error) { errs = append(errs, err) })
	}
	l.Flush()
	if len(errs) != 20 || !errors.Is(errs[19], syscall.ENOSPC) {
		t.Fatalf("errors %v; want 20, ending in ENOSPC", errs)
	}
	for i := 1; i < len(errs); i++ {
		if errs[i-1] != nil && errs[i] == nil {
			t.Errorf("record %d succeeded after record %d failed", i, i-1)
		}
	}
	log, err := disk.records()
	if err != nil || log.Torn != 0 {
		t.Errorf("the ledger reads %v, torn %d; want whole records", err, log.Torn)
	}
}

// TestCheckSeesADeletionAtOnce: Check finds a deleted ledger file without
// waiting for a commit, writes it again and reports the Problem.
func TestCheckSeesADeletionAtOnce(t *testing.T) {
	l, path := openTestLedger(t)
	if err := l.Check(); err != nil {
		t.Fatalf("a ledger in place: %v", err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := l.Check(); err == nil || !strings.Contains(err.Error(), "was deleted while the sweep ran") {
		t.Fatalf("Check after the delete: %v", err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("the ledger was not written again: %v", err)
	}
}

// TestPostOfARecordThatCannotBeEncoded: a record json cannot write (here
// a curve with a NaN, which the runner must never hand over) is not lost
// silently: its done gets the error, the ledger has a Problem (the sweep
// starts no more runs and says why), and the records around it are
// written.
func TestPostOfARecordThatCannotBeEncoded(t *testing.T) {
	l, path := openTestLedger(t)
	bad := finishedEvent(1)
	bad.Curves = json.RawMessage(`{"loss":[[1,NaN]]}`)
	var errs []error
	for _, ev := range []run.Event{finishedEvent(0), bad, finishedEvent(2)} {
		l.Post(ev, func(err error) { errs = append(errs, err) })
	}
	if err := l.Flush(); err != nil {
		t.Fatalf("Flush: %v (the ledger itself is fine)", err)
	}
	if len(errs) != 3 || errs[0] != nil || errs[1] == nil || errs[2] != nil || !strings.Contains(errs[1].Error(), "run1") {
		t.Errorf("done errors %v: want only the second's, naming its run", errs)
	}
	if p := l.Problem(); p == nil || !strings.Contains(p.Error(), "finished record of run run1") {
		t.Errorf("Problem %v: want the record that could not be written", p)
	}
	log, err := ReadFile(path, ReadOptions{})
	if err != nil || log.Len() != 2 {
		t.Errorf("the ledger reads %v with %d runs: want run0 and run2", err, log.Len())
	}
}
