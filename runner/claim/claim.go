// Package claim shares the runs of one sweep among the tasks of a
// submission (array tasks, each a nodepack on its own node) through files
// in the output directory they already share, with no server and no lock:
// a task claims the next runs before it starts them by linking a file it
// wrote whole to the claim's name, link(2), which is atomic and fails when
// the name exists on local file systems, NFS (v3 and later) and Lustre
// alike, where flock across nodes is not to be trusted. A claim is a range
// of the sweep's runs, numbered in its order from 0; claims follow one
// another (each names where the next begins), so a task finds the first
// free run by following them from where it last was.
//
// Everything in the claims folder is read as untrusted: regular files
// only, no link followed, bounded reads, never a blocking open. A claim of
// another sweep, or one that does not parse, is an error naming the file,
// never a claim skipped.
//
// Leases: each task renews a heartbeat file of its own (Renew); a task
// whose heartbeat has not moved for a lease, as the observer's own clock
// measures it (no two nodes' clocks are compared), is dead (Dead), and
// another task may take its claims over (TakeOver): a takeover is the
// claim's name with the next generation, linked as a claim is, so two
// tasks never both take it. The owner of a claim is its highest
// generation; a task that finds its claim taken (Owns false) stops
// starting its runs and stops those it runs: fencing.
package claim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nodepack/nodepack/runner/untrusted"
)

// Folder is the claims' folder in the output directory.
const Folder = "claims"

// sweepFile holds the identity of the sweep the claims are of.
const sweepFile = "sweep"

// maxFile bounds what is read of a file in the claims folder.
const maxFile = 4096

// ErrOtherSweep is wrapped by Open's error when the claims folder is
// another sweep's.
var ErrOtherSweep = errors.New("the claims are another sweep's")

// ErrHidden is wrapped by ClaimWith's error when the next claim exists
// (linking it failed: the name is taken) but this node cannot read it
// yet: its cache still says "no such file" (NFS's lookupcache, for up to
// acdirmax). Nothing was claimed; try again once the caches expired.
var ErrHidden = errors.New("another task's claim is hidden by this node's cache")

// openWait bounds how long Open waits for the sweep's identity, made by
// another task, to show through this node's cache.
const openWait = 3 * time.Minute

// A Claim is the runs From to To-1 of the sweep, claimed by Task, taken
// over Gen times (0: as first claimed).
type Claim struct {
	From, To int
	Task     string
	Gen      int
}

// record is a claim's file: its task, where the next claim begins, and
// the sweep it is of.
type record struct {
	Task  string `json:"task"`
	To    int    `json:"to"`
	Sweep string `json:"sweep"`
}

// Pool is one task's view of the claims of a sweep of Total runs. It is
// not safe for concurrent use: each task has one.
type Pool struct {
	dir, sweep, task string
	beats            string // the folder of the tasks' lease files
	total            int
	next             int // the first run no claim this task has seen covers
	beat             int // this task's heartbeats so far
	// seen is each other task's heartbeat as last read, and when (by this
	// task's clock) it was first read with that count.
	seen map[string]seenBeat
}

// seenBeat is another task's heartbeat count and when it was first seen.
type seenBeat struct {
	beat  int
	since time.Time
	moved bool // it was seen with another count before
}

// maxGen bounds the takeovers of one claim.
const maxGen = 1000

// Open opens the claims of output directory out for task, for the sweep
// of total runs whose identity is sweep (the ledger's sweep hash),
// creating the folder and the identity when it is the first. A folder
// that holds another sweep's claims is refused (ErrOtherSweep).
func Open(out, sweep, task string, total int) (*Pool, error) {
	if sweep == "" || task == "" || strings.ContainsAny(sweep+task, "\n") || strings.ContainsAny(task, "/\\") || strings.HasPrefix(task, ".") {
		return nil, errors.New("claim: a sweep and a task, each one line, the task a name without slashes nor a leading dot, are needed")
	}
	dir := filepath.Join(out, Folder)
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("claim: %w", err)
	}
	// The leases apart from the claims: a task reads every lease at each
	// beat, and a folder of thousands of claims is no place to list them.
	beats := filepath.Join(dir, beatsFolder)
	if err := os.Mkdir(beats, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("claim: %w", err)
	}
	// The first task writes the identity; the others (and a folder they
	// may only read) read it.
	b, err := readFile(dir, sweepFile, maxFile)
	if errors.Is(err, os.ErrNotExist) {
		if err := publish(dir, sweepFile, []byte(sweep+"\n")); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("claim: %w", err)
		}
		b, err = readFile(dir, sweepFile, maxFile)
		// Made by another task, and hidden by this node's cache of "no
		// such file" until it expires.
		for deadline := time.Now().Add(openWait); errors.Is(err, os.ErrNotExist) && time.Now().Before(deadline); {
			time.Sleep(100 * time.Millisecond)
			b, err = readFile(dir, sweepFile, maxFile)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	if got := strings.TrimSuffix(string(b), "\n"); got != sweep {
		return nil, fmt.Errorf("claim: %s: %w (%q, this is %q)", filepath.Join(dir, sweepFile), ErrOtherSweep, got, sweep)
	}
	return &Pool{dir: dir, beats: beats, sweep: sweep, task: task, total: total, seen: map[string]seenBeat{}}, nil
}

