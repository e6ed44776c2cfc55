package execute

import (
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/nodepack/nodepack/runner/metrics"
	"github.com/nodepack/nodepack/runner/run"
)

// The checkpoint contract. Every run with a run directory gets a folder
// of its own for its checkpoints, CheckpointDir in its run directory, in
// CheckpointEnv: the same folder for every attempt, retry, resume and
// resubmission of the run, made by nodepack before each attempt and
// never written by it. A run says it saved a checkpoint with a metrics
// line {"step": 1200, "checkpoint": 1200} (metrics.CheckpointKey), or by
// changing the folder while nodepack watches (Options.CheckpointSignal):
// then, once the folder is the same at nodepack's next read, the
// checkpoint is at the furthest step it had reported before the change
// was seen (it holds at least that much). Before a stop
// of its own (a cancel, the terminate deadline, a timeout, pruning)
// nodepack sends CheckpointSignal, when set, to a run that keeps
// checkpoints, and waits up to the grace for a new checkpoint before
// SIGTERM. A run keeps checkpoints once it reported one, or its folder
// holds something, or, before its first, once it said it keeps them with
// a checkpoint line at step 0 ({"checkpoint": 0}: none yet); the run's
// metrics are read once more before the stop decides, so that a
// declaration or a checkpoint written since the last read counts, and
// so that the checkpoint the stop waits for is a new one. Each
// attempt's Finished event says how far it got and where its last
// checkpoint was (run.Steps).
const (
	CheckpointEnv = "NODEPACK_CHECKPOINT_DIR"
	CheckpointDir = "checkpoints"
)

// checkpoints is what an attempt's watcher saw of its checkpoints, and
// the stop that asks for one.
type checkpoints struct {
	mu     sync.Mutex
	step   float64   // the last checkpoint's step; 0 none
	folder time.Time // the folder's modification time at the last checkpoint it made
	// seen is the folder's time at the last look; pending the step of
	// the change first seen since folder (see look).
	seen    time.Time
	pending float64
	asked   bool     // a stop asked for one
	dir     *os.File // the run's directory, open while the attempt runs; nil for none
	lines   bool     // the run reports its checkpoints by metrics lines: the folder says no step
	// declared says the run said it keeps checkpoints before its first
	// (a checkpoint line at step 0).
	declared bool
	saved    chan struct{}
	hurry    chan struct{} // the watcher reads every checkpointPoll from now
	// reads counts the watcher's reads; read is closed at the next one,
	// nil while no watcher reads.
	reads int
	read  chan struct{}
}

// checkpointPoll is how often a run's metrics and checkpoint folder are
// read while a stop waits for its checkpoint.
const checkpointPoll = 20 * time.Millisecond

// newCheckpoints is an attempt's; with watch (a checkpoint signal asks
// before stops, or pruning may pause the run) it notes the folder's time
// at the start, which nothing else needs: a system call per attempt saved
// for every other sweep.
func newCheckpoints(runDir *os.File, watch bool) *checkpoints {
	c := &checkpoints{saved: make(chan struct{}), hurry: make(chan struct{}, 1), dir: runDir}
	if runDir != nil && watch {
		_, c.folder, _ = statIn(runDir, CheckpointDir)
		c.seen = c.folder
	}
	return c
}

