package claim

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestClaimsShareTheSweep: two tasks claim in turn; each claim starts
// where the one before ends, whoever made it; once every run is claimed
// there is no more; the claims, read back, cover every run once.
func TestClaimsShareTheSweep(t *testing.T) {
	out := t.TempDir()
	a, err := Open(out, "sweep-1", "a", 10)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Open(out, "sweep-1", "b", 10)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, step := range []struct {
		p *Pool
		n int
	}{{a, 3}, {b, 4}, {a, 2}, {b, 5}, {a, 1}} {
		c, ok, err := step.p.Claim(step.n)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s:%d-%d/%v", c.Task, c.From, c.To, ok))
	}
	want := "a:0-3/true b:3-7/true a:7-9/true b:9-10/true :0-0/false"
	if strings.Join(got, " ") != want {
		t.Errorf("claims %s, want %s", strings.Join(got, " "), want)
	}
	claims, err := a.Claims()
	if err != nil || fmt.Sprint(claims) != "[{0 3 a 0} {3 7 b 0} {7 9 a 0} {9 10 b 0}]" {
		t.Errorf("Claims: %v, %v", claims, err)
	}
}

// TestClaimsConcurrent: eight tasks claim at once until nothing is left:
// every run is claimed exactly once.
func TestClaimsConcurrent(t *testing.T) {
	out := t.TempDir()
	const total = 2000
	owner := make([]string, total)
	var mu sync.Mutex
	atOnce(8, func(k int) {
		task := fmt.Sprint("t", k)
		p, err := Open(out, "s", task, total)
		if err != nil {
			t.Error(err)
			return
		}
		for {
			c, ok, err := p.Claim(1 + k%3)
			if err != nil {
				t.Error(err)
				return
			}
			if !ok {
				return
			}
			mu.Lock()
			for i := c.From; i < c.To; i++ {
				if owner[i] != "" {
					t.Errorf("run %d claimed by %s and %s", i, owner[i], task)
				}
				owner[i] = task
			}
			mu.Unlock()
		}
	})
	for i, o := range owner {
		if o == "" {
			t.Fatalf("run %d never claimed", i)
		}
	}
}

// atOnce runs f(0) to f(n-1) at once, and waits for them all.
func atOnce(n int, f func(k int)) {
	var wg sync.WaitGroup
	for k := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(k)
		}()
	}
	wg.Wait()
}

// TestClaimsUntrusted: another sweep's folder is refused; a claim that is
// a link, a FIFO, or does not parse is an error naming it, never followed
// nor skipped; a folder it may not write claims nothing.
func TestClaimsUntrusted(t *testing.T) {
	out := t.TempDir()
	if _, err := Open(out, "one", "a", 10); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(out, "two", "a", 10); !errors.Is(err, ErrOtherSweep) {
		t.Errorf("a second sweep into the same folder: %v, want refused", err)
	}
	dir := filepath.Join(out, Folder)
	target := filepath.Join(t.TempDir(), "elsewhere")
	os.WriteFile(target, []byte(`{"task":"x","to":5,"sweep":"one"}`+"\n"), 0o644)
	for name, plant := range map[string]func(path string) error{
		"a link":  func(path string) error { return os.Symlink(target, path) },
		"a FIFO":  func(path string) error { return syscall.Mkfifo(path, 0o644) },
		"garbage": func(path string) error { return os.WriteFile(path, []byte("{not json\n"), 0o644) },
		"another sweep": func(path string) error {
			return os.WriteFile(path, []byte(`{"task":"x","to":5,"sweep":"two"}`+"\n"), 0o644)
		},
		"backwards": func(path string) error {
			return os.WriteFile(path, []byte(`{"task":"x","to":0,"sweep":"one"}`+"\n"), 0o644)
		},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, "0")
			os.Remove(path)
			if err := plant(path); err != nil {
				t.Fatal(err)
			}
			p, err := Open(out, "one", "a", 10)
			if err != nil {
				t.Fatal(err)
			}
			c, ok, err := p.Claim(3)
			if err == nil || ok || !strings.Contains(err.Error(), path) {
				t.Errorf("claimed %v, %v, %v: want an error naming %s", c, ok, err, path)
			}
		})
	}
	os.Remove(filepath.Join(dir, "0"))
	if os.Getuid() != 0 { // root writes anywhere
		os.Chmod(dir, 0o555)
		defer os.Chmod(dir, 0o755)
		p, _ := Open(out, "one", "a", 10)
		if _, ok, err := p.Claim(3); err == nil || ok {
			t.Errorf("a folder it may not write: claimed %v, %v", ok, err)
		}
	}
}

