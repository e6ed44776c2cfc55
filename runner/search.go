package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/runner/ledger"
	"github.com/nodepack/nodepack/runner/proc"
	"github.com/nodepack/nodepack/runner/run"
	"github.com/nodepack/nodepack/runner/sweep"
)

// The searcher (sweep.Spec.Search): a program, started once for the
// sweep, that proposes its runs as lanes free and is told how each ended,
// in JSON lines over its standard input and output (docs/search.md, the
// protocol; sweep.Reply, the grammar of a reply). Its proposals are
// ordinary runs: placed, pinned, logged, recorded, pruned.

// SearchVersion is the version of the protocol nodepack speaks with a
// searcher, in its hello line.
const SearchVersion = 1

// DefaultSearchTimeout is how long a searcher may take to answer an ask
// (Options.SearchTimeout).
const DefaultSearchTimeout = 10 * time.Minute

// SearchLogName is the searcher's standard error in the output directory.
const SearchLogName = "search.log"

// maxSearchLog bounds the searcher's log: what it writes past it is
// dropped, so that a flood does not fill the disk.
const maxSearchLog = 16 << 20

// maxSearchRepeats is how many proposals in a row of runs that ran or
// run a searcher may make before it counts as stuck (a flood of one
// line): it is stopped.
const maxSearchRepeats = 1000

// searchEnd is the line that tells the searcher how a run ended.
type searchEnd struct {
	Type     string          `json:"type"`          // "ended"
	Ask      int             `json:"ask,omitempty"` // the ask of this searcher's whose proposal it was; 0: none
	ID       string          `json:"id"`
	Params   json.RawMessage `json:"params,omitempty"`
	State    string          `json:"state"` // succeeded, failed, pruned, paused
	Metrics  json.RawMessage `json:"metrics,omitempty"`
	Step     *float64        `json:"step,omitempty"` // the last step it reported
	ExitCode *int            `json:"exit_code,omitempty"`
	Class    string          `json:"class,omitempty"`
	// Earlier says the run ended before this searcher started (a resumed
	// sweep's); Again that this searcher was told of its end before.
	Earlier bool `json:"earlier,omitempty"`
	Again   bool `json:"again,omitempty"`
}

// searchRuns is a searcher's sweep as a run source: its process, the
// conversation with it, and the runs it proposed.
type searchRuns struct {
	s       *Sweep
	props   *sweep.Proposals
	p       *proc.Process
	log     string
	timeout time.Duration
	grace   time.Duration
	ctx     context.Context
	replies chan searchReply
	out     *lineQueue
	logDone chan struct{}
	stop    chan struct{}
	counts  func() ledger.ResumeCounts
	rerun   []run.Run // runs of an earlier session handed on first: interrupted, paused
	running []run.Run // those of them that run again (not paused)
	first   int       // the index of this searcher's first proposal
	fits    func(pack.Request) error

	mu    sync.Mutex
	asks  int
	given map[string][]int     // runs handed on and not ended: the asks that proposed them (0: a rerun)
	told  map[string]bool      // the runs whose end this searcher was told
	ended map[string]searchEnd // the runs that ended, for a proposal made again
	wake  chan struct{}        // a run ended: a searcher that said wait is asked again
	done  bool                 // no more asks: the searcher said done, failed or the session ends
	// finished is when its input was closed, or is to be: its --grace
	// counts from there (a stop closes it at once, not after the runs).
	finished time.Time
	err      error // why the searcher failed
}

// searchReply is the reader's: a reply, or the end of the output (eof).
type searchReply struct {
	rep sweep.Reply
	err error
	eof bool
}

