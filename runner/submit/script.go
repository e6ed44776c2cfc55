package submit

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/nodepack/nodepack/pack"
)

// Scheduler names a batch system.
type Scheduler string

// The schedulers a Job can be written for.
const (
	Slurm Scheduler = "slurm"
	SGE   Scheduler = "sge" // Grid Engine: Son of Grid Engine, Univa/Altair GE
	PBS   Scheduler = "pbs" // PBS Professional, OpenPBS
)

// Job is one array job over a sweep, all of its tasks into one output
// directory: with Pool, Shards tasks of the sweep's shared pool (each
// claims runs of the whole sweep as its lanes free: nodepack run --pool
// auto); else array task t runs shard Indices[t] of Shards with nodepack
// run --shard. Its zero values are the scheduler's defaults.
type Job struct {
	Scheduler Scheduler `json:"scheduler"`
	// Pool makes the tasks share the sweep as one pool rather than run
	// fixed shards; Shards then counts the tasks, and Indices is nil.
	Pool bool `json:"pool,omitempty"`
	// Name is the job's name; empty: "nodepack".
	Name string `json:"name,omitempty"`
	// Shards is how many shards the sweep has; Indices the ones this job
	// runs, ascending (nil: all of them, 0 … Shards-1).
	Shards  int   `json:"shards"`
	Indices []int `json:"indices,omitempty"`
	// Nodes, if not 0, is how many of the array's tasks run at once.
	Nodes int `json:"nodes,omitempty"`
	// Time is each task's time limit; 0 leaves the queue's default.
	Time time.Duration `json:"time,omitempty"`
	// What each task asks for: whole nodes when GPUs and CPUs are both 0.
	GPUsPerNode int    `json:"gpus_per_node,omitempty"`
	CPUsPerNode int    `json:"cpus_per_node,omitempty"`
	MemBytes    uint64 `json:"mem_bytes,omitempty"`
	// GPUMemBytes is each GPU's memory on the nodes: no directive asks
	// for it; what the runs' gpu_mem requests are checked against.
	GPUMemBytes uint64 `json:"gpu_mem_bytes,omitempty"`
	// Partition is Slurm's partition, Grid Engine's and PBS's queue.
	Partition string `json:"partition,omitempty"`
	Account   string `json:"account,omitempty"`
	// Extra directives, one per entry, as the scheduler takes them after
	// its prefix ("--constraint=a100" for Slurm, "-l scratch=1" for Grid
	// Engine); an entry that starts with the prefix is taken as it is.
	Extra []string `json:"extra,omitempty"`
	// Output is the sweep's output directory, an absolute path the nodes
	// see; the script and the tasks' logs go to Output/jobs.
	Output string `json:"output"`
	// Dir is the directory the tasks run in, an absolute path: where
	// run's arguments' relative paths start (the submitting shell's).
	Dir string `json:"dir"`
	// Nodepack is the nodepack binary the tasks run, an absolute path.
	Nodepack string `json:"nodepack"`
	// Run is what follows "nodepack run" for every task: its flags and its
	// source, without --output and --shard, which the script adds, as it
	// adds --requeue and, unless Run has one, --stop-before.
	Run []string `json:"run"`
	// RetryFailed adds --retry-failed: the tasks run failed runs again.
	RetryFailed bool `json:"retry_failed,omitempty"`
}

// tasks returns the shards this job runs, one per array task.
func (j Job) tasks() []int {
	if j.Indices != nil {
		return j.Indices
	}
	all := make([]int, j.Shards)
	for i := range all {
		all[i] = i
	}
	return all
}

// Size returns how many shards a sweep of total runs is cut into, and how
// many of their tasks run at once (0: all): nodes shards, or, with
// runsPerNode, as many as runs of that many each need, nodes (if given)
// at once. Never more shards than runs: a shard without a run would be a
// node for nothing.
func Size(total, nodes, runsPerNode int) (shards, atOnce int) {
	shards = nodes
	if runsPerNode > 0 {
		shards, atOnce = (total+runsPerNode-1)/runsPerNode, nodes
	}
	return max(min(shards, total), 1), atOnce
}

