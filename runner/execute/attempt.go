package execute

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/resources/usage"
	"github.com/nodepack/nodepack/runner/failure"
	"github.com/nodepack/nodepack/runner/metrics"
	"github.com/nodepack/nodepack/runner/proc"
	"github.com/nodepack/nodepack/runner/run"
	"github.com/nodepack/nodepack/runner/schedule"
	"github.com/nodepack/nodepack/runner/untrusted"
)

// attemptFiles are one attempt's log files and private directories.
type attemptFiles struct {
	runDir         string   // "" without OutputDir
	dir            *os.File // runDir, held open for the attempt: its files are read from it
	createdRunDir  bool     // this attempt made runDir
	stdout, stderr *os.File
	tmpDir         string
	lane           *string // the lane's TMPDIR, which tmpDir is
	stderrFrom     int64   // where this attempt's part of stderr.log begins
}

// close closes the logs and empties the private TMPDIR for the lane's next
// run; with unused, it also removes a run directory this attempt made,
// since nothing ran.
func (f *attemptFiles) close(unused bool) {
	if f.stdout != nil {
		f.stdout.Close()
		f.stderr.Close()
	}
	if f.tmpDir != "" && !pristine(f.tmpDir) {
		// Left with files, or changed: the lane's next run gets a new one.
		os.RemoveAll(f.tmpDir)
		*f.lane = ""
	}
	if unused && f.createdRunDir {
		os.RemoveAll(f.runDir)
	}
	if f.dir != nil {
		f.dir.Close()
		f.dir = nil
	}
}

// prepare makes attempt n's run directory, logs and TMPDIR. The logs are
// not truncated yet: begin does that once the attempt really starts.
func (e *Execution) prepare(ev *run.Event, lane, n int) (*attemptFiles, error) {
	f := &attemptFiles{}
	if e.dirs.runs != nil {
		// Made and opened from runs/, following no symbolic link (see
		// runsDir); made again if a temp cleaner removed runs/.
		dir, created, err := e.dirs.runs.runDir(ev.Run.DirName())
		if err != nil {
			return nil, err
		}
		f.dir = dir // closed with the logs
		f.runDir, f.createdRunDir = dir.Name(), created
		ev.Stdout = filepath.Join(f.runDir, "stdout.log")
		ev.Stderr = filepath.Join(f.runDir, "stderr.log")
		if f.stdout, err = openIn(dir, "stdout.log", false, created); err != nil {
			f.close(true)
			return nil, err
		}
		if f.stderr, err = openIn(dir, "stderr.log", false, created); err != nil {
			f.stdout.Close()
			f.stdout = nil
			f.close(true)
			return nil, err
		}
		if f.createdRunDir {
			if err := writeParams(dir, ev.Run); err != nil {
				f.close(true)
				return nil, err
			}
		}
		if n == 1 && !created {
			// The run's first attempt by the ledger, in a directory an
			// earlier ledger left (--restart, a ledger removed): it
			// starts from scratch, as its logs do.
			link, err := setAside(dir, time.Now())
			if err != nil {
				f.close(true)
				return nil, err
			}
			if link != "" {
				e.note(fmt.Sprintf("run %s starts from scratch: its %s folder was a symbolic link, which was set aside as %s (the link, not what it points to), and it gets a new, empty folder; a run that links the folder again to the same place resumes from what is there",
					ev.Run.ID, CheckpointDir, link))
			}
		}
		if err := makeCheckpointDir(dir); err != nil {
			f.close(true)
			return nil, err
		}
	}
	// One TMPDIR per lane, emptied by each run's end: a lane runs one
	// attempt at a time, and the scratch directory is private to this
	// sweep, so the name is free.
	e.schedMu.Lock()
	f.lane = e.dirs.lanes[lane]
	e.schedMu.Unlock()
	if *f.lane != "" && !present(*f.lane) {
		*f.lane = "" // a temp cleaner took it
	}
	if *f.lane == "" {
		dir := filepath.Join(e.dirs.scratch, strconv.Itoa(lane)+"."+strconv.FormatInt(e.dirs.seq.Add(1), 10))
		err := os.Mkdir(dir, 0o700)
		if errors.Is(err, fs.ErrNotExist) {
			// A temp cleaner removed the scratch root: make it again.
			if err = os.MkdirAll(e.dirs.scratch, 0o700); err == nil {
				err = os.Mkdir(dir, 0o700)
			}
		}
		if err != nil {
			f.close(true)
			return nil, err
		}
		*f.lane = dir
	}
	f.tmpDir = *f.lane
	return f, nil
}