// openSearch starts the searcher and tells it the sweep so far: every run
// its ledger says ended, and the runs it will run again.
func (s *Sweep) openSearch(ctx context.Context, lanes int) (*searchRuns, error) {
	// The runs' origins say which searcher proposed them: a resumed
	// sweep's lines count from 1 again.
	label := "searcher"
	if log := s.past.Log(filepath.Base(s.ledger)); log != nil && len(log.Sessions) > 0 && !s.opts.Restart {
		label = fmt.Sprintf("searcher#%d", len(log.Sessions)+1)
	}
	props, err := s.source.Proposals(label)
	if err != nil {
		return nil, err
	}
	sr := &searchRuns{s: s, props: props, log: filepath.Join(s.output, SearchLogName),
		timeout: s.opts.SearchTimeout, grace: s.opts.Execute.GracePeriod(), ctx: ctx,
		replies: make(chan searchReply), stop: make(chan struct{}), logDone: make(chan struct{}),
		given: map[string][]int{}, told: map[string]bool{}, ended: map[string]searchEnd{}, wake: make(chan struct{}, 1)}
	if sr.timeout <= 0 {
		sr.timeout = DefaultSearchTimeout
	}
	sr.fits = s.fitCheck()
	var resumed ledger.ResumeCounts
	if err := sr.fold(&resumed); err != nil {
		return nil, fmt.Errorf("search: %w", err)
	}
	sr.counts = func() ledger.ResumeCounts { return resumed }
	if err := sr.start(); err != nil {
		return nil, fmt.Errorf("searcher: %w", err)
	}
	hello := map[string]any{"type": "hello", "version": SearchVersion, "lanes": lanes,
		"earlier": len(sr.ended), "running": len(sr.running)}
	if pr := s.opts.Execute.Prune; pr != nil {
		hello["metric"], hello["goal"] = pr.Metric, "min"
		if pr.Max {
			hello["goal"] = "max"
		}
	}
	sr.send(hello)
	for _, e := range sr.sortedEnded() {
		sr.told[e.ID] = true
		sr.send(e)
	}
	for _, r := range sr.running {
		sr.given[r.ID] = []int{0}
		sr.send(map[string]any{"type": "running", "id": r.ID, "params": rawOrNil(r.Params)})
	}
	context.AfterFunc(ctx, sr.finish) // a stop: the searcher hears the end at once
	return sr, nil
}

// fold reads what the ledger holds of the sweep: the runs that ended (to
// tell the searcher) and those to run again (interrupted, paused), from
// their Started records' params; and the next index.
func (sr *searchRuns) fold(c *ledger.ResumeCounts) error {
	log := sr.s.past.Log(filepath.Base(sr.s.ledger))
	if log == nil || log.Len() == 0 || sr.s.opts.Restart {
		return nil
	}
	return log.LastAll(func(i int, st *ledger.Started, fin *ledger.Finished) error {
		r := log.At(i)
		if r.Retired || st == nil {
			return nil
		}
		sr.first = max(sr.first, st.Index+1)
		switch r.State {
		case ledger.StateSucceeded:
			c.SkippedSucceeded++
		case ledger.StatePruned:
			c.SkippedPruned++
		case ledger.StatePaused:
			c.Paused++
		case ledger.StateFailed:
			if sr.s.opts.retries(r) {
				c.RetriedFailed++
			} else {
				c.SkippedFailed++
			}
		default:
			c.Interrupted++
		}
		switch r.State {
		case ledger.StateSucceeded, ledger.StatePruned, ledger.StatePaused, ledger.StateFailed:
			if r.State == ledger.StateFailed && sr.s.opts.retries(r) {
				break // --retry-failed: it runs again, and is told when it ends
			}
			e := searchEnd{Type: "ended", ID: r.ID, Params: rawOrNil(st.Params), State: string(r.State), Earlier: true}
			if fin != nil {
				e.Metrics, e.ExitCode, e.Class = rawOrNil(fin.Metrics), fin.ExitCode, string(fin.Class)
				if fin.Steps != nil {
					last := fin.Steps.Last
					e.Step = &last
				}
			}
			sr.ended[r.ID] = e
			if r.State != ledger.StatePaused {
				return nil
			}
			// A paused run is handed on as the ledger has it: the pruner
			// may promote it (run.Run.Paused).
		}
		again, err := sr.props.Again(st.Params, st.Request, st.Index, st.Origin)
		if err != nil {
			return err
		}
		if again.ID != r.ID {
			// Not what the proposal made: told, never run under its ID.
			return nil
		}
		if r.State != ledger.StatePaused {
			sr.running = append(sr.running, again) // told as running
		}
		sr.rerun = append(sr.rerun, again)
		return nil
	})
}

