package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/resources"
	"github.com/nodepack/nodepack/runner/ledger"
	"github.com/nodepack/nodepack/runner/results"
	"github.com/nodepack/nodepack/runner/submit"
	"github.com/spf13/pflag"
)

const submitUsage = `Usage: nodepack submit [--slurm|--sge|--pbs] --nodes N|--runs-per-node M [flags] -- RUN-ARGUMENTS…
       nodepack submit [--slurm|--sge|--pbs] --check

From a login node: starts a sweep on a cluster as one array job, each
array task one node running 'nodepack run', all of them into one output
directory on the shared file system. The tasks are one pool (run --pool
auto): each claims the next runs of the whole sweep as its node frees, so
that a task that starts early or gets short runs takes more, and the
others take over the runs of a task whose node dies once its --lease
expires; --static gives each task a fixed shard instead (run --shard
I/N; always so with --pbs). After --
come nodepack run's own arguments: its flags and its source, as you would
give them to run (a task file, or --sweep, --grid or --params and the
command).

Everything is checked before anything is submitted: every run of the
source, as run checks it, that every run's request fits the node the job
asks for (--gpus-per-node, --cpus-per-node, --mem), and that the
scheduler answers here (--check asks only that). Each task asks for a
whole node unless --cpus-per-node gives a count: Slurm --exclusive
(--mem=0 too, without --mem), PBS place=excl, and on Grid Engine, which
has no such request, the CPUs of its smallest execution host (qhost). The
job script goes to OUTPUT/jobs/submit-K.sh and is printed with what each
task asks for; the job's id is recorded in OUTPUT/submissions.jsonl. Each
task runs 'nodepack run --requeue --stop-before D' (D a twelfth of
--time, between 1 and 15 minutes; 5 minutes without --time, which acts
only when the queue has a limit) with the scheduler's warning signal as a
backstop (Slurm --signal=B:USR1, Grid Engine -notify), so a task stopped
by its time limit or preempted is requeued and resumes.

--nodes N makes N tasks; --runs-per-node M makes as many as M runs each
need (clusterduck's total_runs_per_node); with both, at most N tasks run
at once. --add N (or a second submit into the same OUTPUT) adds N tasks
to a pool, while it runs or after. 'nodepack status OUTPUT' shows the
array's tasks as the scheduler sees them beside every run; 'nodepack
resubmit OUTPUT' submits new tasks for the runs left (with --static, the
shards that have runs left; a shard runs on one node: to spread a
resubmission wider, submit with --runs-per-node).

Without --slurm, --sge or --pbs the scheduler is the one whose commands
are installed (sbatch, qconf, pbsnodes). OUTPUT defaults to
nodepack-NAME-KEY in the current directory, as run names it.

Examples:
  nodepack submit --check
  nodepack submit --slurm --nodes 3 --time 4h --gpus-per-node 4 --dry-run -- --runs-per-gpu 2 tasks.txt
  nodepack submit --sge --runs-per-node 50 --nodes 4 --cpus-per-node 16 --dry-run -- --sweep -- python train.py lr=0.1,0.01 seed='range(100)'
  nodepack submit --pbs --nodes 2 --time 1:30:00 --queue gpu --extra '-l place=scatter' --dry-run -- --params runs.jsonl -- python train.py --out={run_dir}`

const resubmitUsage = `Usage: nodepack resubmit [--remaining] [--retry-failed] [flags] DIR

Submits again, as a new array job, what is left of DIR's sweep: runs
pending, interrupted (also those running on a node that died), new (a
task file that grew) and, with --retry-failed, failed. For a pool, new
tasks (as many as the first submission had, or --nodes; no more than
runs are left), which take over the claims of the tasks that died; for
fixed shards (--static), the shards that have such runs. It reuses what the first
submission of DIR asked for (scheduler, node shape, time, run's
arguments); the flags given here replace those. The sweep stays one:
its tasks keep their own ledgers, so status, report and the results
table cover every submission together, and a run that succeeded never
runs again. It refuses while a task of DIR's earlier jobs is still
queued or running, and when the scheduler cannot be asked.

Example:
  nodepack resubmit --dry-run swept`