// present reports whether a directory is at path.
func present(path string) bool {
	st, err := os.Lstat(path)
	return err == nil && st.IsDir()
}

// begin readies the logs for attempt n once it is sure to start: the first
// attempt starts them afresh, later ones append after a header line.
func (f *attemptFiles) begin(n int) error {
	for _, log := range []*os.File{f.stdout, f.stderr} {
		if log == nil {
			continue
		}
		if n == 1 && f.createdRunDir {
			continue // new files
		}
		if n == 1 {
			if err := log.Truncate(0); err != nil {
				return err
			}
			continue
		}
		if _, err := fmt.Fprintf(log, "--- nodepack: attempt %d ---\n", n); err != nil {
			return err
		}
		if log == f.stderr {
			// Its failure is read from here on, not from the attempts before.
			if st, err := log.Stat(); err == nil {
				f.stderrFrom = st.Size()
			}
		}
	}
	return nil
}

// attemptSpec is one attempt to run, as plain values: the run, its lane,
// its attempt number (the ledger's, across sessions) and its run's key
// for what the attempt tells the scheduler (its start, its memory
// settling, its steps for the density rule).
type attemptSpec struct {
	run      run.Run
	key      schedule.Key
	lane, n  int
	promoted bool
}

// attempt is one attempt as it runs: its event, files and command, its
// process and what watches it.
type attempt struct {
	spec       attemptSpec
	ev         run.Event // Started, then Finished
	files      *attemptFiles
	cmd        *exec.Cmd
	cmdErr     error       // the command could not be made: a failed attempt
	outW, errW *lineWriter // with Live: the lines' prefixer; nil without
	metricsAt  int64       // the metrics file's size as the attempt began: steps past it are its own
	memLimit   uint64      // EnforceMem's limit; 0 none
	gpuLimit   uint64      // its GPU memory limit (schedule.GPUMemLimit); 0 none

	p        *proc.Process
	stop     *runStop
	ckpt     *checkpoints
	watch    *metricsWatch
	sampling func() usage.Sampled // stops the sampler; nil without one
	sampled  usage.Sampled
	over     overLimit
	oom      uint64 // Options.OOMKills before the start
	oomKnown bool
}

// overLimit is what the sampler found the run's processes holding when
// it killed them over their limit: memory, GPU memory; 0 while it did not.
type overLimit struct{ mem, gpu atomic.Uint64 }

// attemptEnd is how an attempt ended: its Finished event, whether it
// started at all, and the judgement that paused it, if one did.
type attemptEnd struct {
	ev      run.Event
	started bool
	paused  *run.Judgement
}