// Claim claims for the task the next n runs (at least 1) that no task has
// claimed, fewer when fewer are left; ok is false when every run is
// claimed. An error (a full disk, a folder it may not write, a claim that
// is not a regular file or does not parse) claims nothing: the caller
// starts no run on it.
func (p *Pool) Claim(n int) (c Claim, ok bool, err error) {
	return p.ClaimWith(func(int) int { return n })
}

// ClaimWith claims as Claim does, as many runs as size says for the
// runs left from the first free one (at least 1).
func (p *Pool) ClaimWith(size func(left int) int) (c Claim, ok bool, err error) {
	for p.next < p.total {
		// Another task's claim, most often, when many claim at once:
		// followed without writing one of this task's that would lose.
		if other, err := p.read(p.next); err == nil {
			p.next = other.To
			continue
		} else if !errors.Is(err, os.ErrNotExist) {
			return Claim{}, false, err
		}
		to := min(p.next+max(size(p.total-p.next), 1), p.total)
		b, _ := json.Marshal(record{Task: p.task, To: to, Sweep: p.sweep})
		err := publish(p.dir, strconv.Itoa(p.next), append(b, '\n'))
		if err == nil {
			c = Claim{From: p.next, To: to, Task: p.task}
			p.next = to
			return c, true, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return Claim{}, false, fmt.Errorf("claim: runs from %d: %w", p.next, err)
		}
		// Another task's: go on from where it ends. Or this task's own,
		// made though its reply was lost and its link count unread: a
		// task's name is its own in the pool.
		other, err := p.read(p.next)
		if errors.Is(err, os.ErrNotExist) {
			return Claim{}, false, fmt.Errorf("claim: runs from %d: %w", p.next, ErrHidden)
		}
		if err != nil {
			return Claim{}, false, err
		}
		if other.Task == p.task && other.To == to {
			p.next = to
			return other, true, nil
		}
		p.next = other.To
	}
	return Claim{}, false, nil
}

// Claims returns every claim made so far, in the sweep's order, from the
// first run to the first that no claim covers.
func (p *Pool) Claims() ([]Claim, error) {
	var out []Claim
	for from := 0; from < p.total; {
		c, err := p.read(from)
		if errors.Is(err, os.ErrNotExist) {
			break
		}
		if err != nil {
			return out, err
		}
		if c, err = p.owner(c); err != nil {
			return out, err
		}
		out = append(out, c)
		from = c.To
	}
	return out, nil
}

// owner is claim c as its highest generation has it.
func (p *Pool) owner(c Claim) (Claim, error) {
	for gen := c.Gen + 1; gen <= maxGen; gen++ {
		next, err := p.readGen(c.From, gen)
		if errors.Is(err, os.ErrNotExist) {
			return c, nil
		}
		if err != nil {
			return c, err
		}
		if next.To != c.To {
			return c, fmt.Errorf("claim: %s: runs %d to %d, where the claim it takes over ends at %d", p.genPath(c.From, gen), next.From, next.To, c.To)
		}
		c = next
	}
	return c, fmt.Errorf("claim: runs from %d: taken over more than %d times", c.From, maxGen)
}

// Owns reports whether this task still owns claim c: no task took it
// over since (fencing: a task that does not stops its runs of it).
func (p *Pool) Owns(c Claim) (bool, error) {
	now, err := p.owner(c)
	return err == nil && now.Gen == c.Gen && now.Task == p.task, err
}

