package ledger

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nodepack/nodepack/resources/usage"
	"github.com/nodepack/nodepack/runner/run"
	"github.com/nodepack/nodepack/runner/untrusted"
)

// Writer appends the record of a sweep to a ledger file: one JSON line per
// record. Records are written in group commits: those that arrive within
// commitInterval of the last commit wait and go together, in one write,
// followed by one fsync when any of them is a finished attempt (see Post).
// Open one per shard: a ledger has one writer, and Open locks it against a
// second one. Its methods may be called concurrently.
//
// A Writer watches over its file. Before every write it checks that its
// file is still the one at its path; if someone deleted or replaced it, it
// writes the file again from what it holds open (nothing is lost) and
// reports a Problem. It also keeps room allocated past the end of the
// file, so that when the disk fills up the records of the runs still
// running and the session's end record still fit: the Problem then says
// the disk is full, before any write fails.
type Writer struct {
	path   string
	dir    string
	absDir string // dir made absolute once, for relative; "" if that failed
	host   string
	past   *Log     // what the file held when opened
	lock   *os.File // the lock directory, held for the life of the Ledger
	backup string   // where --restart moved the old ledger

	mu        sync.Mutex
	file      ledgerFile
	size      int64
	reserved  int64 // the file's blocks are allocated up to here
	noReserve bool  // the file system cannot reserve space
	err       error // the first write error; no record is written after it
	problem   error // the first reason to start no more runs
	warn      []string
	buf       []byte // a commit's records

	commits committer
}

// ledgerFile is what Ledger needs of its file (tests use a full disk).
type ledgerFile interface {
	io.Writer
	io.ReaderAt
	Sync() error
	Truncate(size int64) error
	Close() error
	Stat() (os.FileInfo, error)
}

// ledgerReserve is the room a Ledger keeps allocated past the end of its
// file: enough for the finished records of a few hundred running runs and
// the end record. It is topped up when less than half of it is left.
const ledgerReserve = 256 << 10

// lockName is the name of the lock of the ledger at path: a directory
// beside it, which a cleanup that deletes ledger files does not remove.
func lockName(path string) string { return path + ".lock" }

// Open opens the ledger at path for appending, creating it and its
// directory if needed. First it takes the ledger's lock (see [lockName]):
// if another nodepack holds it, Open fails naming its pid and host.
// With restart, it then moves the old ledger out of the way (to
// path.<UTC time>.bak; see Backup) and starts an empty one.
//
// It reads what the file holds: any line that is not a valid record is an
// error naming the file and line, while an unfinished last line (the node
// lost power during a write) is cut off, with a warning. Runs the last
// session left running count as interrupted, since its writer is gone.
// Past keeps the records of the runs that did not succeed only (see Run).
func Open(path string, restart bool) (*Writer, error) { return open(path, restart, nil) }

// OpenFrom is Open without restart for a ledger read before, without the
// lock, into read (a Log of ReadDir): when the file is still the one read,
// unchanged, read is its Past and the file is not read again — a ledger of
// a million records takes a second to read. Otherwise (another nodepack
// wrote to it meanwhile, say) it is read again, as Open does.
func OpenFrom(path string, read *Log) (*Writer, error) { return open(path, false, read) }