// runAttempt runs one attempt: its files, its start, what watches it, its
// exit and what that means. started is false when the sweep stopped (or
// its drain deadline came) before the attempt could start, and then
// nothing ran. An error means the runner could not prepare the attempt,
// which is not the run's fault; a command that cannot start is a failed
// attempt.
func (e *Execution) runAttempt(spec attemptSpec) (attemptEnd, error) {
	a, err := e.prepareAttempt(spec)
	if err != nil {
		return attemptEnd{ev: a.ev}, &filesError{err}
	}
	// The deadline is checked last, right before the start, so that the
	// drain deadline holds at the process start; and Fenced, so that a
	// pool task frozen since its first check starts nothing on waking.
	if !e.mayStart() || e.opts.Fenced != nil && e.opts.Fenced(spec.run.ID) {
		a.files.close(true)
		return attemptEnd{ev: a.ev}, nil
	}
	defer a.files.close(false)
	if err := a.files.begin(spec.n); err != nil {
		return attemptEnd{ev: a.ev}, &filesError{err}
	}
	a.ev.Start = time.Now()
	e.began(spec.key, a.ev.Start)
	if a.cmdErr != nil {
		return attemptEnd{ev: e.notStarted(a.ev, a.cmdErr), started: true}, nil
	}
	if err := e.launchProcess(a); err != nil {
		if se := (*proc.StartError)(nil); errors.As(err, &se) {
			return attemptEnd{ev: e.notStarted(a.ev, se.Err), started: true}, nil
		}
		return attemptEnd{ev: a.ev}, err
	}
	e.startWatch(a)
	exit := a.p.Wait()
	paused := a.watch.end()
	err = e.finish(a, exit)
	return attemptEnd{ev: a.ev, started: true, paused: paused}, err
}

// prepareAttempt makes the attempt's run directory, logs, TMPDIR and
// command.
func (e *Execution) prepareAttempt(spec attemptSpec) (*attempt, error) {
	place := e.assignment(spec.key)
	a := &attempt{spec: spec, ev: run.Event{Kind: run.Started, Run: spec.run, Attempt: spec.n, Lane: spec.lane, Place: place, Promoted: spec.promoted}}
	files, err := e.prepare(&a.ev, spec.lane, spec.n)
	if err != nil {
		return a, err
	}
	a.files = files
	a.cmd, a.outW, a.errW, a.cmdErr = e.command(a.ev, files, spec.n, false)
	if files.dir != nil {
		a.metricsAt, _, _ = statIn(files.dir, metrics.FileName)
	}
	a.memLimit, a.gpuLimit = e.memLimit(place), schedule.GPUMemLimit(place)
	return a, nil
}

// launchProcess starts the attempt's process; a plain line's program that is no
// executable format (a script without #!) is run by bash as a script of
// its own.
func (e *Execution) launchProcess(a *attempt) error {
	a.oom, a.oomKnown = e.oomKills()
	spec := proc.Spec{Cmd: a.cmd, CPUs: a.ev.Place.CPUs, Key: proc.Key{Run: a.spec.run.ID, Attempt: a.spec.n}, Cgroups: e.cgroups, MemLimit: a.memLimit, Guard: e.opts.Guard}
	spec.Exited = func() { // before its pid may be another's
		a.ev.End = time.Now()
		if a.sampling != nil {
			a.sampled = a.sampling()
		}
	}
	p, err := proc.Launch(spec)
	var se *proc.StartError
	if errors.As(err, &se) && errors.Is(se.Err, syscall.ENOEXEC) && !slices.Equal(a.cmd.Args, a.ev.Run.Args) {
		if spec.Cmd, a.outW, a.errW, _ = e.command(a.ev, a.files, a.spec.n, true); spec.Cmd.Err == nil {
			p, err = proc.Launch(spec)
		}
	}
	if err != nil {
		return err
	}
	a.p = p
	a.ev.PID = p.PID()
	e.running.Add(1)
	e.emit(a.ev)
	return nil
}