// jobFlags are the flags of submit and resubmit that say what each array
// task asks for; resubmit takes the first submission's where not given.
type jobFlags struct {
	slurm, sge, pbs bool
	nodes           int
	runsPerNode     int
	time            string
	gpus, cpus      int
	mem             string
	gpuMemory       string
	partition       string
	queue           string
	account         string
	name            string
	extra           []string
	nodepack        string
	dryRun          bool
	wait            bool
	static          bool
	add             int
}

func (f *jobFlags) addFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&f.slurm, "slurm", false, "submit to Slurm (sbatch)")
	fs.BoolVar(&f.sge, "sge", false, "submit to Grid Engine (qsub)")
	fs.BoolVar(&f.pbs, "pbs", false, "submit to PBS (qsub)")
	fs.IntVar(&f.nodes, "nodes", 0, "`N` nodes: N shards, one per array task; with --runs-per-node, at most N tasks at once")
	fs.IntVar(&f.runsPerNode, "runs-per-node", 0, "`M` runs per array task: as many shards as that needs")
	fs.StringVar(&f.time, "time", "", "each task's time limit, `T` such as 4h, 90m or [D-]HH:MM:SS (default: the queue's)")
	fs.IntVar(&f.gpus, "gpus-per-node", 0, "GPUs each task asks for, `G` (Slurm --gres=gpu:G, Grid Engine -l gpu=G, PBS ngpus=G)")
	fs.IntVar(&f.cpus, "cpus-per-node", 0, "CPUs each task asks for, `C` (Slurm --cpus-per-task, Grid Engine -pe smp C, PBS ncpus); without it each task asks for a whole node")
	fs.StringVar(&f.mem, "mem", "", "memory each task asks for, `SIZE` such as 64GiB (Slurm --mem, Grid Engine -l mem_free, PBS mem)")
	fs.StringVar(&f.gpuMemory, "gpu-memory", "", "each GPU's memory on the nodes, `SIZE` such as 80GiB: what runs' gpu_mem requests are checked against (asks the scheduler for nothing)")
	fs.StringVar(&f.partition, "partition", "", "Slurm partition `P`")
	fs.StringVar(&f.queue, "queue", "", "Grid Engine or PBS queue `Q`")
	fs.StringVar(&f.account, "account", "", "account `A` to charge")
	fs.StringVar(&f.name, "name", "", "the job's `NAME` (default nodepack-NAME of the sweep)")
	fs.StringArrayVar(&f.extra, "extra", nil, "one more directive, `'RAW'` as the scheduler takes it after #SBATCH, #$ or #PBS (repeatable)")
	fs.StringVar(&f.nodepack, "nodepack", "", "the nodepack binary the tasks run, a `PATH` the nodes see (default: this one)")
	fs.BoolVar(&f.dryRun, "dry-run", false, "print the job script and submit nothing")
	fs.BoolVar(&f.wait, "wait", false, "wait until the job's tasks have left the queue, then print the sweep's status and exit as status does")
}

// scheduler returns the scheduler the flags name, or the one installed.
func (f *jobFlags) scheduler() (submit.Scheduler, error) {
	var named []submit.Scheduler
	for s, on := range map[submit.Scheduler]bool{submit.Slurm: f.slurm, submit.SGE: f.sge, submit.PBS: f.pbs} {
		if on {
			named = append(named, s)
		}
	}
	switch len(named) {
	case 0:
		return submit.Detect(exec.LookPath)
	case 1:
		return named[0], nil
	}
	return "", errors.New("give one of --slurm, --sge and --pbs")
}