func open(path string, restart bool, known *Log) (*Writer, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("open ledger: %w", err)
	}
	lock, err := lockLedger(path)
	if err != nil {
		return nil, err
	}
	l := &Writer{path: path, dir: dir, lock: lock}
	l.absDir, _ = filepath.Abs(dir)
	fail := func(err error) (*Writer, error) {
		if l.file != nil {
			l.file.Close()
		}
		lock.Close()
		return nil, err
	}
	if restart {
		if l.backup, err = backupLedger(path); err != nil {
			return fail(err)
		}
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND|noFollow, 0o644)
	if err != nil {
		return fail(fmt.Errorf("open ledger: %w", linkError(path, err)))
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		return fail(fmt.Errorf("open ledger: %s: not a regular file: %w", path, run.ErrLink))
	}
	l.file = f
	past := known
	if st, err := f.Stat(); err != nil || known == nil || known.ident == nil || !os.SameFile(known.ident, st) ||
		st.Size() != known.Size+known.Torn || !st.ModTime().Equal(known.ident.ModTime()) {
		var size int64
		if st != nil {
			size = st.Size()
		}
		if past, err = read(f, path, size, ReadOptions{}, nil); err != nil {
			return fail(err)
		}
	}
	past.MarkInterrupted()
	l.past, l.size = past, past.Size
	l.host, _ = os.Hostname()
	if len(past.Unknown) > 0 {
		n := 0
		for _, k := range past.Unknown {
			n += k
		}
		l.warn = append(l.warn, fmt.Sprintf("%s: left out %d records of types this nodepack does not know (%s): a newer nodepack's", path, n, unknownTypes(past.Unknown)))
	}
	if past.Torn > 0 {
		if err := f.Truncate(past.Size); err != nil {
			return fail(fmt.Errorf("open ledger: cut the unfinished last line: %w", err))
		}
		l.warn = append(l.warn, fmt.Sprintf("%s: left out an unfinished last line (%d bytes): the write was cut off", path, past.Torn))
	}
	if _, err := f.Seek(0, io.SeekEnd); err != nil {
		return fail(fmt.Errorf("open ledger: %w", err))
	}
	return l, nil
}

// linkError names path for an open that met a symbolic link (ELOOP with
// O_NOFOLLOW) or a file where a directory should be: the ledger and its
// lock are never written through a link nodepack did not make.
func linkError(path string, err error) error {
	if errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.ENOTDIR) {
		return fmt.Errorf("%s: %w", path, run.ErrLink)
	}
	return err
}

// lockOwner is what the lock directory's owner file says.
type lockOwner struct {
	PID   int       `json:"pid"`
	Host  string    `json:"host"`
	Since time.Time `json:"since"`
}

// lockLedger takes the lock of the ledger at path: an exclusive flock on
// its lock directory, whose owner file names the holder for the next one.
func lockLedger(path string) (*os.File, error) {
	name := lockName(path)
	if err := os.Mkdir(name, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("open ledger: lock: %w", err)
	}
	dir, err := os.OpenFile(name, os.O_RDONLY|noFollow|directory, 0)
	if err != nil {
		return nil, fmt.Errorf("open ledger: lock: %w", linkError(name, err))
	}
	if err := lockFile(dir); err != nil {
		dir.Close()
		holder := "another nodepack"
		var o lockOwner
		if b, rerr := untrusted.ReadFile(name, "owner", 64<<10); rerr == nil && json.Unmarshal(b, &o) == nil && o.PID > 0 {
			holder = fmt.Sprintf("another nodepack (pid %d on %s, since %s)", o.PID, o.Host, o.Since.Local().Format(time.DateTime))
		}
		return nil, fmt.Errorf("%s is in use: %s is writing it: %w", path, holder, err)
	}
	host, _ := os.Hostname()
	b, _ := json.Marshal(lockOwner{PID: os.Getpid(), Host: host, Since: time.Now().UTC()})
	if err := writeOwner(dir, append(b, '\n')); err != nil {
		dir.Close()
		return nil, fmt.Errorf("open ledger: lock: %w", err)
	}
	return dir, nil
}

// Backup returns where Open moved the old ledger for a restart; ""
// if there was none or it was no restart.
func (l *Writer) Backup() string { return l.backup }

// Past returns what the ledger held when it was opened.
func (l *Writer) Past() *Log { return l.past }

// Warnings returns what Open found worth telling.
func (l *Writer) Warnings() []string { return l.warn }

// Err returns the first write error, after which the ledger writes nothing.
func (l *Writer) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Problem returns the first reason the sweep should start no more runs: a
// write error, the disk filling up (records still fit), the file having
// been deleted or replaced behind the ledger's back (it was written again),
// or a record that could not be encoded, and so is not in the ledger.
// It is nil while all is well.
func (l *Writer) Problem() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.problem
}