// startWatch starts what watches the running attempt: the sampler (with
// the memory limits it enforces), the sweep's stops and the timeout, the
// checkpoints and the metrics.
func (e *Execution) startWatch(a *attempt) {
	p := a.p
	target := usage.Target{Root: p.PID(), GPUs: a.ev.Place.UUIDs(), Settle: e.gate(a.spec, a.ev.Place)}
	if a.memLimit > 0 && e.cgroups == nil {
		target.Limit = &usage.Limit{Bytes: a.memLimit, Interval: MemCheckInterval, Exceeded: func(rss uint64) {
			a.over.mem.Store(rss)
			p.Signal(syscall.SIGKILL)
		}}
	}
	if a.gpuLimit > 0 {
		target.GPULimit = &usage.Limit{Bytes: a.gpuLimit, Interval: GPUMemCheckInterval, Exceeded: func(b uint64) {
			a.over.gpu.Store(b)
			p.Signal(syscall.SIGKILL) // at once: its neighbours' memory is at stake
		}}
	}
	if e.opts.Sampler != nil {
		a.sampling = e.opts.Sampler.Sample(target)
	}
	a.stop = e.watch(p)
	e.byRun.add(a.spec.run.ID, a.stop)
	a.ckpt = newCheckpoints(a.files.dir, e.opts.CheckpointSignal != 0 || e.pruning != nil)
	a.stop.setCheckpoints(a.ckpt)
	a.watch = e.watchMetrics(a)
}

// finish completes the Finished event of an attempt whose process exited:
// why it ended, its failure's class, its use, metrics and steps. Its
// error is a *nodeError when the disk under its directory is full or
// failing.
func (e *Execution) finish(a *attempt, exit proc.Exit) error {
	ev := &a.ev
	e.byRun.remove(a.spec.run.ID, a.stop)
	reason := e.unwatch(a.stop)
	e.running.Add(-1)
	if a.outW != nil {
		a.outW.flush()
		a.errW.flush()
	}
	e.classify(ev, reason, exit)
	if ev.Reason != run.OK && !ev.Reason.JudgedOut() {
		e.name(ev, e.outcome(a, exit), a.files.stderrFrom)
	}
	ev.Usage.Sampled = a.sampled
	if dir := a.files.dir; dir != nil {
		// Read from the run's directory nodepack made and holds open,
		// following no link: a run's files are untrusted.
		var progress metrics.Progress
		ev.Metrics, ev.Curves, ev.MetricsSkipped, progress = metrics.ReportIn(untrusted.In(dir), "stdout.log", e.opts.Metrics, curvePoints)
		if size, _, _ := statIn(dir, metrics.FileName); size > a.metricsAt && progress.Stepped {
			first, _ := metrics.FirstStep(untrusted.In(dir), metrics.FileName, a.metricsAt)
			ev.Steps = stepsOf(progress, true, first, a.ckpt)
		}
	}
	if ev.Reason == run.Failed && a.files.runDir != "" {
		// A run whose logs could not be written fails in its own way
		// (an echo's exit 1, a Python traceback it could not print): ask
		// the disk they are on. Full or failing is the node's fault.
		if err := probeDisk(a.files.runDir); err != nil {
			if class, node := failure.OfSetup(err); node {
				ev.Reason, ev.Class, ev.Retry = run.Interrupted, class, false
				ev.Err = fmt.Errorf("the disk of its directory and logs: %w", err)
				return &nodeError{err}
			}
		}
	}
	return nil
}

