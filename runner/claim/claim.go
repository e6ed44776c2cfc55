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
// Leases (a task's claims taken over when it stops renewing them) come
// next (issue 55); this package does not yet know when a task died.
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

// A Claim is the runs From to To-1 of the sweep, claimed by Task.
type Claim struct {
	From, To int
	Task     string
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
	total            int
	next             int // the first run no claim this task has seen covers
}

// Open opens the claims of output directory out for task, for the sweep
// of total runs whose identity is sweep (the ledger's sweep hash),
// creating the folder and the identity when it is the first. A folder
// that holds another sweep's claims is refused (ErrOtherSweep).
func Open(out, sweep, task string, total int) (*Pool, error) {
	if sweep == "" || task == "" || strings.ContainsAny(sweep+task, "\n") {
		return nil, errors.New("claim: a sweep and a task, each one line, are needed")
	}
	dir := filepath.Join(out, Folder)
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("claim: %w", err)
	}
	if err := publish(dir, sweepFile, []byte(sweep+"\n")); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("claim: %w", err)
	}
	b, err := untrusted.ReadFile(dir, sweepFile, maxFile)
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	if got := strings.TrimSuffix(string(b), "\n"); got != sweep {
		return nil, fmt.Errorf("claim: %s: %w (%q, this is %q)", filepath.Join(dir, sweepFile), ErrOtherSweep, got, sweep)
	}
	return &Pool{dir: dir, sweep: sweep, task: task, total: total}, nil
}

// Claim claims for the task the next n runs (at least 1) that no task has
// claimed, fewer when fewer are left; ok is false when every run is
// claimed. An error (a full disk, a folder it may not write, a claim that
// is not a regular file or does not parse) claims nothing: the caller
// starts no run on it.
func (p *Pool) Claim(n int) (c Claim, ok bool, err error) {
	for p.next < p.total {
		to := min(p.next+max(n, 1), p.total)
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
		// Another task's: go on from where it ends.
		other, err := p.read(p.next)
		if err != nil {
			return Claim{}, false, err
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
		out = append(out, c)
		from = c.To
	}
	return out, nil
}

// read reads the claim of the runs from from.
func (p *Pool) read(from int) (Claim, error) {
	name := strconv.Itoa(from)
	path := filepath.Join(p.dir, name)
	b, err := untrusted.ReadFile(p.dir, name, maxFile)
	if err != nil {
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
	return Claim{From: from, To: r.To, Task: r.Task}, nil
}

// publish makes dir/name hold b, whole or not at all: b is written to a
// file of a unique name and linked to name, which fails (os.ErrExist)
// when name exists; the unique name is removed either way.
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
	return os.Link(tmp, filepath.Join(dir, name))
}