// Check makes sure the ledger's file is still the one at its path now,
// not at the next commit (see Problem), and returns Problem. A caller that
// must not start a run while the ledger is in trouble calls it first.
func (l *Writer) Check() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err == nil {
		l.checkPresent()
	}
	return l.problem
}

// WriteHeader starts a session. h holds what the caller knows (version,
// command, shard, total, node, plan, sweep); type, time, format, host and
// pid are filled in. The write is synced and room is reserved for the
// session's last records, so a full disk shows here, before anything runs.
func (l *Writer) WriteHeader(h Header) error {
	h.Type, h.Time, h.Format, h.Host, h.PID = TypeHeader, time.Now().UTC(), Format, l.host, os.Getpid()
	if err := l.writeNow(&h); err != nil {
		return err
	}
	return l.Problem()
}

// WriteEnd ends the session: note says how, deferred counts the runs left
// for the next one. It commits what waits, then the end record, at once.
func (l *Writer) WriteEnd(note string, deferred int) error {
	return l.writeNow(&End{Type: TypeEnd, Time: time.Now().UTC(), Note: note, Deferred: deferred})
}

// Append records a run.Event at once, synced, and returns the write's
// error: Post without the wait for the next group commit.
func (l *Writer) Append(ev run.Event) error { return l.writeNow(l.record(ev)) }

// Post records a run.Event, for execute.Options.OnEvent: a started
// record, or a finished one. It returns at once; the record goes with the
// next group commit, at most commitInterval after the last one, and a
// finished record makes that commit fsync the file. done, if not nil, is
// called once the record is durable (a started record: written), or with
// the error that lost it; it is called from the committing goroutine, in
// the order of the Posts, never concurrently: the place to report a run's
// end to the user, which must not come before its record is on disk. done
// must not call Append, WriteHeader, WriteEnd or Flush.
func (l *Writer) Post(ev run.Event, done func(error)) {
	rec := l.record(ev)
	_, fin := rec.(*Finished)
	l.commits.post(l, rec, fin, false, done)
}

// PostGPUOut records that a GPU reported fault f and was taken out of use,
// synced with the next commit; done is called as Post's.
func (l *Writer) PostGPUOut(f usage.GPUFault, done func(error)) {
	rec := &GPUOut{Type: TypeGPUOut, Time: f.Time.UTC(), GPUs: []string{f.UUID}, Note: f.Reason}
	l.commits.post(l, rec, true, true, done)
}

// PostDensity records a decision of the density rule, synced with the
// next commit; done is called as Post's.
func (l *Writer) PostDensity(rec Density, done func(error)) {
	rec.Type, rec.Time = TypeDensity, rec.Time.UTC()
	l.commits.post(l, &rec, false, true, done)
}

// Flush commits every record posted so far, at once, and returns when
// their done functions have run; its error is Err's.
func (l *Writer) Flush() error {
	l.commits.post(l, nil, false, true, nil)
	l.commits.wait(l)
	return l.Err()
}

// relative makes a log path relative to the ledger's directory, so that a
// reader on another machine finds it from there.
func (l *Writer) relative(path string) string {
	if path == "" || l.absDir == "" {
		return path
	}
	// The logs are in the ledger's directory: a cut, not a filepath.Rel,
	// for every start and end.
	if rest, ok := strings.CutPrefix(path, l.absDir); ok && strings.HasPrefix(rest, "/") && filepath.Clean(path) == path {
		return rest[1:]
	}
	if rel, err := filepath.Rel(l.absDir, path); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return path
}

// writeNow commits what waits and rec, synced, at once, and returns rec's
// error.
func (l *Writer) writeNow(rec any) error {
	errc := make(chan error, 1)
	l.commits.post(l, rec, true, true, func(err error) { errc <- err })
	return <-errc
}