// outcome is what only the runner knows of a failed attempt, for its
// class: an OOM kill, a GPU fault, a limit of its own it went over (then
// said in its stderr.log: whatever the exit, that is why it failed, since
// its process is the only one the kernel or the runner can have killed).
func (e *Execution) outcome(a *attempt, exit proc.Exit) failure.Outcome {
	ev, place := &a.ev, a.ev.Place
	oomAfter, ok := e.oomKills()
	// Killed, or a shell whose child was (128+9): the kernel's OOM
	// killer sends SIGKILL.
	killed := ev.Signal == "SIGKILL" || ev.ExitCode == 128+int(syscall.SIGKILL)
	o := failure.Outcome{OOMKilled: a.oomKnown && ok && oomAfter > a.oom && killed, GPUFault: e.faulted(a.spec.key)}
	var over string
	switch {
	case a.over.gpu.Load() > 0:
		held := (a.over.gpu.Load() + 1<<20 - 1) >> 20 << 20 // in MiB, rounded up
		over = fmt.Sprintf("killed: its processes held %s of GPU memory, over the gpu_mem=%s it asked for and the GPU's %s headroom, before the runs beside it ran out",
			pack.FormatSize(held), pack.FormatSize(place.Request.GPUMem), pack.FormatSize(a.gpuLimit-place.Request.GPUMem))
		o.OverGPUMem = true
	case a.over.mem.Load() > 0:
		held := (a.over.mem.Load() + 1<<20 - 1) >> 20 << 20 // in MiB, rounded up
		over = fmt.Sprintf("killed: its processes held %s, over the mem=%s it asked for", pack.FormatSize(held), pack.FormatSize(a.memLimit))
		o.OOMKilled = true
	case exit.OOMKills > 0:
		over = fmt.Sprintf("the kernel's OOM killer killed a process of this run at the mem=%s it asked for", pack.FormatSize(a.memLimit))
		o.OOMKilled = true
	}
	if over != "" && a.files.stderr != nil {
		fmt.Fprintf(a.files.stderr, "--- nodepack: %s ---\n", over)
	}
	return o
}

// curvePoints is how many points of each per-step metric's curve go to
// the ledger with each attempt: enough for the report to draw its shape
// for any run (the best runs' curves it reads whole from their files).
const curvePoints = 12

// nodeError is attempt's error for an attempt that ran, and found the
// node's disk under its directory full or failing: the attempt is
// recorded as interrupted, and the sweep stops starting runs.
type nodeError struct{ err error }

func (e *nodeError) Error() string { return e.err.Error() }

func (e *nodeError) Unwrap() error { return e.err }