// sortedEnded is the runs that ended before, in the order of their index.
func (sr *searchRuns) sortedEnded() []searchEnd {
	log := sr.s.past.Log(filepath.Base(sr.s.ledger))
	var out []searchEnd
	if log == nil {
		return nil
	}
	for i := range log.Len() {
		if e, ok := sr.ended[log.At(i).ID]; ok {
			out = append(out, e)
		}
	}
	return out
}

// start starts the searcher's process: sh -c COMMAND in the directory
// nodepack runs in, its stdin and stdout pipes to this process, its
// stderr to OUTPUT/search.log; it dies with nodepack (proc.LaunchHelper).
func (sr *searchRuns) start() error {
	logFile, err := os.OpenFile(sr.log, os.O_WRONLY|os.O_CREATE|os.O_APPEND|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o644)
	if err != nil {
		return fmt.Errorf("its log: %w", err)
	}
	if st, err := logFile.Stat(); err != nil || !st.Mode().IsRegular() {
		logFile.Close()
		return fmt.Errorf("its log %s: not a regular file", sr.log)
	}
	fmt.Fprintf(logFile, "# nodepack %s: searcher %s\n", time.Now().Format(time.RFC3339), sr.s.opts.Source.Search)
	inR, inW, err := os.Pipe()
	if err != nil {
		logFile.Close()
		return err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		logFile.Close()
		inR.Close()
		inW.Close()
		return err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		logFile.Close()
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return err
	}
	cmd := exec.Command("/bin/sh", "-c", sr.s.opts.Source.Search)
	cmd.Env = append(os.Environ(), "NODEPACK_OUTPUT="+sr.s.output, "NODEPACK_SEARCH_VERSION="+strconv.Itoa(SearchVersion))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW // files: Wait waits for no copy
	p, err := proc.LaunchHelper(cmd)
	inR.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		logFile.Close()
		inW.Close()
		outR.Close()
		errR.Close()
		return err
	}
	sr.p = p
	go func() {
		defer close(sr.logDone)
		defer logFile.Close()
		defer errR.Close()
		io.Copy(&cappedWriter{w: logFile, left: maxSearchLog}, errR)
	}()
	sr.out = newLineQueue(inW)
	go sr.read(outR)
	return nil
}

// read hands the searcher's replies to the asker, one at a time.
func (sr *searchRuns) read(r *os.File) {
	defer r.Close()
	for rep, err := range sr.props.Replies(r, sr.first) {
		select {
		case sr.replies <- searchReply{rep: rep, err: err}:
		case <-sr.stop:
			return
		}
		if err != nil {
			return
		}
	}
	select {
	case sr.replies <- searchReply{eof: true}:
	case <-sr.stop:
	}
}

// send queues one line to the searcher.
func (sr *searchRuns) send(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return // not reached: the raw parts are JSON nodepack wrote
	}
	sr.out.put(b)
}

// runs streams the runs: the earlier session's to run again, then one
// proposal per ask, asked as the executor takes the next run (when a
// lane is about to free: it holds Options.Window runs ahead). It is
// single-use: the searcher lives once.
func (sr *searchRuns) runs() iter.Seq2[run.Run, error] {
	return func(yield func(run.Run, error) bool) {
		for _, r := range sr.rerun {
			if !yield(r, nil) {
				return
			}
		}
		for {
			r, ok, err := sr.next()
			if err != nil {
				sr.mu.Lock()
				sr.err, sr.done = err, true
				sr.mu.Unlock()
				yield(run.Run{}, err)
				return
			}
			if !ok || !yield(r, nil) {
				return
			}
		}
	}
}

