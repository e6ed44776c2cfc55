package claim

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The two sides of a lease. An observer takes a task for dead once it has
// seen the task's heartbeat count stand still for a lease on its own clock
// (Peers). It cannot see a count before it is written, and a file
// system's caches show it a count at most Cache late, so it never takes
// the task for dead sooner than a lease after the task's last renewal
// began, as long as the cache is shorter than half a lease (a task
// renews at least every half lease while it runs anything). The holder
// keeps to the other half: it has no run left half a lease after its
// last renewal began (StopBy). Between the two is half a lease for the
// clocks' rates and the caches; no two clocks are ever compared.

// StopBy is when a task whose last successful renewal began at renewed
// must have no run of its claims left: half a lease later.
func StopBy(renewed time.Time, lease time.Duration) time.Time {
	return renewed.Add(lease / 2)
}

// Beat is how often a task renews a lease: six times a lease.
func Beat(lease time.Duration) time.Duration { return max(lease/6, 10*time.Millisecond) }

// CheckLease says whether lease fits a task whose runs take stop to stop
// (their grace, doubled when a checkpoint is asked for first) on a file
// system whose caches show a change up to cache late: the holder must be
// able to begin stopping two beats after its last renewal and be done
// by StopBy, and the cache must be shorter than a third of the lease, so
// that an observer sees each renewal well before its lease ends.
func CheckLease(lease, stop, cache time.Duration) error {
	if room := lease/2 - 2*Beat(lease); stop > room {
		return fmt.Errorf("a lease of %v leaves a task that cannot renew it %v to stop its runs, less than their %v (a grace, two with a checkpoint signal): a lease of at least %v, or a shorter grace, is needed",
			lease, room.Round(time.Millisecond), stop, 6*stop)
	}
	if cache > lease/3 {
		return fmt.Errorf("a lease of %v is too short for the output directory's caches of %v: another task may see a renewal that late, so the lease must be at least three times that, %v", lease, cache, 3*cache)
	}
	return nil
}

// A Cache is what a file system's mount options say of how late its
// clients may see another client's change.
type Cache struct {
	// Time is the longest a change may stay unseen: attributes,
	// directory entries and "no such file" alike.
	Time time.Duration
	// Known is false for a file system whose caches the options do not
	// tell (Lustre, GPFS, BeeGFS, CephFS, FUSE, SMB): Time is 0 then.
	Known bool
	// Why says where Time comes from, for a message.
	Why string
}

// local are the file systems one kernel serves alone: every process of
// the node sees every change at once.
var local = map[string]bool{
	"ext2": true, "ext3": true, "ext4": true, "xfs": true, "btrfs": true, "tmpfs": true,
	"overlay": true, "zfs": true, "f2fs": true, "ramfs": true, "jfs": true, "reiserfs": true,
}

// CacheOf reads the caches of a mount of type fstype with options opts
// (the comma-separated options of /proc/self/mountinfo, per-mount and
// super-block ones together). NFS caches file attributes up to acregmax
// (60 s unless said) and directory attributes, and with lookupcache=all
// (the default) "no such file", up to acdirmax (60 s); actimeo sets all
// of them, noac none.
func CacheOf(fstype, opts string) Cache {
	switch {
	case local[fstype]:
		return Cache{Known: true, Why: fstype + ": one node's"}
	case fstype != "nfs" && fstype != "nfs4":
		return Cache{Why: fstype + ": caches not told by its mount options"}
	}
	reg, dir := 60*time.Second, 60*time.Second
	why := []string{}
	for _, o := range strings.Split(opts, ",") {
		k, v, _ := strings.Cut(o, "=")
		sec := func() (time.Duration, bool) {
			n, err := strconv.Atoi(v)
			return time.Duration(n) * time.Second, err == nil && n >= 0
		}
		switch k {
		case "noac":
			reg, dir = 0, 0
			why = append(why, o)
		case "actimeo":
			if d, ok := sec(); ok {
				reg, dir = d, d
				why = append(why, o)
			}
		case "acregmax":
			if d, ok := sec(); ok {
				reg = d
				why = append(why, o)
			}
		case "acdirmax":
			if d, ok := sec(); ok {
				dir = d
				why = append(why, o)
			}
		}
	}
	if len(why) == 0 {
		why = append(why, "acregmax and acdirmax 60 s by default")
	}
	return Cache{Time: max(reg, dir), Known: true, Why: fstype + " " + strings.Join(why, ",")}
}