// apply sets what the flags given in fs say on job.
func (f *jobFlags) apply(fs *pflag.FlagSet, job *submit.Job) error {
	if fs.Changed("slurm") || fs.Changed("sge") || fs.Changed("pbs") || job.Scheduler == "" {
		s, err := f.scheduler()
		if err != nil {
			return err
		}
		job.Scheduler = s
	}
	if f.nodes < 0 || f.runsPerNode < 0 || f.gpus < 0 || f.cpus < 0 {
		return errors.New("--nodes, --runs-per-node, --gpus-per-node and --cpus-per-node must not be negative")
	}
	if fs.Changed("time") {
		d, err := submit.ParseTime(f.time)
		if err != nil {
			return fmt.Errorf("--time: %w", err)
		}
		job.Time = d
	}
	if fs.Changed("mem") {
		b, err := pack.ParseSize(f.mem)
		if err != nil || b == 0 {
			return fmt.Errorf("--mem %q: want a size such as 64GiB", f.mem)
		}
		job.MemBytes = b
	}
	if fs.Changed("gpu-memory") {
		b, err := pack.ParseSize(f.gpuMemory)
		if err != nil || b == 0 {
			return fmt.Errorf("--gpu-memory %q: want a size such as 80GiB", f.gpuMemory)
		}
		job.GPUMemBytes = b
	}
	if f.partition != "" && f.queue != "" {
		return errors.New("--partition (Slurm) and --queue (Grid Engine, PBS) name the same thing: give one")
	}
	for name, set := range map[string]func(){
		"gpus-per-node": func() { job.GPUsPerNode = f.gpus },
		"cpus-per-node": func() { job.CPUsPerNode = f.cpus },
		"partition":     func() { job.Partition = f.partition },
		"queue":         func() { job.Partition = f.queue },
		"account":       func() { job.Account = f.account },
		"name":          func() { job.Name = f.name },
		"extra":         func() { job.Extra = f.extra },
	} {
		if fs.Changed(name) {
			set()
		}
	}
	if fs.Changed("nodepack") || job.Nodepack == "" {
		bin := f.nodepack
		if bin == "" {
			exe, err := os.Executable()
			if err != nil {
				return fmt.Errorf("finding this binary: %w: give --nodepack", err)
			}
			bin = exe
		}
		abs, err := filepath.Abs(bin)
		if err != nil {
			return err
		}
		job.Nodepack = abs
	}
	return nil
}

// shapeNode is the node a job asks for, as run's checks take it: its CPUs
// and GPUs, and its memory. CPUs not asked for (a whole node) are taken
// as many, so that only GPUs and memory limit the runs' requests.
func shapeNode(job submit.Job) resources.Node {
	cpus := job.CPUsPerNode
	if cpus == 0 {
		cpus = 1024
	}
	n := resources.Node{Schema: "nodepack.node/v1", Hostname: "the node the job asks for", GPUSource: "submit", MemoryBytes: job.MemBytes}
	n.Memory.TotalBytes = job.MemBytes
	all := make([]int, cpus)
	for i := range cpus {
		n.CPUs = append(n.CPUs, resources.CPU{ID: i, Core: i, NUMA: 0})
		all[i] = i
	}
	for i := range job.GPUsPerNode {
		n.GPUs = append(n.GPUs, resources.GPU{Index: i, UUID: fmt.Sprintf("GPU-%08d-0000-0000-0000-000000000000", i), MemoryBytes: job.GPUMemBytes, CPUs: all})
	}
	return n
}

// checkRuns checks run's arguments as run checks them, on the node the
// job asks for, with shard (none, or I/N) into output ("" for run's
// default); it returns the output directory and how many runs the sweep
// has.
func checkRuns(ctx context.Context, job submit.Job, shard, output string) (string, int, error) {
	dir, total, _, _, err := checkShard(ctx, job, shard, output)
	return dir, total, err
}