// next asks the searcher until it proposes a run to start: not one that
// ended (it is told back) or that runs (it is told when it ends). ok is
// false when there are no more.
func (sr *searchRuns) next() (r run.Run, ok bool, err error) {
	repeats := 0
	for {
		if repeats == maxSearchRepeats {
			sr.kill()
			return run.Run{}, false, fmt.Errorf("searcher: %d proposals in a row of runs that ran or run already: stopped it%s", repeats, sr.tail())
		}
		sr.mu.Lock()
		done := sr.done
		sr.asks++
		ask := sr.asks
		sr.mu.Unlock()
		if done {
			return run.Run{}, false, nil
		}
		sr.send(map[string]any{"type": "ask", "ask": ask})
		rep, ok, err := sr.reply(ask)
		if err != nil || !ok {
			return run.Run{}, false, err
		}
		switch {
		case rep.Done:
			sr.mu.Lock()
			sr.done = true
			sr.mu.Unlock()
			return run.Run{}, false, nil
		case rep.Wait:
			if !sr.await(ask) {
				return run.Run{}, false, nil
			}
			continue
		}
		r := rep.Run
		if r.Request != nil {
			if err := sr.fits(*r.Request); err != nil {
				sr.kill()
				return run.Run{}, false, fmt.Errorf("searcher: ask %d: %s: %w: it can never start on this node", ask, r.Origin, err)
			}
		}
		sr.mu.Lock()
		if asks, running := sr.given[r.ID]; running {
			sr.given[r.ID] = append(asks, ask) // told when it ends
			sr.mu.Unlock()
			repeats++
			continue
		}
		if e, ended := sr.ended[r.ID]; ended {
			e.Ask, e.Earlier, e.Again = ask, false, sr.told[r.ID]
			sr.told[r.ID] = true
			sr.mu.Unlock()
			sr.send(e)
			repeats++
			continue
		}
		sr.given[r.ID] = []int{ask}
		sr.mu.Unlock()
		return r, true, nil
	}
}

// reply waits for the reply to ask: false when the session ends first
// or the searcher closed its output having exited 0 (done).
func (sr *searchRuns) reply(ask int) (sweep.Reply, bool, error) {
	timer := time.NewTimer(sr.timeout)
	defer timer.Stop()
	select {
	case rep := <-sr.replies:
		switch {
		case rep.err != nil:
			sr.kill()
			return sweep.Reply{}, false, fmt.Errorf("%w (its stderr: %s)", rep.err, sr.log)
		case rep.eof:
			return sweep.Reply{}, false, sr.exited(ask)
		}
		return rep.rep, true, nil
	case <-timer.C:
		sr.kill()
		return sweep.Reply{}, false, fmt.Errorf("searcher: no reply to ask %d in %v (--search-timeout): stopped it%s", ask, sr.timeout, sr.tail())
	case <-sr.stop:
	case <-sr.ctx.Done():
	}
	return sweep.Reply{}, false, nil
}

// exited is the end of a searcher that closed its output before it
// answered ask: nil when it exited 0 (as done), else its status.
func (sr *searchRuns) exited(ask int) error {
	var exit proc.Exit
	select {
	case <-sr.p.Exited():
		exit = sr.p.Wait()
	case <-time.After(sr.grace):
		sr.kill()
		return fmt.Errorf("searcher: closed its output without answering ask %d, and did not exit: stopped it%s", ask, sr.tail())
	}
	if exit.Code == 0 && exit.Signal == "" {
		sr.mu.Lock()
		sr.done = true
		sr.mu.Unlock()
		return nil
	}
	how := "exited with status " + strconv.Itoa(exit.Code)
	if exit.Signal != "" {
		how = "was killed by " + exit.Signal
	}
	return fmt.Errorf("searcher: %s before answering ask %d%s", how, ask, sr.tail())
}