// commit appends lines with one write, synced if sync. A failed write (a
// full disk) is cut off again, so the file stays a sequence of whole
// records, and ends the ledger: every later commit returns the same error.
func (l *Writer) commit(lines []byte, sync bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return l.err
	}
	if len(lines) == 0 {
		return nil
	}
	l.checkPresent()
	n, err := l.file.Write(lines)
	if err == nil && sync {
		err = l.file.Sync()
	}
	if err != nil {
		if n > 0 {
			l.file.Truncate(l.size)
		}
		l.err = fmt.Errorf("ledger %s: %w", l.path, err)
		if l.problem == nil {
			l.problem = l.err
		}
		return l.err
	}
	l.size += int64(n)
	l.topUp()
	return nil
}

// topUp keeps ledgerReserve bytes allocated past the end of the file. A
// file system that cannot allocate ahead is left alone; one that is full
// is a Problem while the rest of the reserve still holds the last records.
func (l *Writer) topUp() {
	if l.noReserve || l.reserved-l.size >= ledgerReserve/2 {
		return
	}
	switch err := reserve(l.file, l.size, ledgerReserve); {
	case err == nil:
		l.reserved = l.size + ledgerReserve
	case errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT):
		l.noReserve = true
		if l.problem == nil {
			l.problem = fmt.Errorf("disk full: %s: no room to keep recording runs (%w)", l.path, err)
		}
	default:
		l.noReserve = true
	}
}

// reserve allocates n bytes of f from off without changing its size, so
// later writes there cannot fail for want of space.
func reserve(f ledgerFile, off, n int64) error {
	if r, ok := f.(interface{ Reserve(off, n int64) error }); ok {
		return r.Reserve(off, n)
	}
	if osf, ok := f.(*os.File); ok {
		return reserveFile(osf, off, n)
	}
	return errors.ErrUnsupported
}

// checkPresent makes sure the file at the ledger's path is the one it
// writes. If it was deleted or replaced, the ledger writes what it holds
// to a new file there (or, if another file took the name, beside it),
// carries on in that file, and records the Problem.
func (l *Writer) checkPresent() {
	held, err := l.file.Stat()
	if err != nil {
		return
	}
	onDisk, err := os.Stat(l.path)
	if err == nil && os.SameFile(held, onDisk) {
		return
	}
	what := "deleted"
	if err == nil {
		what = "replaced by another file"
	}
	dest, rerr := l.rewrite()
	switch {
	case rerr != nil:
		l.problem = fmt.Errorf("%s was %s while the sweep ran, and could not be written again: %w", l.path, what, rerr)
	case dest != l.path:
		l.problem = fmt.Errorf("%s was %s while the sweep ran: this sweep's records are now in %s", l.path, what, dest)
		l.path = dest
	default:
		l.problem = fmt.Errorf("%s was %s while the sweep ran: it was written again from the open file, nothing is lost", l.path, what)
	}
}

// rewrite copies what the ledger holds into a new file at its path, or
// beside it when another file has the name, and writes there from now on.
func (l *Writer) rewrite() (string, error) {
	tmp, err := os.CreateTemp(l.dir, ".ledger-rewrite-")
	if err != nil {
		return "", err
	}
	// The mode the ledger had (CreateTemp's is 0600): other accounts that
	// read status over a shared file system keep reading it.
	if st, err := l.file.Stat(); err == nil {
		tmp.Chmod(st.Mode().Perm())
	}
	if _, err := io.Copy(tmp, io.NewSectionReader(l.file, 0, l.size)); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return "", err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return "", err
	}
	dest := l.path
	if err := os.Link(tmp.Name(), dest); err != nil {
		dest = l.path + "." + time.Now().UTC().Format("20060102T150405.000Z") + ".recovered"
		if err := os.Rename(tmp.Name(), dest); err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
			return "", err
		}
	} else {
		os.Remove(tmp.Name())
	}
	l.file.Close()
	l.file = tmp
	l.reserved = 0
	l.topUp()
	return dest, nil
}