// checkShard is checkRuns, and also says how many runs of the shard a
// task would run (its runs of the source that its ledger does not hold as
// done: an edited line is a run of its own, never done) and the key of
// the sweep's definition (a pool's submissions record it, so that a
// second into the same directory is refused for another sweep before any
// task starts).
func checkShard(ctx context.Context, job submit.Job, shard, output string) (dir string, total, left int, key string, err error) {
	var o runOptions
	fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.AddFlags(fs)
	if err := fs.Parse(job.Run); err != nil {
		return "", 0, 0, "", fmt.Errorf("run's arguments %q: %w", job.Run, err)
	}
	if fs.Changed("search") {
		return "", 0, 0, "", errors.New("run's --search: a searcher's sweep runs in one nodepack run on one node, not as an array: put 'nodepack run --search …' in a batch job of its own (docs/search.md)")
	}
	for _, name := range []string{"output", "shard", "pool", "inventory", "gpus", "cpus", "dry-run", "json", "restart"} {
		if fs.Changed(name) {
			return "", 0, 0, "", fmt.Errorf("run's --%s: submit chooses it (the output directory with submit's own -o; start over with another -o)", name)
		}
	}
	node := shapeNode(job)
	o.shape = &node
	o.DryRun, o.Shard, o.Output = true, shard, output
	if shard == "pool" {
		// A task of the pool: the whole sweep, and what is left of it.
		o.Shard, o.Pool, o.RetryFailed = "auto", "submit", job.RetryFailed
	}
	o.Requeue, o.StopBefore = false, 0 // the tasks' own, checked where they run
	if job.Dir != "" {
		// Paths as the tasks see them: from the directory they run in.
		cwd, err := os.Getwd()
		if err == nil && cwd != job.Dir {
			if err := os.Chdir(job.Dir); err != nil {
				return "", 0, 0, "", err
			}
			defer os.Chdir(cwd)
		}
	}
	sw, _, err := o.prepare(ctx, fs.Args(), job.Run)
	if err != nil && strings.Contains(err.Error(), "never fits") {
		return "", 0, 0, "", fmt.Errorf("%w (on the node each task asks for: %s)", err, describeShape(job))
	}
	if err != nil {
		return "", 0, 0, "", err
	}
	defer sw.Close()
	mine, total := sw.Total()
	return sw.Output(), total, max(mine-sw.Done(), 0), sw.Definition().Key(), nil
}

// describeShape says what each task of job asks for.
func describeShape(job submit.Job) string {
	cpus := "a whole node's CPUs"
	if job.CPUsPerNode > 0 {
		cpus = countWord(job.CPUsPerNode, "CPU")
	}
	d := countWord(job.GPUsPerNode, "GPU") + ", " + cpus
	if job.MemBytes > 0 {
		d += ", " + results.HumanBytes(job.MemBytes)
	}
	switch {
	case job.GPUsPerNode == 0:
		d += "; --gpus-per-node asks for GPUs"
	case job.GPUMemBytes == 0:
		d += "; --gpu-memory says each GPU's memory, for gpu_mem requests"
	}
	return d
}