// TakeOver takes claim c (as Claims or owner read it) over for this
// task: ok is false when another task took it first, and then the claim
// is the owner's.
func (p *Pool) TakeOver(c Claim) (Claim, bool, error) {
	gen := c.Gen + 1
	if gen > maxGen {
		return c, false, fmt.Errorf("claim: runs from %d: taken over more than %d times", c.From, maxGen)
	}
	b, _ := json.Marshal(record{Task: p.task, To: c.To, Sweep: p.sweep})
	err := publish(p.dir, genName(c.From, gen), append(b, '\n'))
	switch {
	case err == nil:
		return Claim{From: c.From, To: c.To, Task: p.task, Gen: gen}, true, nil
	case errors.Is(err, os.ErrExist):
		now, err := p.owner(c)
		if err == nil && now.Task == p.task && now.Gen == gen {
			return now, true, nil // this task's, made though its reply was lost
		}
		return now, false, err
	}
	return c, false, fmt.Errorf("claim: taking over runs from %d: %w", c.From, err)
}

// State is what a task says of itself in its heartbeat.
type State string

// A task's states.
const (
	Busy State = "busy" // it runs runs of its claims, or may claim more
	Idle State = "idle" // nothing of its own is left to run: it watches the others' leases
	Done State = "done" // it ended with every run of its claims ended: it is not dead, it is gone
)

// Renew renews this task's lease: its heartbeat moves on, saying state.
func (p *Pool) Renew(state State) error {
	p.beat++
	b, _ := json.Marshal(heartbeat{Task: p.task, Beat: p.beat, Sweep: p.sweep, State: state})
	if err := replace(p.beats, p.task, append(b, '\n')); err != nil {
		// A rename whose reply was lost (NFS) was made: the lease file
		// then says this beat.
		if got, rerr := readFile(p.beats, p.task, maxFile); rerr == nil && bytes.Equal(bytes.TrimSpace(got), b) {
			return nil
		}
		return fmt.Errorf("claim: renewing the lease of %s: %w", p.task, err)
	}
	return nil
}

// heartbeat is a task's lease file.
type heartbeat struct {
	Task  string `json:"task"`
	Beat  int    `json:"beat"`
	Sweep string `json:"sweep"`
	State State  `json:"state,omitempty"`
}

// beatsFolder is the folder of the tasks' lease files in the claims
// folder: one per task, by its name.
const beatsFolder = "tasks"

// A Peer is another task of the pool as this one sees it.
type Peer struct {
	Task  string
	State State
	// Dead: its heartbeat has not moved for a lease, by this task's clock,
	// and it did not say it was done.
	Dead bool
	// Moved: its heartbeat was seen to move (not only read once): it is
	// alive now, as far as this task can tell.
	Moved bool
	// Behind is how long before this task's own last heartbeat the
	// peer's last one was written, by the file system's clock (the two
	// files' modification times, both set by the one file server): a
	// first guess, before a lease of watching, at whether it is alive.
	Behind time.Duration
}

// Peers returns the other tasks of the pool as this task saw them from
// its reads (now is this task's clock): a task is dead only after it was
// seen unmoved for a whole lease, never from another node's clock.
func (p *Pool) Peers(now time.Time, lease time.Duration) ([]Peer, error) {
	entries, err := os.ReadDir(p.beats)
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	var mine time.Time
	if st, err := os.Lstat(filepath.Join(p.beats, p.task)); err == nil {
		mine = st.ModTime()
	}
	var peers []Peer
	for _, e := range entries {
		task := e.Name()
		path := filepath.Join(p.beats, task)
		if task == p.task || strings.HasPrefix(task, ".") {
			continue
		}
		b, err := readFile(p.beats, task, maxFile)
		if err != nil {
			return nil, fmt.Errorf("claim: %w", err)
		}
		var h heartbeat
		if err := json.Unmarshal(b, &h); err != nil || h.Task != task || h.Sweep != p.sweep {
			return nil, fmt.Errorf("claim: %s: not a lease of this sweep's task %q", path, task)
		}
		peer := Peer{Task: task, State: h.State}
		if st, err := os.Lstat(path); err == nil && !mine.IsZero() {
			peer.Behind = mine.Sub(st.ModTime())
		}
		s, ok := p.seen[task]
		switch {
		case !ok:
			p.seen[task] = seenBeat{beat: h.Beat, since: now}
		case s.beat != h.Beat:
			p.seen[task] = seenBeat{beat: h.Beat, since: now, moved: true}
			peer.Moved = true
		default:
			peer.Moved = s.moved && now.Sub(s.since) < lease
			peer.Dead = now.Sub(s.since) >= lease && h.State != Done
		}
		peers = append(peers, peer)
	}
	return peers, nil
}

// Tasks counts the tasks that ever renewed a lease in the pool, this one
// included once it has.
func (p *Pool) Tasks() int {
	entries, _ := os.ReadDir(p.beats)
	n := 0
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), ".") {
			n++
		}
	}
	return n
}