// sawLine records a checkpoint the run reported by a metrics line; one
// at step 0 (or before) says only that it keeps checkpoints.
func (c *checkpoints) sawLine(step float64) {
	c.mu.Lock()
	c.lines = true
	if !(step > 0) {
		c.declared = true
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	c.saw(step)
}

// watch says the watcher reads the run's metrics from now until unwatch.
func (c *checkpoints) watch() {
	c.mu.Lock()
	c.read = make(chan struct{})
	c.mu.Unlock()
}

// didRead says the watcher has read the run's metrics once more.
func (c *checkpoints) didRead() {
	c.mu.Lock()
	c.reads++
	if c.read != nil {
		close(c.read)
		c.read = make(chan struct{})
	}
	c.mu.Unlock()
}

// unwatch says the watcher reads no more.
func (c *checkpoints) unwatch() {
	c.mu.Lock()
	if c.read != nil {
		close(c.read)
		c.read = nil
	}
	c.mu.Unlock()
}

// keepsNow is keeps, asked before a stop: the watcher reads the run's
// metrics at once (twice: a read under way may have begun before the
// run's last line), waiting for that at most limit, and then the answer
// is given. The reads come first even when what was read so far says the
// run keeps checkpoints: they take in every checkpoint the run saved
// before it is asked for one, so that the checkpoint the stop then waits
// for is one saved after the ask, not an older one that no read had seen
// yet (which would end the wait, and the run with SIGTERM, at once).
func (c *checkpoints) keepsNow(limit time.Duration, asks bool) bool {
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	c.mu.Lock()
	want := c.reads + 2
	c.mu.Unlock()
	for {
		c.mu.Lock()
		done, read := c.reads >= want, c.read
		c.mu.Unlock()
		if done || read == nil {
			return c.keeps(asks)
		}
		select {
		case c.hurry <- struct{}{}:
		default:
		}
		select {
		case <-read:
		case <-deadline.C:
			return c.keeps(asks)
		}
	}
}

// saw records a checkpoint at step; a stop that asked for one goes on
// (also for a checkpoint at the step before: the run's state was saved
// as it is).
func (c *checkpoints) saw(step float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.step = max(c.step, step)
	if c.asked {
		c.asked = false
		close(c.saved)
		c.saved = make(chan struct{})
	}
}

// look checks the run's checkpoint folder. A change counts once the
// folder is the same at the next look (or the run has ended): a save of
// several steps (a file written, then renamed into place) is not taken
// for done at its first. It is a checkpoint at the furthest step the run
// had reported by the look before the change was first seen (furthest,
// at that look): the save began after that look, so the run saved a
// state at least that far; a step later than that would be a guess, and
// may be past what it saved.
func (c *checkpoints) look(runDir *os.File, furthest float64, ended bool) {
	_, mtime, ok := statIn(runDir, CheckpointDir)
	if !ok {
		return
	}
	c.mu.Lock()
	fresh := !mtime.Equal(c.seen) // changed since the last look
	if fresh && !c.seen.After(c.folder) {
		c.pending = furthest // the first look to see this save
	}
	c.seen = mtime
	done := mtime.After(c.folder) && (!fresh || ended)
	if done {
		c.folder = mtime
	}
	done = done && !c.lines // its lines say at which step; the furthest step a read saw may be past it
	step := c.pending
	c.mu.Unlock()
	if done && step > 0 {
		c.saw(step)
	}
}

// ask says a stop waits for a new checkpoint: the channel is closed when
// one comes.
func (c *checkpoints) ask() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.asked = true
	select {
	case c.hurry <- struct{}{}:
	default:
	}
	return c.saved
}

// keeps reports whether the run keeps the contract, as far as nodepack
// has seen: it reported a checkpoint, or its folder holds something, or,
// where a signal asks for checkpoints (asks), it said it keeps them
// before its first. A run that does not is not asked for one (it would
// die of the signal, or leave the stop waiting for the whole grace), nor
// paused.
func (c *checkpoints) keeps(asks bool) bool {
	c.mu.Lock()
	reported := c.step > 0 || asks && c.declared
	c.mu.Unlock()
	// Else its folder, looked at only when a stop or a pause asks.
	return reported || c.dir != nil && !emptyDir(c.dir, CheckpointDir)
}

func (c *checkpoints) last() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.step
}

// emptyDir reports whether the directory name in dir is empty (or is not
// one nodepack can open, not following a link).
func emptyDir(dir *os.File, name string) bool {
	d, err := openDirIn(dir, name)
	if err != nil {
		return true
	}
	defer d.Close()
	names, _ := d.Readdirnames(1)
	return len(names) == 0
}

// setAside renames the metrics file and the checkpoint folder an earlier
// ledger's attempts left in runDir to NAME.<UTC time>.old: a run's first
// attempt neither resumes from checkpoints nor is judged by points that
// are not its own, and nothing is deleted. A checkpoint folder that is a
// symbolic link (to a scratch file system, say) is set aside as a link:
// the link is renamed, what it points to is left as it is; setAside
// returns the link's new name, for the run to be told, and "" otherwise.
func setAside(runDir *os.File, now time.Time) (link string, err error) {
	stamp := now.UTC().Format("20060102T150405.000Z")
	for _, name := range []string{metrics.FileName, CheckpointDir} {
		size, _, ok := statIn(runDir, name)
		if !ok || name == metrics.FileName && size == 0 {
			continue
		}
		linked := name == CheckpointDir && !isDirIn(runDir, name)
		if name == CheckpointDir && !linked && emptyDir(runDir, name) {
			continue
		}
		old := name + "." + stamp + ".old"
		if err := renameIn(runDir, name, old); err != nil {
			return "", fmt.Errorf("set aside what an earlier ledger's run left: %w", err)
		}
		if linked {
			link = old
		}
	}
	return link, nil
}

// makeCheckpointDir makes the run's checkpoint folder in runDir, unless
// it is there (or something else is, which the run answers for).
func makeCheckpointDir(runDir *os.File) error {
	if err := mkdirIn(runDir, CheckpointDir); err != nil && !os.IsExist(err) {
		return err
	}
	return nil
}

// stepsOf is an attempt's run.Steps from what its metrics said by its
// end (its first step: first), and the checkpoints its watcher saw; nil
// when the attempt reported no step (its metrics file did not grow).
func stepsOf(p metrics.Progress, grew bool, first float64, c *checkpoints) *run.Steps {
	if !p.Stepped || !grew {
		return nil
	}
	s := &run.Steps{First: min(first, p.Last), Last: p.Last, Checkpoint: p.Checkpoint}
	if c != nil {
		s.Checkpoint = max(s.Checkpoint, c.last())
	}
	s.Checkpoint = min(s.Checkpoint, s.Last)
	return s
}