func runSubmit(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var f jobFlags
	var output string
	var check bool
	fs := pflag.NewFlagSet("submit", pflag.ContinueOnError)
	f.addFlags(fs)
	fs.StringVarP(&output, "output", "o", "", "`DIR` for the sweep: its ledgers, logs, job scripts and records (default nodepack-NAME-KEY, as run names it); the nodes must see it")
	fs.BoolVar(&f.static, "static", false, "fixed shards, one per array task (nodepack run --shard I/N), instead of one shared pool whose tasks claim runs of the whole sweep as their nodes free (the default, but for PBS)")
	fs.IntVar(&f.add, "add", 0, "add `N` array tasks to the pool submitted before into the output directory, while it runs or after (a second submit with --nodes N does the same)")
	fs.BoolVar(&check, "check", false, "only say whether the scheduler answers here: exit 0 when it does, 1 when it does not (2: none installed)")
	if code, ok := parseFlags(ctx, fs, submitUsage, args, stdout, stderr); !ok {
		return code
	}
	if check {
		return checkScheduler(ctx, f, fs, stdout, stderr)
	}
	if fs.ArgsLenAtDash() != 0 || fs.NArg() == 0 {
		return usageErrorf(stderr, "submit", "want run's arguments after --: nodepack submit [flags] -- [run flags] TASKFILE")
	}
	wd, err := os.Getwd()
	if err != nil {
		return usageErrorf(stderr, "submit", "%v", err)
	}
	job := submit.Job{Run: fs.Args(), Dir: wd}
	if err := f.apply(fs, &job); err != nil {
		return usageErrorf(stderr, "submit", "%v", err)
	}
	job.Pool = !f.static && job.Scheduler != submit.PBS
	if f.add > 0 {
		if f.nodes > 0 || f.runsPerNode > 0 || f.static {
			return usageErrorf(stderr, "submit", "--add N adds N tasks to a pool submitted before: it goes without --nodes, --runs-per-node and --static")
		}
		f.nodes = f.add
	}
	if f.nodes == 0 && f.runsPerNode == 0 {
		return usageErrorf(stderr, "submit", "give --nodes N (N nodes, one array task each) or --runs-per-node M (as many tasks as runs of M each need)")
	}
	cpusFrom, err := wholeNodeCPUs(ctx, &job)
	if err != nil {
		return usageErrorf(stderr, "submit", "%v", err)
	}
	if output != "" {
		abs, err := filepath.Abs(output)
		if err != nil {
			return usageErrorf(stderr, "submit", "%v", err)
		}
		output = abs
	}
	dir, total, _, key, err := checkShard(ctx, job, "none", output)
	if err == nil && !filepath.IsAbs(dir) {
		dir = filepath.Join(wd, dir)
	}
	if err != nil {
		return usageErrorf(stderr, "submit", "%v", err)
	}
	if total == 0 {
		return usageErrorf(stderr, "submit", "the source has no runs: nothing to submit")
	}
	job.Output = dir
	job.Shards, job.Nodes = submit.Size(total, f.nodes, f.runsPerNode)
	if job.Name == "" {
		job.Name = "nodepack-" + strings.TrimPrefix(filepath.Base(dir), "nodepack-")
	}
	recs, err := submit.Read(dir)
	if err != nil {
		return usageErrorf(stderr, "submit", "%v", err)
	}
	if !job.Pool {
		key = "" // recorded for a pool's submissions only
	}
	switch {
	case f.add > 0 && (len(recs) == 0 || !recs[0].Job.Pool):
		return usageErrorf(stderr, "submit", "--add %d: %s has no pool submitted before: nodepack submit --nodes %d starts one", f.add, dir, f.add)
	case len(recs) > 0 && job.Pool && recs[0].Job.Pool:
		// More tasks for the pool: of the same sweep.
		if recs[0].Sweep != "" && recs[0].Sweep != key {
			return usageErrorf(stderr, "submit", "%s holds another sweep (submitted as job %s): the run arguments after -- define another one; choose another -o", dir, recs[0].JobID)
		}
		job.Name = recs[0].Job.Name
	case len(recs) > 0:
		return usageErrorf(stderr, "submit", "%s was submitted before (job %s): nodepack resubmit %s submits what is left", dir, recs[len(recs)-1].JobID, shellWord(dir))
	}
	if files, _ := ledger.Files(dir); len(files) > 0 {
		// The sweep ran there before: the same sweep, with these shards
		// (a pool's tasks each run the whole sweep).
		spec := fmt.Sprintf("0/%d", job.Shards)
		if job.Pool {
			spec = "pool"
		}
		if _, _, err := checkRuns(ctx, job, spec, dir); err != nil {
			return usageErrorf(stderr, "submit", "%v", err)
		}
	}
	if cpusFrom != "" {
		fmt.Fprintf(stderr, "nodepack submit: Grid Engine has no request for a whole node: each task asks for %s (%s); --cpus-per-node asks for another count\n",
			countWord(job.CPUsPerNode, "CPU"), termSafe(cpusFrom))
	}
	return submitJob(ctx, job, len(recs)+1, total, key, f, stdout, stderr)
}

