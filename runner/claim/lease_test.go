package claim

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestLeaseSides: the holder's runs are gone (StopBy) before any observer
// may take it for dead, for every lease CheckLease accepts, however late
// within the cache the observer sees each renewal: an observer takes a
// task for dead a lease after it first saw the last count it sees, and it
// sees each count at most the cache late.
func TestLeaseSides(t *testing.T) {
	for _, lease := range []time.Duration{time.Second, 6 * time.Second, 3 * time.Minute} {
		for _, cache := range []time.Duration{0, lease / 6, lease / 3} {
			stop := lease / 6
			if err := CheckLease(lease, stop, cache); err != nil {
				t.Fatalf("CheckLease(%v, %v, %v): %v", lease, stop, cache, err)
			}
			beat := Beat(lease)
			// The holder renews at 0, beat, 2 beats, ..., last; then freezes.
			last := time.Duration(0)
			for k := range 20 {
				last = time.Duration(k) * beat
			}
			gone := StopBy(time.Time{}.Add(last), lease).Sub(time.Time{})
			// The observer sees each renewal k at k·beat + lag, lag ≤ cache,
			// the last one at the latest; it is dead a lease after it first
			// saw the last count it saw.
			for _, lag := range []time.Duration{0, cache / 2, cache} {
				seen := last + lag
				if dead := seen + lease; dead <= gone {
					t.Errorf("lease %v, cache %v, lag %v: an observer may take the task for dead at %v, before its runs are gone at %v", lease, cache, lag, dead, gone)
				}
				// Before it saw the last renewal it watched the one before,
				// seen at most lag late too: dead no sooner than that plus a lease.
				if prev := last - beat; seen > prev+lease {
					t.Errorf("lease %v, cache %v: the last renewal shows only after the one before would have expired", lease, cache)
				}
			}
		}
	}
}

// TestCheckLease: a lease too short for the runs' stop or for the caches
// is refused with the numbers.
func TestCheckLease(t *testing.T) {
	for _, tc := range []struct {
		lease, stop, cache time.Duration
		want               string
	}{
		{3 * time.Minute, 20 * time.Second, 60 * time.Second, ""},
		{3 * time.Minute, 31 * time.Second, 0, "a lease of 3m0s leaves a task that cannot renew it 30s to stop its runs, less than their 31s"},
		{2 * time.Minute, 10 * time.Second, 60 * time.Second, "too short for the output directory's caches of 1m0s"},
		{2 * time.Second, time.Second, 0, "at least 6s"},
	} {
		err := CheckLease(tc.lease, tc.stop, tc.cache)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("CheckLease(%v, %v, %v) = %v, want %q", tc.lease, tc.stop, tc.cache, err, tc.want)
		}
	}
}

// TestCacheOf: the caches of NFS mounts as mountinfo shows them, local
// file systems, and those whose options do not tell.
func TestCacheOf(t *testing.T) {
	for _, tc := range []struct {
		line  string
		point string
		cache time.Duration
		known bool
	}{
		{`36 25 0:32 / /home rw,relatime shared:1 - nfs4 srv:/export/home rw,vers=4.2,rsize=1048576,wsize=1048576,namlen=255,hard,proto=tcp,timeo=600,retrans=2,sec=sys,clientaddr=10.0.0.2,local_lock=none,addr=10.0.0.1`, "/home", 60 * time.Second, true},
		{`37 25 0:33 / /scratch rw,relatime - nfs srv:/s rw,vers=3,actimeo=5,hard,proto=tcp`, "/scratch", 5 * time.Second, true},
		{`38 25 0:34 / /proj rw - nfs srv:/p rw,vers=3,acregmin=3,acregmax=10,acdirmin=3,acdirmax=90,lookupcache=pos`, "/proj", 90 * time.Second, true},
		{`39 25 0:35 / /fast rw - nfs4 srv:/f rw,noac,vers=4.1`, "/fast", 0, true},
		{`40 25 8:1 / /data\040set rw,noatime - ext4 /dev/sda1 rw`, "/data set", 0, true},
		{`41 25 0:36 / /lustre rw - lustre 10.0.0.1@tcp:/fs rw,flock`, "/lustre", 0, false},
		{`42 25 0:37 / /mnt/a rw,nosuid,nodev - fuse.sharedfs sharedfs rw,user_id=0,group_id=0`, "/mnt/a", 0, false},
	} {
		point, fstype, opts, ok := parseMountinfo(tc.line)
		if !ok || point != tc.point {
			t.Errorf("parseMountinfo(%q) = %q %v", tc.line, point, ok)
			continue
		}
		c := CacheOf(fstype, opts)
		if c.Time != tc.cache || c.Known != tc.known || c.Why == "" {
			t.Errorf("%s: %+v, want %v known %v", tc.point, c, tc.cache, tc.known)
		}
	}
	if _, _, _, ok := parseMountinfo("garbage"); ok {
		t.Error("a line without its separator parsed")
	}
	c, err := MountCache(t.TempDir())
	if err != nil || c.Why == "" {
		t.Errorf("MountCache of a temporary directory: %+v, %v", c, err)
	}
}