// BenchmarkClaim: what one claim of 256 runs costs the file system (a
// file written, synced, linked and its unique name removed), and per
// run: a 1M-run sweep is about 4,000 such claims.
func BenchmarkClaim(b *testing.B) {
	p, err := Open(b.TempDir(), "s", "a", 256*b.N)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if _, ok, err := p.Claim(256); err != nil || !ok {
			b.Fatal(ok, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(256*b.N), "µs/run")
}

// TestLeases: a task whose heartbeat has not moved for a whole lease, as
// the observer's clock measures it, is dead; one that renews is not; a
// task just seen is not dead before a lease has passed since.
func TestLeases(t *testing.T) {
	out := t.TempDir()
	a, _ := Open(out, "s", "a", 10)
	b, _ := Open(out, "s", "b", 10)
	t0 := time.Unix(1e9, 0)
	const lease = time.Minute
	if err := b.Renew(Busy); err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		at    time.Duration
		renew bool
		dead  string
	}{
		{0, false, "[]"},                                   // first seen
		{lease - time.Second, false, "[]"},                 // not yet a lease
		{lease - time.Millisecond, true, "[]"},             // it renewed: seen anew
		{2*lease - time.Second, false, "[]"},               // a lease since it moved: not yet
		{2*lease - time.Millisecond + lease, false, "[b]"}, // unmoved for more than a lease
	} {
		if step.renew {
			b.Renew(Busy)
		}
		dead, err := a.Dead(t0.Add(step.at), lease)
		if err != nil || fmt.Sprint(dead) != step.dead {
			t.Errorf("at %v: dead %v, %v; want %s", step.at, dead, err, step.dead)
		}
	}
	// A lease file that is a link is an error naming it, not followed.
	os.Symlink(filepath.Join(out, Folder, "tasks", "b"), filepath.Join(out, Folder, "tasks", "c"))
	if _, err := a.Dead(t0, lease); err == nil || !strings.Contains(err.Error(), "tasks/c") {
		t.Errorf("a link for a lease: %v", err)
	}
}

// TestTakeOver: a dead task's claim is taken over by exactly one task of
// those that try at once; the owner is the last generation; the task it
// was taken from no longer owns it (fencing); Claims says who owns each.
func TestTakeOver(t *testing.T) {
	out := t.TempDir()
	dead, _ := Open(out, "s", "dead", 10)
	c, _, _ := dead.Claim(4)
	if ok, err := dead.Owns(c); !ok || err != nil {
		t.Fatalf("the claimer does not own its claim: %v", err)
	}
	var wins []string
	var mu sync.Mutex
	atOnce(8, func(k int) {
		p, _ := Open(out, "s", fmt.Sprint("t", k), 10)
		got, ok, err := p.TakeOver(c)
		if err != nil {
			t.Error(err)
		}
		mu.Lock()
		defer mu.Unlock()
		if ok {
			wins = append(wins, got.Task)
			if owns, _ := p.Owns(got); !owns {
				t.Errorf("%s took the claim over and does not own it", got.Task)
			}
		} else if got.Gen != 1 {
			t.Errorf("a task that lost the takeover was told generation %d, want 1", got.Gen)
		}
	})
	if len(wins) != 1 {
		t.Fatalf("%d tasks took the claim over: %v, want one", len(wins), wins)
	}
	if ok, err := dead.Owns(c); ok || err != nil {
		t.Errorf("the task it was taken from still owns it: %v", err)
	}
	claims, err := dead.Claims()
	if err != nil || len(claims) != 1 || claims[0].Task != wins[0] || claims[0].Gen != 1 {
		t.Errorf("Claims: %v, %v; want the runs 0-4 owned by %s, generation 1", claims, err, wins[0])
	}
}

// TestPeers: a task that said it is done is never dead, however long its
// heartbeat stands still; an idle one that renews is seen moving; the
// tasks are counted by their lease files.
func TestPeers(t *testing.T) {
	out := t.TempDir()
	a, _ := Open(out, "s", "a", 10)
	done, _ := Open(out, "s", "done", 10)
	idle, _ := Open(out, "s", "idle", 10)
	t0 := time.Unix(1e9, 0)
	const lease = time.Minute
	done.Renew(Done)
	idle.Renew(Idle)
	a.Peers(t0, lease)
	idle.Renew(Idle)
	peers, err := a.Peers(t0.Add(2*lease), lease)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(peers); got != "[{done done false false 0s} {idle idle false true 0s}]" {
		t.Errorf("peers %s", got)
	}
	if n := a.Tasks(); n != 2 {
		t.Errorf("%d tasks counted before a renewed, want 2", n)
	}
	peers, _ = a.Peers(t0.Add(4*lease), lease)
	if got := fmt.Sprint(peers); got != "[{done done false false 0s} {idle idle true false 0s}]" {
		t.Errorf("peers two leases later %s", got)
	}
}