// wholeNodeCPUs gives a Grid Engine job that names no CPU count the CPUs
// of a whole node, as its hosts report them (submit.NodeCPUs): it has no
// request for a whole node, and a job without -pe gets one slot. It
// returns where the count came from; "" when nothing was asked.
func wholeNodeCPUs(ctx context.Context, job *submit.Job) (string, error) {
	if job.Scheduler != submit.SGE || job.CPUsPerNode > 0 {
		return "", nil
	}
	n, from, err := submit.NodeCPUs(ctx, job.Scheduler, job.Partition)
	if err != nil {
		return "", fmt.Errorf("Grid Engine has no request for a whole node, and asking its hosts' CPUs failed: %w: give --cpus-per-node", err)
	}
	job.CPUsPerNode = n
	return from, nil
}

// checkScheduler is submit --check: whether the scheduler the flags name,
// or the one installed, answers here.
func checkScheduler(ctx context.Context, f jobFlags, fs *pflag.FlagSet, stdout, stderr io.Writer) int {
	if fs.NArg() > 0 {
		return usageErrorf(stderr, "submit", "--check takes no run arguments")
	}
	s, err := f.scheduler()
	if err != nil {
		return usageErrorf(stderr, "submit", "%v", err)
	}
	sayInherited(stderr, "submit", s)
	if err := submit.Ping(ctx, s); err != nil {
		fmt.Fprintf(stderr, "nodepack submit: %s does not answer here: %s\n", s.Name(), termSafe(err.Error()))
		return exitFailed
	}
	fmt.Fprintf(stdout, "%s answers here\n", s.Name())
	return exitOK
}

// sayInherited names, one line each, the variables of this shell that
// change a job of scheduler s (submit.InheritedVars).
func sayInherited(stderr io.Writer, cmd string, s submit.Scheduler) {
	for _, v := range submit.InheritedVars(s, os.Environ()) {
		fmt.Fprintf(stderr, "nodepack %s: warning: %s=%s in this shell: %s\n", cmd, termSafe(v.Name), termSafe(v.Value), v.Why)
	}
}

// submitJob writes job's script as submission number k of its output
// directory, prints it, and submits it (unless --dry-run), recording the
// job's id; with --wait it then waits for the job.
func submitJob(ctx context.Context, job submit.Job, k, runs int, key string, f jobFlags, stdout, stderr io.Writer) int {
	cmd := "submit"
	if k > 1 {
		cmd = "resubmit"
	}
	script, err := job.Script()
	if err != nil {
		return usageErrorf(stderr, cmd, "%v", err)
	}
	// Printed as a terminal may show it: a control character of a run's
	// argument or a flag's value escaped (the file has it as it is).
	for line := range strings.Lines(script) {
		fmt.Fprintln(stdout, termSafe(strings.TrimSuffix(line, "\n")))
	}
	tasks := len(job.Indices)
	if job.Indices == nil {
		tasks = job.Shards
	}
	who := "each of its " + countWord(tasks, "array task")
	if tasks == 1 {
		who = "its one task"
	}
	fmt.Fprintf(stderr, "nodepack %s: the job asks, for %s: %s; nodepack run uses what its node gives it\n", cmd, who,
		termSafe(strings.Join(job.Asks(), ", ")))
	sayInherited(stderr, cmd, job.Scheduler)
	if why := submit.NodeLocal(job.Output); why != "" {
		fmt.Fprintf(stderr, "nodepack %s: warning: the nodes may not see %s: %s\n", cmd, termSafe(job.Output), why)
	}
	if f.dryRun {
		return exitOK
	}
	rec, err := submit.Launch(ctx, job, script, runs, key)
	switch {
	case errors.Is(err, submit.ErrNothingSubmitted):
		return usageErrorf(stderr, cmd, "%v", err)
	case err != nil:
		fmt.Fprintf(stderr, "nodepack %s: %s\n", cmd, termSafe(err.Error()))
		return exitFailed
	}
	id := rec.JobID
	what := countWord(tasks, "array task") + " of " + countWord(job.Shards, "shard")
	if job.Pool {
		what = countWord(tasks, "array task") + " of the sweep's shared pool"
	}
	fmt.Fprintf(stderr, "nodepack %s: job %s (%s): %s, into %s\n", cmd, termSafe(id), job.Scheduler, what, termSafe(job.Output))
	fmt.Fprintf(stderr, "nodepack %s: see it: nodepack status %s\n", cmd, shellWord(job.Output))
	if !f.wait {
		return exitOK
	}
	return waitJob(ctx, job.Output, stdout, stderr)
}