// await waits, after the searcher said wait, for a run to end; false if
// none will: nothing runs, or the session ends.
func (sr *searchRuns) await(ask int) bool {
	sr.mu.Lock()
	running := len(sr.given)
	sr.mu.Unlock()
	if running == 0 {
		sr.s.note(fmt.Sprintf("searcher: it said wait at ask %d with no run running, so nothing would change its mind: the sweep ends", ask))
		return false
	}
	select {
	case <-sr.wake:
		return true
	case <-sr.stop:
	case <-sr.ctx.Done():
	}
	return false
}

// recorded tells the searcher how a run ended, once its end is durable
// in the ledger, once, in the order the runs end: before the lane it held
// is given to the next run, so that the next ask comes after it.
func (sr *searchRuns) recorded(ev run.Event) {
	if ev.Kind != run.Finished || ev.Retry || ev.Reason == run.Interrupted {
		// An interrupted run runs again when the sweep resumes: its end
		// is told then.
		if ev.Kind == run.Finished && !ev.Retry {
			sr.mu.Lock()
			delete(sr.given, ev.Run.ID)
			sr.mu.Unlock()
		}
		return
	}
	e := searchEnd{Type: "ended", ID: ev.Run.ID, Params: rawOrNil(ev.Run.Params), State: string(endState(ev.Reason))}
	if json.Valid(ev.Metrics) {
		e.Metrics = rawOrNil(ev.Metrics)
	}
	if ev.ExitCode >= 0 {
		code := ev.ExitCode
		e.ExitCode = &code
	}
	e.Class = string(ev.Class)
	if ev.Steps != nil {
		last := ev.Steps.Last
		e.Step = &last
	}
	sr.mu.Lock()
	asks := sr.given[ev.Run.ID]
	delete(sr.given, ev.Run.ID)
	stored := e
	stored.Ask = 0
	sr.ended[ev.Run.ID] = stored
	var lines []searchEnd
	for _, ask := range asks {
		e.Ask, e.Again = ask, sr.told[ev.Run.ID]
		sr.told[ev.Run.ID] = true
		lines = append(lines, e)
	}
	if len(asks) == 0 {
		e.Again = sr.told[ev.Run.ID]
		sr.told[ev.Run.ID] = true
		lines = append(lines, e)
	}
	sr.mu.Unlock()
	for _, l := range lines {
		sr.send(l)
	}
	select {
	case sr.wake <- struct{}{}:
	default:
	}
}

// endState is the state a run's end gives it, as the ledger says it.
func endState(r run.Reason) ledger.State {
	switch r {
	case run.OK:
		return ledger.StateSucceeded
	case run.Pruned:
		return ledger.StatePruned
	case run.Paused:
		return ledger.StatePaused
	}
	return ledger.StateFailed
}

// left counts the runs a rerun would run: those handed on and not ended.
// A searcher that did not say done may propose more: at least one.
func (sr *searchRuns) left() int {
	sr.mu.Lock()
	defer sr.mu.Unlock()
	n := len(sr.given)
	if !sr.done && n == 0 {
		n = 1
	}
	return n
}

// finish says the end to the searcher: no more asks, and its standard
// input closes once the lines queued are written.
func (sr *searchRuns) finish() {
	sr.mu.Lock()
	sr.done = true
	if sr.finished.IsZero() {
		sr.finished = time.Now()
	}
	sr.mu.Unlock()
	sr.out.close()
}

// close ends the conversation once the runs ended: the searcher's input
// closes (it has been told every end), and it has --grace to exit before
// its process group is killed.
func (sr *searchRuns) close() {
	close(sr.stop)
	sr.finish()
	sr.mu.Lock()
	left := sr.grace - time.Since(sr.finished)
	sr.mu.Unlock()
	timer := time.NewTimer(max(left, 0))
	defer timer.Stop()
	select {
	case <-sr.p.Exited():
	case <-timer.C:
		sr.s.note(fmt.Sprintf("searcher: still running %v after its input closed: killed", sr.grace))
		sr.kill()
	}
	sr.p.Wait()
	if !sr.out.wait(time.Second) {
		sr.out.w.Close() // a child of it holds its input and reads nothing
	}
	select {
	case <-sr.logDone:
	case <-time.After(time.Second): // a child of it that holds its stderr
	}
}