// Dead returns the other tasks whose heartbeat has not moved for at least
// lease, as this task saw them (see Peers).
func (p *Pool) Dead(now time.Time, lease time.Duration) ([]string, error) {
	peers, err := p.Peers(now, lease)
	var dead []string
	for _, peer := range peers {
		if peer.Dead {
			dead = append(dead, peer.Task)
		}
	}
	return dead, err
}

// TakenOver reports whether any claim in output directory out's claims
// folder was taken over: only then may two tasks' ledgers both hold a run
// as ended (a task seen dead that was not, and ran on).
func TakenOver(out string) bool {
	entries, err := os.ReadDir(filepath.Join(out, Folder))
	if err != nil {
		return false
	}
	for _, e := range entries {
		if name := e.Name(); !strings.HasPrefix(name, ".") && strings.Contains(name, ".") {
			return true
		}
	}
	return false
}

// read reads the claim of the runs from from, as first made.
func (p *Pool) read(from int) (Claim, error) { return p.readGen(from, 0) }

// genName is the name of generation gen of the claim of the runs from
// from: the number alone for the first, then number.gen.
func genName(from, gen int) string {
	if gen == 0 {
		return strconv.Itoa(from)
	}
	return strconv.Itoa(from) + "." + strconv.Itoa(gen)
}

func (p *Pool) genPath(from, gen int) string { return filepath.Join(p.dir, genName(from, gen)) }

// readGen reads generation gen of the claim of the runs from from.
func (p *Pool) readGen(from, gen int) (Claim, error) {
	name := genName(from, gen)
	path := filepath.Join(p.dir, name)
	b, err := readFile(p.dir, name, maxFile)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return Claim{}, err
		}
		return Claim{}, fmt.Errorf("claim: %w", err)
	}
	var r record
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	switch err := d.Decode(&r); {
	case err != nil:
		return Claim{}, fmt.Errorf("claim: %s: %v", path, err)
	case r.Sweep != p.sweep:
		return Claim{}, fmt.Errorf("claim: %s: %w (%q)", path, ErrOtherSweep, r.Sweep)
	case r.To <= from || r.To > p.total || r.Task == "":
		return Claim{}, fmt.Errorf("claim: %s: runs %d to %d of %d, by %q: not a claim of this sweep's runs", path, from, r.To, p.total, r.Task)
	}
	return Claim{From: from, To: r.To, Task: r.Task, Gen: gen}, nil
}

// replace makes dir/name hold b, in place of what it held: b is written
// to a file of a unique name and renamed over name.
func replace(dir, name string, b []byte) error {
	f, err := os.CreateTemp(dir, "."+name+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	if _, err := f.Write(b); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := rename(tmp, filepath.Join(dir, name)); err != nil {
		// Made, perhaps, with its reply lost (rename(2), NFS): the
		// caller takes it as not made, which is the cautious side.
		os.Remove(tmp)
		return err
	}
	return nil
}

// publish makes dir/name hold b, whole or not at all: b is written to a
// file of a unique name in dir itself (BeeGFS before 7.4 links within a
// folder only) and linked to name, which fails (os.ErrExist) when name
// exists; the unique name is removed either way. A link whose reply was
// lost may report an error after it was made (link(2), NFS): on any
// error the unique file's link count says what happened (open(2)'s
// recipe), 2 meaning the link is made.
func publish(dir, name string, b []byte) error {
	f, err := os.CreateTemp(dir, "."+name+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	err = link(tmp, filepath.Join(dir, name))
	if err != nil && linked(tmp) {
		return nil // made, though its reply said otherwise
	}
	return err
}

// linked reports whether the file at path has a second name: a link of
// it was made.
func linked(path string) bool {
	st, err := os.Lstat(path)
	if err != nil {
		return false
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	return ok && sys.Nlink >= 2
}

// link and rename are os.Link and os.Rename, and open untrusted.ReadFile,
// apart for the tests, which lose their replies and make handles stale.
var (
	link   = os.Link
	rename = os.Rename
	open   = untrusted.ReadFile
)

// staleTries is how many times a read that meets a stale file handle is
// made.
const staleTries = 3

// readFile reads a file of the claims folder as untrusted.ReadFile does,
// again when the handle went stale (ESTALE: another node replaced or
// removed the file this node's cache named, as a lease file is replaced
// at every beat): the name is looked up anew.
func readFile(dir, name string, limit int64) ([]byte, error) {
	b, err := open(dir, name, limit)
	for try := 1; try < staleTries && errors.Is(err, syscall.ESTALE); try++ {
		b, err = open(dir, name, limit)
	}
	return b, err
}