// taskID is the id the scheduler gives the array task that runs the
// k-th of the job's shards: from 1 on Grid Engine, from 0 elsewhere, -1
// for a PBS job of one shard (no array).
func (j Job) taskID(k int) int {
	switch {
	case j.Scheduler == SGE:
		return k + 1
	case j.Scheduler == PBS && len(j.tasks()) == 1:
		return -1
	}
	return k
}

// StopBefore is the --stop-before the tasks get: a twelfth of the time
// limit, between one and fifteen minutes; five minutes when the limit is
// the queue's; 0 for PBS, whose job's end nodepack cannot ask.
func (j Job) StopBefore() time.Duration {
	switch {
	case j.Scheduler == PBS:
		return 0
	case j.Time == 0:
		return 5 * time.Minute
	}
	return min(max(j.Time/12, time.Minute), 15*time.Minute).Round(time.Second)
}

// Warning is how long before the time limit Slurm sends the batch shell
// SIGUSR1 (--signal=B:USR1@…): half of StopBefore, at least 30 s, for a
// task whose end moved after nodepack last asked.
func (j Job) Warning() time.Duration {
	return max(j.StopBefore()/2, 30*time.Second).Round(time.Second)
}

// check says what makes the job impossible to write.
func (j Job) check() error {
	switch j.Scheduler {
	case Slurm, SGE, PBS:
	default:
		return fmt.Errorf("scheduler %q: want slurm, sge or pbs", j.Scheduler)
	}
	if err := j.checkShards(); err != nil {
		return err
	}
	if j.Nodes < 0 || j.GPUsPerNode < 0 || j.CPUsPerNode < 0 || j.Time < 0 {
		return errors.New("nodes, GPUs, CPUs and time must not be negative")
	}
	if j.Scheduler == SGE && j.CPUsPerNode == 0 {
		// A job without -pe gets one slot, and Grid Engine has no request
		// for a whole node: the count must be given (see NodeCPUs).
		return errors.New("grid engine: no CPU count: a job that names none gets one slot, and there is no request for a whole node")
	}
	for what, path := range map[string]string{"output directory": j.Output, "nodepack binary": j.Nodepack, "working directory": j.Dir} {
		if !strings.HasPrefix(path, "/") {
			return fmt.Errorf("%s %q: want an absolute path", what, path)
		}
		// The output directory is named in directives (the tasks' logs),
		// which no shell reads, and in comments; the others only in the
		// script's commands, quoted (Quote), where one line is the limit.
		bad := func(r rune) bool { return r == 0 || r == '\n' || r == '\r' }
		if path == j.Output {
			bad = func(r rune) bool {
				return unicode.IsSpace(r) || !unicode.IsPrint(r) || strings.ContainsRune(`%$"'\`+"`", r)
			}
		}
		if i := strings.IndexFunc(path, bad); i >= 0 {
			return fmt.Errorf("%s %q: a job script cannot name a path with %q in it", what, path, path[i:i+1])
		}
	}
	for _, v := range append([]string{j.Name, j.Partition, j.Account}, j.Extra...) {
		if strings.ContainsAny(v, "\n\r\x00") {
			return fmt.Errorf("%q: a directive is one line", v)
		}
	}
	for _, v := range []string{j.Name, j.Partition, j.Account} {
		if strings.ContainsFunc(v, unicode.IsSpace) {
			return fmt.Errorf("%q: a name, partition or account has no spaces", v)
		}
	}
	return nil
}

// MaxShards is the most shards a job may have: far more array tasks than
// any scheduler allows (Slurm's MaxArraySize is 1001 by default).
const MaxShards = 1 << 20

// checkShards says what is wrong with the job's shards.
func (j Job) checkShards() error {
	if j.Shards < 1 || j.Shards > MaxShards {
		return fmt.Errorf("%d shards: want 1 to %d", j.Shards, MaxShards)
	}
	if j.Indices == nil {
		return nil
	}
	if j.Pool {
		return errors.New("a pool's tasks run no shards: indices go without Pool")
	}
	if len(j.Indices) == 0 {
		return errors.New("no shard to run")
	}
	for k, i := range j.Indices {
		if i < 0 || i >= j.Shards || k > 0 && i <= j.Indices[k-1] {
			return fmt.Errorf("shards %v: want ascending indices below %d", j.Indices, j.Shards)
		}
	}
	return nil
}

// Asks says what each of the job's tasks asks the scheduler for, with the
// directives that ask it: "a whole node, all its CPUs and memory
// (--exclusive --mem=0)", "4 GPUs (--gres=gpu:4)", "4h0m0s
// (--time=04:00:00)".
func (j Job) Asks() []string {
	var asks []string
	add := func(what string, directives ...string) {
		asks = append(asks, what+" ("+strings.Join(directives, " ")+")")
	}
	switch {
	case j.Scheduler == Slurm && j.CPUsPerNode == 0 && j.MemBytes == 0:
		add("a whole node, all its CPUs and memory", "--exclusive", "--mem=0")
	case j.Scheduler == Slurm && j.CPUsPerNode == 0:
		add("all the CPUs of a node", "--exclusive")
	case j.Scheduler == Slurm:
		add(countOf(j.CPUsPerNode, "CPU"), fmt.Sprintf("--cpus-per-task=%d", j.CPUsPerNode))
	case j.Scheduler == SGE && j.CPUsPerNode > 0:
		add(countOf(j.CPUsPerNode, "CPU")+", cores of its own", fmt.Sprintf("-pe smp %d", j.CPUsPerNode), fmt.Sprintf("-binding linear:%d", j.CPUsPerNode))
	case j.Scheduler == PBS && j.CPUsPerNode == 0:
		add("a whole node", "-l place=excl")
	case j.Scheduler == PBS:
		add(countOf(j.CPUsPerNode, "CPU"), fmt.Sprintf("ncpus=%d", j.CPUsPerNode))
	}
	// How each scheduler writes GPUs, memory (in MiB) and the time limit.
	w := map[Scheduler][3]string{
		Slurm: {"--gres=gpu:%d", "--mem=%dM", "--time=%s"},
		SGE:   {"-l gpu=%d", "-l mem_free=%dM", "-l h_rt=%s"},
		PBS:   {"ngpus=%d", "mem=%dmb", "-l walltime=%s"},
	}[j.Scheduler]
	if j.GPUsPerNode > 0 {
		add(countOf(j.GPUsPerNode, "GPU"), fmt.Sprintf(w[0], j.GPUsPerNode))
	}
	if j.MemBytes > 0 {
		add(pack.FormatSize(j.MemBytes)+" of memory", fmt.Sprintf(w[1], mebibytes(j.MemBytes)))
	}
	switch {
	case j.Time == 0:
		asks = append(asks, "no time limit of its own (the queue's default)")
	case j.Scheduler == Slurm:
		add(j.Time.String(), fmt.Sprintf(w[2], slurmTime(j.Time)))
	default:
		add(j.Time.String(), fmt.Sprintf(w[2], clock(j.Time)))
	}
	return asks
}

// countOf writes "1 CPU", "4 CPUs".
func countOf(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

// Script returns the job's batch script.
func (j Job) Script() (string, error) {
	if err := j.check(); err != nil {
		return "", err
	}
	var b strings.Builder
	tasks := j.tasks()
	b.WriteString("#!/bin/bash\n")
	if j.Pool {
		fmt.Fprintf(&b, "# Written by nodepack submit: %s of the shared pool of the sweep in %s:\n", countOf(len(tasks), "array task"), j.Output)
		b.WriteString("# each claims runs of the whole sweep as its node frees. See it: nodepack status " + j.Output + "\n")
	} else {
		which := "shards " + spans(tasks)
		if len(tasks) == 1 {
			which = "shard " + spans(tasks)
		}
		fmt.Fprintf(&b, "# Written by nodepack submit: %s of %d of the sweep in %s,\n", which, j.Shards, j.Output)
		b.WriteString("# one array task each. See it: nodepack status " + j.Output + "\n")
	}
	b.WriteString("# Finish what is left: nodepack resubmit " + j.Output + "\n")
	prefix := map[Scheduler]string{Slurm: "#SBATCH ", SGE: "#$ ", PBS: "#PBS "}[j.Scheduler]
	var directives []string
	switch j.Scheduler {
	case Slurm:
		directives = j.slurmDirectives(len(tasks))
	case SGE:
		directives = j.sgeDirectives(len(tasks))
	case PBS:
		directives = j.pbsDirectives(len(tasks))
	}
	for _, d := range directives {
		b.WriteString(prefix + d + "\n")
	}
	for _, e := range j.Extra {
		if !strings.HasPrefix(e, strings.TrimSpace(prefix)) {
			e = prefix + e
		}
		b.WriteString(e + "\n")
	}
	b.WriteString("set -euo pipefail\n")
	b.WriteString("cd " + Quote(j.Dir) + "\n") // a word of its own: R&D, a(b) and w;{touch,x} are directories, not commands
	if !j.Pool {
		b.WriteString(j.shardLines(tasks))
	}
	b.WriteString(strings.Join(j.runArgv(), " ") + "\n")
	return b.String(), nil
}

// jobName is the job's name: Name, else nodepack.
func (j Job) jobName() string {
	if j.Name == "" {
		return "nodepack"
	}
	return j.Name
}

// logs is where the array tasks' logs go.
func (j Job) logs() string { return j.Output + "/jobs" }

// slurmDirectives are the #SBATCH lines of an array of n tasks.
func (j Job) slurmDirectives(n int) []string {
	d := []string{"--job-name=" + j.jobName(), fmt.Sprintf("--array=0-%d%s", n-1, throttle(j.Nodes, n, "%")), "--nodes=1"}
	if j.CPUsPerNode == 0 {
		d = append(d, "--exclusive") // every CPU of the node: Slurm gives a job that asks for none one CPU
	}
	if j.Time > 0 {
		d = append(d, "--time="+slurmTime(j.Time))
	}
	if j.GPUsPerNode > 0 {
		d = append(d, fmt.Sprintf("--gres=gpu:%d", j.GPUsPerNode))
	}
	if j.CPUsPerNode > 0 {
		d = append(d, fmt.Sprintf("--cpus-per-task=%d", j.CPUsPerNode))
	}
	switch {
	case j.MemBytes > 0:
		d = append(d, fmt.Sprintf("--mem=%dM", mebibytes(j.MemBytes)))
	case j.CPUsPerNode == 0:
		d = append(d, "--mem=0") // and all of its memory
	}
	if j.Partition != "" {
		d = append(d, "--partition="+j.Partition)
	}
	if j.Account != "" {
		d = append(d, "--account="+j.Account)
	}
	return append(d, fmt.Sprintf("--signal=B:USR1@%d", int(j.Warning().Seconds())), "--requeue", "--open-mode=append",
		"--output="+j.logs()+"/slurm-%A_%a.log")
}

// sgeDirectives are the #$ lines of an array of n tasks.
func (j Job) sgeDirectives(n int) []string {
	d := []string{"-N " + j.jobName(), fmt.Sprintf("-t 1-%d", n)}
	if t := throttle(j.Nodes, n, ""); t != "" {
		d = append(d, "-tc "+t)
	}
	d = append(d, "-S /bin/bash", "-V")
	if j.Time > 0 {
		d = append(d, "-l h_rt="+clock(j.Time))
	}
	if j.CPUsPerNode > 0 {
		d = append(d, fmt.Sprintf("-pe smp %d", j.CPUsPerNode),
			fmt.Sprintf("-binding linear:%d", j.CPUsPerNode)) // cores of the job's own, which nodepack uses
	}
	if j.GPUsPerNode > 0 {
		d = append(d, fmt.Sprintf("-l gpu=%d", j.GPUsPerNode))
	}
	if j.MemBytes > 0 {
		d = append(d, fmt.Sprintf("-l mem_free=%dM", mebibytes(j.MemBytes)))
	}
	d = append(d, j.queueAndAccount()...)
	return append(d, "-notify", "-r y", "-j y", "-o "+j.logs()+"/sge-$JOB_ID.$TASK_ID.log")
}

// pbsDirectives are the #PBS lines of an array of n tasks.
func (j Job) pbsDirectives(n int) []string {
	d := []string{"-N " + j.jobName()}
	if n > 1 {
		d = append(d, fmt.Sprintf("-J 0-%d%s", n-1, throttle(j.Nodes, n, "%")))
	}
	sel := "select=1"
	if j.CPUsPerNode > 0 {
		sel += fmt.Sprintf(":ncpus=%d", j.CPUsPerNode)
	}
	if j.GPUsPerNode > 0 {
		sel += fmt.Sprintf(":ngpus=%d", j.GPUsPerNode)
	}
	if j.MemBytes > 0 {
		sel += fmt.Sprintf(":mem=%dmb", mebibytes(j.MemBytes))
	}
	d = append(d, "-l "+sel)
	if j.CPUsPerNode == 0 {
		d = append(d, "-l place=excl") // the whole node, not the one CPU of a bare select
	}
	if j.Time > 0 {
		d = append(d, "-l walltime="+clock(j.Time))
	}
	d = append(d, j.queueAndAccount()...)
	return append(d, "-r y", "-j oe", "-o "+j.logs()+"/")
}

// queueAndAccount are Grid Engine's and PBS's -q and -A lines.
func (j Job) queueAndAccount() []string {
	var d []string
	if j.Partition != "" {
		d = append(d, "-q "+j.Partition)
	}
	if j.Account != "" {
		d = append(d, "-A "+j.Account)
	}
	return d
}

// shardLines set $shard to the shard the array task runs.
func (j Job) shardLines(tasks []int) string {
	// The array task's index, as bash arithmetic: 0, 1, … for each task.
	index := map[Scheduler]string{Slurm: "SLURM_ARRAY_TASK_ID", SGE: "SGE_TASK_ID - 1", PBS: "${PBS_ARRAY_INDEX:-0}"}[j.Scheduler]
	switch {
	case contiguous(tasks) && tasks[0] == 0:
		return fmt.Sprintf("shard=$((%s))\n", index)
	case contiguous(tasks):
		return fmt.Sprintf("shard=$((%d + %s))\n", tasks[0], index)
	}
	words := make([]string, len(tasks))
	for k, i := range tasks {
		words[k] = strconv.Itoa(i)
	}
	return fmt.Sprintf("shards=(%s)\nshard=${shards[%s]}\n", strings.Join(words, " "), index)
}

// runArgv is the array task's nodepack run line, its words quoted.
func (j Job) runArgv() []string {
	argv := []string{"exec", Quote(j.Nodepack), "run", "--output", Quote(j.Output), "--shard", `"$shard/` + strconv.Itoa(j.Shards) + `"`}
	if j.Pool {
		argv = []string{"exec", Quote(j.Nodepack), "run", "--output", Quote(j.Output), "--pool", "auto"}
	}
	if j.Scheduler != PBS {
		argv = append(argv, "--requeue") // nodepack requeues Slurm and Grid Engine jobs
	}
	if sb := j.StopBefore(); sb > 0 && !hasFlag(j.Run, "--stop-before") {
		argv = append(argv, "--stop-before", sb.String())
	}
	if j.RetryFailed {
		argv = append(argv, "--retry-failed")
	}
	for _, a := range j.Run {
		argv = append(argv, Quote(a))
	}
	return argv
}

// hasFlag reports whether args give flag, as --flag or --flag=….
func hasFlag(args []string, flag string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if a == flag || strings.HasPrefix(a, flag+"=") {
			return true
		}
	}
	return false
}

// throttle is the array's limit on tasks at once, after sep; "" when
// there is none or it is no limit.
func throttle(nodes, tasks int, sep string) string {
	if nodes <= 0 || nodes >= tasks {
		return ""
	}
	return sep + strconv.Itoa(nodes)
}

// contiguous reports whether indices are a run of consecutive numbers.
func contiguous(indices []int) bool {
	return indices[len(indices)-1]-indices[0] == len(indices)-1
}

// spans writes ascending indices as ranges: "0-2", "1,4-5".
func spans(indices []int) string {
	var parts []string
	for k := 0; k < len(indices); {
		end := k
		for end+1 < len(indices) && indices[end+1] == indices[end]+1 {
			end++
		}
		if end == k {
			parts = append(parts, strconv.Itoa(indices[k]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", indices[k], indices[end]))
		}
		k = end + 1
	}
	return strings.Join(parts, ",")
}

func mebibytes(b uint64) uint64 { return (b + 1<<20 - 1) >> 20 }

// clock writes d as HH:MM:SS, hours past 24 included, rounded up to the
// second.
func clock(d time.Duration) string {
	s := int64((d + time.Second - 1) / time.Second)
	return fmt.Sprintf("%02d:%02d:%02d", s/3600, s/60%60, s%60)
}

// slurmTime writes d as Slurm's [D-]HH:MM:SS.
func slurmTime(d time.Duration) string {
	s := int64((d + time.Second - 1) / time.Second)
	if s < 86400 {
		return clock(d)
	}
	return fmt.Sprintf("%d-%02d:%02d:%02d", s/86400, s/3600%24, s/60%60, s%60)
}

// ParseTime parses a time limit: a Go duration (4h, 90m) or the
// schedulers' [D-]HH:MM[:SS].
func ParseTime(s string) (time.Duration, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d <= 0 {
			return 0, fmt.Errorf("time %q: want more than 0", s)
		}
		if d > maxTime {
			return 0, fmt.Errorf("time %q: want at most 100 years", s)
		}
		return d, nil
	}
	bad := fmt.Errorf("time %q: want a duration (4h, 90m) or [D-]HH:MM[:SS]", s)
	days := 0
	rest := s
	if d, r, ok := strings.Cut(s, "-"); ok {
		n, err := strconv.Atoi(d)
		if err != nil || n < 0 {
			return 0, bad
		}
		days, rest = n, r
	}
	parts := strings.Split(rest, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return 0, bad
	}
	var v [3]int
	for k, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || len(p) == 0 || k > 0 && n > 59 {
			return 0, bad
		}
		v[k] = n
	}
	d := time.Duration(days)*24*time.Hour + time.Duration(v[0])*time.Hour + time.Duration(v[1])*time.Minute + time.Duration(v[2])*time.Second
	if d <= 0 || d > maxTime {
		return 0, bad
	}
	return d, nil
}

// maxTime is the longest time limit ParseTime takes, in either form: a
// limit it writes as [D-]HH:MM:SS reads back the same.
const maxTime = 100 * 365 * 24 * time.Hour

// Quote returns s as one bash word: as it is when that is safe, else in
// single quotes.
func Quote(s string) string {
	if s != "" && !strings.ContainsFunc(s, func(r rune) bool {
		return !(r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("-_./=:,+@%", r)))
	}) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