// TestLostReplies: a link or a rename that was made but whose reply was
// lost (it reports an error): a claim and a takeover are still this
// task's, once, and no run is claimed twice or left unclaimed; a lease
// renewal is made when its file says so.
func TestLostReplies(t *testing.T) {
	out := t.TempDir()
	lose := func(err error) func(string, string) error {
		return func(a, b string) error {
			if e := os.Link(a, b); e != nil {
				return e
			}
			return &os.LinkError{Op: "link", Old: a, New: b, Err: err}
		}
	}
	defer func(l func(string, string) error) { link = l }(link)
	a, err := Open(out, "s", "a", 10)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Open(out, "s", "b", 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []error{syscall.EEXIST, syscall.EIO} {
		link = lose(e)
		c, ok, err := a.Claim(2)
		if err != nil || !ok || c.Task != "a" {
			t.Fatalf("a claim whose reply was lost (%v): %+v %v %v", e, c, ok, err)
		}
	}
	link = os.Link
	c, ok, err := b.Claim(2)
	if err != nil || !ok || c.From != 4 {
		t.Fatalf("the next claim: %+v %v %v, want runs from 4", c, ok, err)
	}
	// The link count unread as well: the claim is known by its task.
	link = func(a, b string) error {
		if e := os.Link(a, b); e != nil {
			return e
		}
		os.Remove(a)
		return &os.LinkError{Op: "link", Old: a, New: b, Err: syscall.EEXIST}
	}
	if c, ok, err := a.Claim(3); err != nil || !ok || c.From != 6 || c.To != 9 {
		t.Fatalf("a claim whose reply and link count were lost: %+v %v %v", c, ok, err)
	}
	link = lose(syscall.EIO)
	got, ok, err := b.TakeOver(Claim{From: 0, To: 2, Task: "a"})
	if err != nil || !ok || got.Gen != 1 || got.Task != "b" {
		t.Fatalf("a takeover whose reply was lost: %+v %v %v", got, ok, err)
	}
	link = os.Link
	claims, err := a.Claims()
	if err != nil || fmt.Sprint(claims) != "[{0 2 b 1} {2 4 a 0} {4 6 b 0} {6 9 a 0}]" {
		t.Errorf("claims: %v %v", claims, err)
	}
	if owns, _ := a.Owns(Claim{From: 0, To: 2, Task: "a"}); owns {
		t.Error("a still owns the claim taken over")
	}
	defer func(r func(string, string) error) { rename = r }(rename)
	rename = func(a, b string) error {
		if e := os.Rename(a, b); e != nil {
			return e
		}
		return &os.LinkError{Op: "rename", Old: a, New: b, Err: syscall.EIO}
	}
	if err := a.Renew(Busy); err != nil {
		t.Errorf("a renewal whose reply was lost: %v, want it made (the lease file says so)", err)
	}
	// One not made: its error.
	rename = func(a, b string) error { return &os.LinkError{Op: "rename", Old: a, New: b, Err: syscall.EIO} }
	if err := a.Renew(Busy); err == nil || !errors.Is(err, syscall.EIO) {
		t.Errorf("a renewal not made: %v, want its error", err)
	}
}

// TestPeersClocks: one task's clock runs 10 minutes ahead, then is
// stepped 20 minutes back, while it renews (its lease file's times are
// stamped by it, as Lustre's clients stamp theirs): the observer never
// takes it for dead while it renews, and takes it for dead a lease after
// it stops, as its own clock measures; no clock of the other task is
// read. Behind, the one hint from file times, shows the offset.
func TestPeersClocks(t *testing.T) {
	out := t.TempDir()
	const lease = time.Minute
	a, err := Open(out, "s", "a", 10)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Open(out, "s", "b", 10)
	if err != nil {
		t.Fatal(err)
	}
	stamp := func(offset time.Duration) {
		at := time.Now().Add(offset)
		if err := os.Chtimes(a.beats+"/a", at, at); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now() // the observer's clock, advanced by hand: virtual time
	beat := Beat(lease)
	b.Renew(Busy)
	for k := range 30 {
		offset := 10 * time.Minute
		if k >= 10 {
			offset = -10 * time.Minute // stepped back
		}
		a.Renew(Busy)
		stamp(offset)
		peers, err := b.Peers(start.Add(time.Duration(k)*beat), lease)
		if err != nil || len(peers) != 1 || peers[0].Dead {
			t.Fatalf("beat %d (a's clock %v off): %+v %v: a renews, so it is alive", k, offset, peers, err)
		}
		if want := -offset; peers[0].Behind < want-time.Minute || peers[0].Behind > want+time.Minute {
			t.Errorf("beat %d: Behind %v, want about %v", k, peers[0].Behind, want)
		}
	}
	// a stops renewing: dead once a lease has passed on b's clock since
	// b first saw its last count, not before.
	last := start.Add(29 * beat)
	for _, tc := range []struct {
		after time.Duration
		dead  bool
	}{{lease - time.Second, false}, {lease, true}} {
		peers, _ := b.Peers(last.Add(tc.after), lease)
		if len(peers) != 1 || peers[0].Dead != tc.dead {
			t.Errorf("%v after a's last renewal was first seen: %+v, want dead %v", tc.after, peers, tc.dead)
		}
	}
}

// TestStaleHandles: a read of a claim or a lease that meets a stale file
// handle (ESTALE: another node replaced the file) is made again, and
// one that stays stale is an error naming it.
func TestStaleHandles(t *testing.T) {
	out := t.TempDir()
	a, _ := Open(out, "s", "a", 10)
	b, _ := Open(out, "s", "b", 10)
	a.Claim(3)
	a.Renew(Busy)
	defer func(o func(string, string, int64) ([]byte, error)) { open = o }(open)
	real := open
	stale := 0
	open = func(dir, name string, limit int64) ([]byte, error) {
		if stale > 0 {
			stale--
			return nil, &os.PathError{Op: "open", Path: dir + "/" + name, Err: syscall.ESTALE}
		}
		return real(dir, name, limit)
	}
	stale = staleTries - 1
	if claims, err := b.Claims(); err != nil || len(claims) != 1 {
		t.Errorf("claims read through a stale handle: %v %v", claims, err)
	}
	stale = staleTries - 1
	if peers, err := b.Peers(time.Now(), time.Minute); err != nil || len(peers) != 1 {
		t.Errorf("a lease read through a stale handle: %v %v", peers, err)
	}
	stale = staleTries
	if _, err := b.Claims(); err == nil || !errors.Is(err, syscall.ESTALE) || !strings.Contains(err.Error(), "claims/0") {
		t.Errorf("a claim stale every time: %v, want its error naming it", err)
	}
}

// TestHiddenClaim: a claim another node made that this node's cache still
// hides ("no such file" cached: the link says the name is taken, the read
// says it is not there) claims nothing (ErrHidden), and once the cache
// lets it through the next claim follows it.
func TestHiddenClaim(t *testing.T) {
	out := t.TempDir()
	a, _ := Open(out, "s", "a", 10)
	b, _ := Open(out, "s", "b", 10)
	if _, _, err := a.Claim(4); err != nil {
		t.Fatal(err)
	}
	defer func(o func(string, string, int64) ([]byte, error)) { open = o }(open)
	real := open
	open = func(dir, name string, limit int64) ([]byte, error) {
		if name == "0" {
			return nil, &os.PathError{Op: "open", Path: dir + "/" + name, Err: syscall.ENOENT}
		}
		return real(dir, name, limit)
	}
	if c, ok, err := b.Claim(2); !errors.Is(err, ErrHidden) || ok {
		t.Fatalf("a hidden claim: %+v %v %v, want ErrHidden", c, ok, err)
	}
	open = real
	if c, ok, err := b.Claim(2); err != nil || !ok || c.From != 4 || c.To != 6 {
		t.Fatalf("once it shows: %+v %v %v, want runs 4 to 6", c, ok, err)
	}
}

// TestHiddenSweep: a task whose node's cache still hides the sweep's
// identity another task made (the name is taken, the read finds nothing)
// waits for it to show instead of failing.
func TestHiddenSweep(t *testing.T) {
	out := t.TempDir()
	if _, err := Open(out, "s", "a", 10); err != nil {
		t.Fatal(err)
	}
	defer func(o func(string, string, int64) ([]byte, error)) { open = o }(open)
	real, hid := open, 0
	open = func(dir, name string, limit int64) ([]byte, error) {
		if name == sweepFile && hid < 3 {
			hid++
			return nil, &os.PathError{Op: "open", Path: dir + "/" + name, Err: syscall.ENOENT}
		}
		return real(dir, name, limit)
	}
	if _, err := Open(out, "s", "b", 10); err != nil || hid != 3 {
		t.Fatalf("the sweep hidden %d times: %v, want it read once it shows", hid, err)
	}
	if _, err := Open(out, "other", "c", 10); !errors.Is(err, ErrOtherSweep) {
		t.Fatalf("another sweep, once shown: %v, want ErrOtherSweep", err)
	}
}
