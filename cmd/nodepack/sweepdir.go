package main

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

	"github.com/nodepack/nodepack/resources"
	"github.com/nodepack/nodepack/runner"
)

// defaultOutput is the output directory when -o is not given:
// nodepack-<name>-<key> from the sweep's definition (the name of its
// source or program, and a hash of what defines it), so that two
// different sweeps started in one directory never share one by accident,
// while the same sweep run again (grown, or with more reps) finds its own.
//
// Inside a batch job the job id comes first, nodepack-<job id>-<name>-<key>,
// which a requeued job (same id) finds again. The tasks of a Slurm array
// have job ids of their own, so a sharded array uses the array's id
// (SLURM_ARRAY_JOB_ID): all shards share the directory, each with its own
// ledger file. An array that is not sharded runs the same runs in every
// task, so each task gets its own directory, <array id>_<task id> as
// Slurm's %A_%a names them.
func defaultOutput(s resources.Scheduler, def runner.Definition, sharded bool) string {
	name := "nodepack-"
	if id := batchID(s, sharded); id != "" {
		name += id + "-"
	}
	return name + definitionLabel(def) + "-" + def.Key()
}

// batchID is the part of the default output directory that names the
// batch job; "" outside one.
func batchID(s resources.Scheduler, sharded bool) string {
	id := s.JobID
	if id == "" {
		return ""
	}
	switch {
	case s.Kind == resources.SchedulerSlurm && s.ArrayJobID != "" && s.Array != nil:
		id = s.ArrayJobID
		if !sharded {
			id += "_" + strconv.Itoa(s.Array.Index)
		}
	case s.Array != nil && !sharded && (s.Kind == resources.SchedulerSGE || s.Kind == resources.SchedulerLSF):
		// SGE's JOB_ID and LSF's LSB_JOBID are the array's; PBS's job id
		// already names the array element.
		id += "_" + strconv.Itoa(s.Array.Index)
	}
	return runner.SafeName(id, 64)
}

// definitionLabel is a short readable name for a sweep: its file's name
// without the extension, or for a --sweep the script it runs.
func definitionLabel(def runner.Definition) string {
	label := ""
	switch {
	case def.Source == "-":
		label = "stdin"
	case def.Source != "":
		label = strings.TrimSuffix(def.Source, filepath.Ext(def.Source))
	default:
		label = "sweep"
		for _, a := range def.Command {
			if ext := filepath.Ext(a); len(ext) > 1 && len(ext) <= 5 && !strings.ContainsAny(a, "= \t{") {
				label = strings.TrimSuffix(filepath.Base(a), ext)
				break
			}
		}
	}
	if label = runner.SafeName(label, 32); label == "" {
		label = def.Kind
	}
	return label
}

// predictSharded says, before the runs are counted, whether --shard will
// split the sweep: the default output directory depends on it.
func predictSharded(spec string, s resources.Scheduler) bool {
	switch spec {
	case "none":
		return false
	case "", "auto":
		return s.Array != nil || s.Tasks != nil && s.Tasks.Count > 1
	}
	sh, err := runner.ParseShard(spec)
	return err == nil && sh.Count > 1
}

// pastSweep is what an output directory holds from earlier sessions: its
// ledgers, read before anything is locked or written.
type pastSweep struct {
	dir  string
	logs map[string]*runner.LedgerLog // by file name
}

// readPast reads every ledger in dir; a directory that does not exist yet
// holds none.
func readPast(dir string) (*pastSweep, error) {
	p := &pastSweep{dir: dir, logs: map[string]*runner.LedgerLog{}}
	files, err := runner.LedgerFiles(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return p, nil
	}
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		log, err := runner.ReadLedgerFile(f)
		if err != nil {
			return nil, err
		}
		p.logs[filepath.Base(f)] = log
	}
	return p, nil
}

// knows reports whether any ledger has a record of the run.
func (p *pastSweep) knows(id string) bool {
	for _, log := range p.logs {
		if log.Runs[id] != nil {
			return true
		}
	}
	return false
}

// log returns the ledger of one file; an empty one if there is none.
func (p *pastSweep) log(file string) *runner.LedgerLog {
	if log := p.logs[file]; log != nil {
		return log
	}
	return &runner.LedgerLog{Runs: map[string]*runner.LedgerRun{}}
}

// sameSweep checks that the directory's ledgers hold the sweep def (of
// shard.Count shards), so that what they say done was done with this
// definition. It returns, one phrase each, what changed; nil when the
// sweep may resume.
func (p *pastSweep) sameSweep(def runner.Definition, shard runner.Shard) []string {
	for _, file := range sortedKeys(p.logs) {
		log := p.logs[file]
		if len(log.Sessions) == 0 {
			continue
		}
		h := log.Header()
		if h.Sweep != nil {
			if changes := def.Changes(*h.Sweep); len(changes) > 0 {
				return changes
			}
			continue
		}
		// A ledger from before definitions were recorded: at least the
		// shards must agree.
		if count := shardCount(h); count != max(shard.Count, 1) {
			return []string{fmt.Sprintf("%s is a shard of %d, this sweep has %d", file, count, max(shard.Count, 1))}
		}
	}
	return nil
}

func shardCount(h runner.LedgerRecord) int {
	if h.Shard == nil {
		return 1
	}
	return max(h.Shard.Count, 1)
}

// retired returns the runs a shard's ledger knows that are not part of
// this sweep's shard (seen holds the index of every run of the sweep that
// some ledger knows), in the ledger's order, and whether the ledger knew
// runs and none of them is part of it: another sweep altogether.
func retired(log *runner.LedgerLog, seen map[string]int, shard runner.Shard) (ids []string, none bool) {
	for _, id := range log.Order {
		if index, ok := seen[id]; !ok || !shard.Contains(index) {
			ids = append(ids, id)
		}
	}
	return ids, len(log.Order) > 0 && len(ids) == len(log.Order)
}

// anotherSweep is the error for a directory that holds a different sweep.
func anotherSweep(dir string, what []string) error {
	return fmt.Errorf("%s holds another sweep: %s; --restart starts over (the old ledger is kept as a backup), or choose another -o",
		dir, strings.Join(what, "; "))
}

// checkProgram checks before anything starts that the program every run
// starts can be found: a missing one would fail every run with exit 127
// and an empty log.
func checkProgram(what, name string) error {
	if name == "" || strings.ContainsAny(name, "{}") {
		return nil // a placeholder: filled in per run
	}
	if _, err := lookPath(name); err != nil {
		return fmt.Errorf("%s: program %q not found: %w", what, name, err)
	}
	return nil
}

// lookPath is exec.LookPath that also accepts an executable file named
// with a directory (./prog).
func lookPath(name string) (string, error) {
	if strings.Contains(name, "/") {
		st, err := os.Stat(name)
		if err != nil {
			return "", err
		}
		if st.IsDir() || st.Mode()&0o111 == 0 {
			return "", errors.New("not an executable file")
		}
		return name, nil
	}
	return exec.LookPath(name)
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