// waitInterval is how often --wait asks the scheduler.
var waitInterval = 5 * time.Second

// waitJob waits until no shard's task of dir's submissions is queued,
// then prints dir's status: exit 0 when every run finished and none
// failed, else 1.
func waitJob(ctx context.Context, dir string, stdout, stderr io.Writer) int {
	doc, err := submit.Wait(ctx, dir, waitInterval)
	if ctx.Err() != nil {
		fmt.Fprintf(stderr, "nodepack submit: stopped waiting; the job goes on: nodepack status %s\n", shellWord(dir))
		return exitFailed
	}
	if err != nil {
		return usageErrorf(stderr, "submit", "--wait: %v", err)
	}
	printStatus(stdout, dir, doc)
	// Every task left the queue, and yet runs may be left: a task that
	// died or never started.
	if c := doc.Counts; c.Pending+c.Interrupted+c.Running > 0 || doc.Total == nil {
		fmt.Fprintf(stderr, "nodepack submit: the job ended with runs left: nodepack resubmit %s submits them\n", shellWord(dir))
		return exitFailed
	}
	if doc.Counts.Failed > 0 {
		return exitFailed
	}
	return exitOK
}

func runResubmit(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var f jobFlags
	fs := pflag.NewFlagSet("resubmit", pflag.ContinueOnError)
	f.addFlags(fs)
	remaining := fs.Bool("remaining", true, "the shards with runs left (what resubmit always submits; said for scripts that name it)")
	retryFailed := fs.Bool("retry-failed", false, "also the shards with failed runs, whose tasks run those again")
	if code, ok := parseFlags(ctx, fs, resubmitUsage, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() != 1 {
		return usageErrorf(stderr, "resubmit", "want one DIR, got %d arguments", fs.NArg())
	}
	if !*remaining {
		return usageErrorf(stderr, "resubmit", "--remaining=false: resubmit submits what is left, nothing else")
	}
	dir, err := filepath.Abs(fs.Arg(0))
	if err != nil {
		return usageErrorf(stderr, "resubmit", "%v", err)
	}
	recs, err := submit.Read(dir)
	if err != nil {
		return usageErrorf(stderr, "resubmit", "%v", err)
	}
	if len(recs) == 0 {
		return usageErrorf(stderr, "resubmit", "%s has no submissions (%s): nodepack submit starts a sweep", dir, submit.Records)
	}
	job := recs[0].Job
	job.Indices, job.RetryFailed, job.Output = nil, *retryFailed, dir
	if err := f.apply(fs, &job); err != nil {
		return usageErrorf(stderr, "resubmit", "%v", err)
	}
	if fs.Changed("runs-per-node") {
		return usageErrorf(stderr, "resubmit", "--runs-per-node: the sweep's %d shards are its ledgers; --nodes says how many run at once", job.Shards)
	}
	if fs.Changed("nodes") {
		job.Nodes = f.nodes
	}
	if _, err := wholeNodeCPUs(ctx, &job); err != nil {
		return usageErrorf(stderr, "resubmit", "%v", err)
	}
	if job.Pool {
		return resubmitPool(ctx, job, recs, f, fs, stdout, stderr)
	}
	// The same sweep: every run checked again, the definition against the
	// ledgers (a changed task file is refused here, not on the nodes).
	_, total, err := checkRuns(ctx, job, fmt.Sprintf("0/%d", job.Shards), dir)
	if err != nil {
		return usageErrorf(stderr, "resubmit", "%v", err)
	}
	shards, active, err := queued(ctx, dir, recs)
	if err != nil {
		return usageErrorf(stderr, "resubmit", "%v", err)
	}
	if a := active; a != nil {
		return usageErrorf(stderr, "resubmit", "shard %d of %s is still in the queue, %s (job %s): wait for it, or cancel it first", a.Shard, dir, a.State, a.JobID)
	}
	left := submit.Left(job.Shards, total, shards, *retryFailed)
	// A shard its ledger holds as finished may still have runs of the
	// source it never ran: a line edited since (a run of its own). Its
	// runs are counted against the source, as its task would.
	for i := range job.Shards {
		if slices.Contains(left, i) {
			continue
		}
		if _, _, n, _, err := checkShard(ctx, job, fmt.Sprintf("%d/%d", i, job.Shards), dir); err != nil {
			return usageErrorf(stderr, "resubmit", "%v", err)
		} else if n > 0 {
			left = append(left, i)
		}
	}
	slices.Sort(left)
	if len(left) == 0 {
		what := "every run succeeded or was pruned"
		if !*retryFailed {
			what = "every run succeeded, was pruned or failed (--retry-failed runs the failed ones again)"
		}
		fmt.Fprintf(stderr, "nodepack resubmit: nothing left in %s: %s\n", termSafe(dir), what)
		return exitOK
	}
	job.Indices = left
	return submitJob(ctx, job, len(recs)+1, total, recs[0].Sweep, f, stdout, stderr)
}

// queued reads dir's ledgers and asks the scheduler about recs' jobs: it
// returns the ledgers' shards and the first task still in the queue (nil
// when none is).
func queued(ctx context.Context, dir string, recs []submit.Record) ([]results.ShardStatus, *submit.ShardView, error) {
	var shards []results.ShardStatus
	if st, err := results.ReadStatus(dir, time.Now()); err == nil {
		shards = st.Shards
	} else if files, _ := ledger.Files(dir); len(files) > 0 {
		return nil, nil, err
	}
	v := submit.Look(ctx, recs, shards, nil)
	if v.Error != "" {
		return nil, nil, fmt.Errorf("cannot ask %s whether %s's jobs still run: %s", v.Scheduler, dir, v.Error)
	}
	if active := v.Active(); len(active) > 0 {
		return shards, &active[0], nil
	}
	return shards, nil, nil
}

// resubmitPool is resubmit for a pool: once no task of it is queued, it
// submits new tasks (as many as the first submission had, or --nodes, no
// more than runs are left) when runs are left; they take over the claims
// of the tasks that died once their leases expire, and claim what no task
// claimed.
func resubmitPool(ctx context.Context, job submit.Job, recs []submit.Record, f jobFlags, fs *pflag.FlagSet, stdout, stderr io.Writer) int {
	dir := job.Output
	_, total, left, _, err := checkShard(ctx, job, "pool", dir)
	if err != nil {
		return usageErrorf(stderr, "resubmit", "%v", err)
	}
	_, active, err := queued(ctx, dir, recs)
	if err != nil {
		return usageErrorf(stderr, "resubmit", "%v", err)
	}
	if a := active; a != nil {
		return usageErrorf(stderr, "resubmit", "task %d of job %s of %s's pool is still in the queue, %s: it runs what is left (nodepack submit --add N adds tasks to it)", a.Task, a.JobID, dir, a.State)
	}
	if left == 0 {
		what := "every run succeeded or was pruned"
		if !job.RetryFailed {
			what = "every run succeeded, was pruned or failed (--retry-failed runs the failed ones again)"
		}
		fmt.Fprintf(stderr, "nodepack resubmit: nothing left in %s: %s\n", termSafe(dir), what)
		return exitOK
	}
	if fs.Changed("nodes") {
		job.Shards = f.nodes
	}
	job.Shards = max(min(job.Shards, left), 1)
	return submitJob(ctx, job, len(recs)+1, total, recs[0].Sweep, f, stdout, stderr)
}