// Close commits what waits, closes the file and gives up the lock.
func (l *Writer) Close() error {
	l.Flush()
	l.mu.Lock()
	defer l.mu.Unlock()
	err := l.file.Close()
	l.lock.Close()
	return err
}

// ResumeCounts says what a resumed sweep did with the runs its ledger
// knew. Skipped runs do not run again; the others do.
type ResumeCounts struct {
	SkippedSucceeded int // succeeded before
	SkippedPruned    int // pruned before: stopped early, not run again
	SkippedFailed    int // failed before, not rerun
	Paused           int // paused before: candidates for promotion, not started unless promoted
	RetriedFailed    int // failed before, rerun as retry said
	Interrupted      int // interrupted, or started and never finished
	New              int // not in the ledger
}

// ResumeFilter says which runs still have to run according to the log,
// keyed on run.Run.ID: those it has no record of, those interrupted or
// started and never finished, and the failed ones retry says yes to (nil:
// none; retryAll: every one). Runs that succeeded, and the failed ones
// retry leaves out, are skipped. skip, called with the ID of every run in
// order (a source that leaves runs out itself: sweep.Source.RunsExcept),
// counts it and says whether to skip it; counts returns the tally so far
// and may be called at any time.
func (log *Log) ResumeFilter(retry func(Run) bool) (skip func(id string) bool, counts func() ResumeCounts) {
	return resumeFilter(log.Run, retry)
}

// ResumeFilter is Log.ResumeFilter over the whole ledgers of a pool (see
// Log.Whole): a run counts as its best record across them says (see
// ReadDir).
func (d *Dir) ResumeFilter(retry func(Run) bool) (skip func(id string) bool, counts func() ResumeCounts) {
	return resumeFilter(d.wholeRun, retry)
}

// wholeRun is the record of run id among the whole ledgers that ReadDir
// kept.
func (d *Dir) wholeRun(id string) (Run, bool) {
	for _, log := range d.Logs {
		if len(log.Sessions) == 0 || log.Other || !log.Whole() {
			continue
		}
		if r, ok := log.Run(id); ok && !r.Retired {
			return r, true
		}
	}
	return Run{ID: id, State: StatePending}, false
}

func resumeFilter(lookup func(id string) (Run, bool), retry func(Run) bool) (skip func(id string) bool, counts func() ResumeCounts) {
	var mu sync.Mutex
	var c ResumeCounts
	skip = func(id string) bool {
		mu.Lock()
		defer mu.Unlock()
		r, _ := lookup(id)
		switch state := r.State; {
		case state == StateSucceeded:
			c.SkippedSucceeded++
			return true
		case state == StatePruned:
			c.SkippedPruned++
			return true
		case state == StatePaused:
			c.Paused++ // the runner hands it on as paused (run.Run.Paused)
		case state == StateFailed && (retry == nil || !retry(r)):
			c.SkippedFailed++
			return true
		case state == StateFailed:
			c.RetriedFailed++
		case state == StatePending:
			c.New++
		default:
			c.Interrupted++
		}
		return false
	}
	counts = func() ResumeCounts {
		mu.Lock()
		defer mu.Unlock()
		return c
	}
	return skip, counts
}

// backupLedger renames the ledger at path out of the way, to
// path.<UTC time>.bak, and returns the new name; "" if there was none.
func backupLedger(path string) (string, error) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	backup := path + "." + time.Now().UTC().Format("20060102T150405.000Z") + ".bak"
	if err := os.Rename(path, backup); err != nil {
		return "", fmt.Errorf("back up ledger: %w", err)
	}
	return backup, nil
}

// unknownTypes lists the types of unknown, quoted, with their counts.
func unknownTypes(unknown map[string]int) string {
	var parts []string
	for _, typ := range slices.Sorted(maps.Keys(unknown)) {
		parts = append(parts, fmt.Sprintf("%q ×%d", typ, unknown[typ]))
	}
	return strings.Join(parts, ", ")
}