// probeDisk writes 64 KiB in dir and removes it: the error says whether
// the disk there has room (ENOSPC, EDQUOT) and works (EIO). Local file
// systems say so at the write (they reserve blocks and quota then), NFS at
// the close; the sync, which a busy file system makes slow and a sweep of
// fast-failing runs would pay for each, is only for where little room is
// left.
func probeDisk(dir string) error {
	f, err := os.CreateTemp(dir, ".nodepack-probe-")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	_, err = f.Write(make([]byte, 64<<10))
	if err == nil && roomLow(dir) {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// command builds attempt n's command: argv (with the Wrap prefix),
// directory, environment and output. A task line that is one plain
// command is started directly (see plainLine), unless shell says through
// bash.
func (e *Execution) command(ev run.Event, files *attemptFiles, n int, shell bool) (cmd *exec.Cmd, outW, errW *lineWriter, err error) {
	args, direct := ev.Run.Args, false
	if words, ok := plainLine(args); ok && len(e.opts.Wrap) == 0 && !shell {
		args, direct = words, true // not under --wrap: its bash may be another's
	}
	argv := append(slices.Clip(e.opts.Wrap), args...)
	if len(argv) == 0 {
		return nil, nil, nil, errors.New("empty command")
	}
	cmd = e.paths.command(argv)
	cmd.Env = e.env.build(attemptEnv{run: ev.Run, lane: ev.Lane, place: ev.Place, attempt: n, runDir: files.runDir, tmpDir: files.tmpDir,
		mps: e.mpsEnv(ev.Place)})
	if direct && (cmd.Err != nil || bashFunction(cmd.Env, args[0])) {
		// Not a program bash would find (a builtin's name only, an
		// exported function): bash's to run after all.
		direct = false
		argv = append(slices.Clip(e.opts.Wrap), ev.Run.Args...)
		env := cmd.Env
		cmd = e.paths.command(argv)
		cmd.Env = env
	}
	if direct {
		cmd.Env = asBashExecs(cmd.Env, cmd.Path, ev.Run.Dir)
	}
	cmd.Stdin = devNull() // as exec.Cmd gives, without opening it for every run
	cmd.Dir = ev.Run.Dir
	switch {
	case e.live != nil:
		prefix := []byte("[" + label(ev.Run) + "] ")
		outW = &lineWriter{live: e.live, prefix: prefix}
		errW = &lineWriter{live: e.live, prefix: prefix}
		if files.stdout != nil {
			outW.file, errW.file = files.stdout, files.stderr
		}
		cmd.Stdout, cmd.Stderr = outW, errW
		cmd.WaitDelay = waitDelay
	case files.stdout != nil:
		cmd.Stdout, cmd.Stderr = files.stdout, files.stderr // the child writes to the files itself
	}
	return cmd, outW, errW, nil
}

// plainLine returns the words of a task line's run, bash -c LINE, when
// LINE is one plain command (run.Plain): bash would only exec it, so it is
// started directly, without bash's own start (about a millisecond of CPU,
// most of a short run's cost). Its ID and its ledger record are the
// line's, as ever.
func plainLine(args []string) ([]string, bool) {
	if len(args) != 3 || args[0] != "bash" || args[1] != "-c" {
		return nil, false
	}
	return run.Plain(args[2])
}

// bashFunction reports whether env exports a bash function named name,
// which bash -c would call rather than a program.
func bashFunction(env []string, name string) bool {
	prefix := "BASH_FUNC_" + name + "%%="
	for _, kv := range env {
		if strings.HasPrefix(kv, prefix) {
			return true
		}
	}
	return false
}

// asBashExecs sets in env what bash sets in the environment of a command
// it execs: PWD (the directory it runs in), _ (the program's path),
// SHLVL (0 when not set) and no OLDPWD that is not a directory.
func asBashExecs(env []string, path, dir string) []string {
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(workingDir(), dir)
	}
	out := make([]string, 0, len(env)+3)
	shlvl := false
	for _, kv := range env {
		switch {
		case strings.HasPrefix(kv, "PWD="), strings.HasPrefix(kv, "_="):
			continue
		case strings.HasPrefix(kv, "OLDPWD="):
			if st, err := os.Stat(kv[len("OLDPWD="):]); err != nil || !st.IsDir() {
				continue
			}
		case strings.HasPrefix(kv, "SHLVL="):
			shlvl = true
		}
		out = append(out, kv)
	}
	if !shlvl {
		out = append(out, "SHLVL=0")
	}
	if dir != "" {
		out = append(out, "PWD="+dir)
	}
	return append(out, "_="+path)
}

// workingDir is nodepack's working directory, where runs without a Dir
// start; "" when it cannot be read.
var workingDir = sync.OnceValue(func() string {
	dir, _ := os.Getwd()
	return dir
})

// devNull is /dev/null opened once for reading, every run's standard input;
// nil when it cannot be opened (exec.Cmd then opens it itself).
var devNull = sync.OnceValue(func() *os.File {
	f, err := os.Open(os.DevNull)
	if err != nil {
		return nil
	}
	return f
})

// classify completes a Finished event from how the process ended.
func (e *Execution) classify(ev *run.Event, reason run.Reason, exit proc.Exit) {
	ev.Kind = run.Finished
	ev.ExitCode = exit.Code
	ev.Signal = exit.Signal
	ev.Usage = exit.Usage
	switch {
	case reason != "":
		ev.Reason = reason
	case ev.ExitCode == 0:
		ev.Reason = run.OK
	case StopSignal(ev.Signal, ev.ExitCode):
		ev.Reason = run.Interrupted
		e.tally.outside.Add(1)
	case e.stoppedAround(ev.Signal):
		ev.Reason = run.Interrupted
	default:
		ev.Reason = run.Failed
	}
	var exitErr *exec.ExitError
	if exit.Err != nil && !errors.As(exit.Err, &exitErr) && !errors.Is(exit.Err, exec.ErrWaitDelay) {
		ev.Err = exit.Err
	}
}

// pathCache is exec.Command with PATH lookups cached for the sweep: with
// many short runs the lookup is a tenth of the runner's own CPU time. Only
// successful lookups are kept, and argv[0] is left as given.
type pathCache struct {
	mu    sync.Mutex
	paths map[string]string // command name → path found in PATH
}

// command is exec.Command(argv[0], argv[1:]...), looking argv[0] up once.
func (c *pathCache) command(argv []string) *exec.Cmd {
	name := argv[0]
	if filepath.Base(name) != name {
		return exec.Command(name, argv[1:]...)
	}
	c.mu.Lock()
	path, ok := c.paths[name]
	c.mu.Unlock()
	if !ok {
		cmd := exec.Command(name, argv[1:]...)
		if cmd.Err != nil {
			return cmd
		}
		c.mu.Lock()
		if c.paths == nil {
			c.paths = make(map[string]string)
		}
		c.paths[name] = cmd.Path
		c.mu.Unlock()
		return cmd
	}
	cmd := exec.Command(path, argv[1:]...)
	cmd.Args[0] = name
	return cmd
}

// filesError is attempt's error for an attempt whose run directory, logs
// or scratch could not be made: that attempt's failure, where any other
// error of the runner's is the sweep's.
type filesError struct{ err error }

func (e *filesError) Error() string { return e.err.Error() }

func (e *filesError) Unwrap() error { return e.err }

// setupFailed completes ev for an attempt the runner could not set up
// because of err (its run directory, logs or scratch), with
// its class (see failure.OfSetup); node says the node is at fault (a full
// disk, an I/O error): then the attempt was interrupted, not failed.
func (e *Execution) setupFailed(ev run.Event, err error) (run.Event, bool) {
	ev.Kind = run.Finished
	if ev.Start.IsZero() {
		ev.Start = time.Now()
	}
	ev.End, ev.ExitCode, ev.PID = time.Now(), -1, 0
	ev.Err = fmt.Errorf("nodepack could not set up the attempt: %w", err)
	class, node := failure.OfSetup(err)
	ev.Reason, ev.Class = run.Failed, class
	if node {
		ev.Reason = run.Interrupted
	}
	return ev, node
}

// notStarted completes ev for an attempt whose command could not start.
func (e *Execution) notStarted(ev run.Event, err error) run.Event {
	ev.Kind = run.Finished
	if ev.Start.IsZero() {
		ev.Start = time.Now()
	}
	ev.End = time.Now()
	ev.ExitCode = -1
	ev.Reason = run.Failed
	ev.Err = err
	e.name(&ev, failure.Outcome{StartErr: err}, 0)
	return ev
}

// memLimit is the memory the run's attempt is held to under EnforceMem:
// what it asks for now (a host-oom retry may ask for more), or 0.
func (e *Execution) memLimit(as pack.Assignment) uint64 {
	if !e.opts.EnforceMem {
		return 0
	}
	return as.Request.Mem
}

// oomKills reads Options.OOMKills, if set.
func (e *Execution) oomKills() (uint64, bool) {
	if e.opts.OOMKills == nil {
		return 0, false
	}
	return e.opts.OOMKills()
}

// name sets the class of a failed attempt and the last lines of its
// standard error; o holds what only the caller knows (a start error, the
// OOM kill count).
func (e *Execution) name(ev *run.Event, o failure.Outcome, stderrFrom int64) {
	o.ExitCode, o.Signal = ev.ExitCode, ev.Signal
	o.TimedOut, o.Interrupted = ev.Reason == run.TimedOut, ev.Reason == run.Interrupted
	var tail []byte
	if ev.Stderr != "" && !o.Interrupted && o.StartErr == nil { // nothing ran: the log holds earlier attempts only
		if rel, err := filepath.Rel(e.dirs.out, ev.Stderr); err == nil {
			tail = failure.ReadTail(e.dirs.out, rel, stderrFrom)
		}
	}
	ev.Class = failure.Classify(o, tail, e.patterns)
	ev.StderrTail = failure.LastLines(tail, run.MaxTailLines, run.MaxTailLine)
}