// kill kills the searcher's process group and stops writing to it.
func (sr *searchRuns) kill() {
	sr.p.Signal(syscall.SIGKILL)
	sr.out.close()
}

// tail is ": LAST LINE (its stderr: OUTPUT/search.log)", the searcher's
// last line of stderr, for an error.
func (sr *searchRuns) tail() string {
	select {
	case <-sr.logDone:
	case <-time.After(200 * time.Millisecond):
	}
	f, err := os.OpenFile(sr.log, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return " (its stderr: " + sr.log + ")"
	}
	defer f.Close()
	b := make([]byte, 4096)
	if st, err := f.Stat(); err == nil && st.Size() > int64(len(b)) {
		f.Seek(st.Size()-int64(len(b)), io.SeekStart)
	}
	n, _ := io.ReadFull(f, b)
	lines := strings.Split(strings.TrimRight(string(b[:n]), "\n"), "\n")
	last := ""
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" && !strings.HasPrefix(l, "# nodepack ") {
			last = l
			break
		}
	}
	if last == "" {
		return " (its stderr: " + sr.log + ")"
	}
	return fmt.Sprintf(": %s (its stderr: %s)", strconv.QuoteToGraphic(last)[1:len(strconv.QuoteToGraphic(last))-1], sr.log)
}

// rawOrNil is b, or nil for none (no "params": null).
func rawOrNil(b json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(b)) == 0 || string(b) == "null" {
		return nil
	}
	return b
}

// lineQueue writes lines to a searcher's standard input from one
// goroutine, so that a searcher that stops reading stalls no event.
type lineQueue struct {
	w      *os.File
	mu     sync.Mutex
	lines  [][]byte
	closed bool
	more   chan struct{}
	done   chan struct{}
}

func newLineQueue(w *os.File) *lineQueue {
	q := &lineQueue{w: w, more: make(chan struct{}, 1), done: make(chan struct{})}
	go q.write()
	return q
}

// put queues one line; after close, it is dropped.
func (q *lineQueue) put(line []byte) {
	q.mu.Lock()
	if !q.closed {
		q.lines = append(q.lines, append(line, '\n'))
	}
	q.mu.Unlock()
	select {
	case q.more <- struct{}{}:
	default:
	}
}

// close has the writer close the input once the queued lines are written.
func (q *lineQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	select {
	case q.more <- struct{}{}:
	default:
	}
}

// wait waits up to d for the writer to close the input, and reports
// whether it did.
func (q *lineQueue) wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-q.done:
		return true
	case <-t.C:
		return false
	}
}

func (q *lineQueue) write() {
	defer close(q.done)
	defer q.w.Close()
	broken := false
	for {
		q.mu.Lock()
		lines, closed := q.lines, q.closed
		q.lines = nil
		q.mu.Unlock()
		for _, l := range lines {
			if !broken {
				if _, err := q.w.Write(l); err != nil {
					broken = true // it exited, or closed its input: the rest is dropped
				}
			}
		}
		if closed && len(lines) == 0 {
			return
		}
		if len(lines) == 0 {
			<-q.more
		}
	}
}

// cappedWriter writes up to left bytes, then drops the rest, once saying
// so.
type cappedWriter struct {
	w    io.Writer
	left int64
	cut  bool
}

func (c *cappedWriter) Write(b []byte) (int, error) {
	switch {
	case int64(len(b)) <= c.left:
		c.left -= int64(len(b))
		c.w.Write(b)
	case !c.cut:
		c.w.Write(b[:c.left])
		c.left, c.cut = 0, true
		fmt.Fprintf(c.w, "\n# nodepack: the searcher's log reached %d MiB: the rest is dropped\n", maxSearchLog>>20)
	}
	return len(b), nil
}

var errSearchPool = errors.New("a searcher's sweep runs on one node: it goes without a pool, and in an array job with shard none")
