package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/nodepack/nodepack/runner"
	"github.com/spf13/pflag"
	"golang.org/x/term"
)

const statusUsage = `Usage: nodepack status [--json] [--watch [D]] DIR

Shows the progress of the sweep whose output directory is DIR, from its
ledgers (all shards together), while it runs or after: how many runs are
pending, running, succeeded, failed and interrupted; the running ones with
their slot, GPUs, CPUs and time so far; the failed ones with exit code and
log; and, while it runs, the throughput and an estimate of the time left.
It only reads DIR, so it works from any shell that sees the file system (a
login node). A run the ledger shows running whose nodepack is gone (checked
when DIR's sweep runs on this host) is shown as interrupted.

--json prints a nodepack.status/v1 document; its "counts" object always
holds pending, running, succeeded, failed and interrupted. Exit status 0,
or 2 when DIR holds no ledger or a ledger is corrupt.

Examples:
  nodepack status nodepack-123456
  nodepack status --watch 10s nodepack-out
  nodepack status --json nodepack-out | jq .counts`

// statusFormat names the --json document's schema.
const statusFormat = "nodepack.status/v1"

// statusDoc is the --json document.
type statusDoc struct {
	Format string        `json:"format"`
	Dir    string        `json:"dir"`
	Time   time.Time     `json:"time"`
	Total  *int          `json:"total"` // null when a shard's source did not know it
	Counts statusCounts  `json:"counts"`
	Shards []statusShard `json:"shards"`
	// Running lists the running runs, oldest first.
	Running []statusRun `json:"running"`
	// Failures lists the failed runs.
	Failures []statusRun `json:"failures"`
	// RunsPerHour is the rate at which the live sessions finish runs; 0 when
	// none is live. ETASeconds estimates the time left; null when unknown.
	RunsPerHour float64  `json:"runs_per_hour"`
	ETASeconds  *float64 `json:"eta_s"`
}

type statusCounts struct {
	Pending     int `json:"pending"`
	Running     int `json:"running"`
	Succeeded   int `json:"succeeded"`
	Failed      int `json:"failed"`
	Interrupted int `json:"interrupted"`
}

type statusShard struct {
	File     string    `json:"file"`
	Index    int       `json:"index"`
	Count    int       `json:"count"`
	State    string    `json:"state"`           // running, ended, gone (its nodepack ended without an end record), unknown (running elsewhere, or gone there), or other sweep (not counted)
	Sweep    string    `json:"sweep,omitempty"` // the key of the sweep's definition
	Host     string    `json:"host"`
	PID      int       `json:"pid"`
	Started  time.Time `json:"started"`
	Sessions int       `json:"sessions"`
	Note     string    `json:"note,omitempty"` // the end record's
	Deferred int       `json:"deferred,omitempty"`
	Torn     bool      `json:"torn,omitempty"` // a record was being written
}

type statusRun struct {
	ID       string    `json:"id"`
	Origin   string    `json:"origin,omitempty"`
	Attempt  int       `json:"attempt"`
	Slot     int       `json:"slot"`
	GPUs     []string  `json:"gpus"`
	CPUs     string    `json:"cpus"`
	Host     string    `json:"host,omitempty"`
	Started  time.Time `json:"started"`
	Elapsed  float64   `json:"elapsed_s,omitempty"` // running ones
	ExitCode *int      `json:"exit_code,omitempty"` // failed ones
	Signal   string    `json:"signal,omitempty"`
	Reason   string    `json:"reason,omitempty"`
	Error    string    `json:"error,omitempty"`
	Stdout   string    `json:"stdout,omitempty"`
	Stderr   string    `json:"stderr,omitempty"`
}

func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("status", pflag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print a nodepack.status/v1 document")
	watch := fs.Duration("watch", 0, "refresh every `D` until interrupted (--watch alone: 2s)")
	fs.Lookup("watch").NoOptDefVal = "2s"
	if code, ok := parseFlags(fs, statusUsage, watchValue(args), stdout, stderr); !ok {
		return code
	}
	if fs.NArg() != 1 {
		return usageErrorf(stderr, "status", "want one DIR, got %d arguments", fs.NArg())
	}
	if *watch < 0 {
		return usageErrorf(stderr, "status", "--watch %v: must not be negative", *watch)
	}
	dir := fs.Arg(0)
	clear := false
	if f, ok := stdout.(*os.File); ok && *watch > 0 && !*asJSON && term.IsTerminal(int(f.Fd())) {
		clear = true
	}
	for {
		doc, err := readStatus(dir, time.Now())
		if err != nil {
			return usageErrorf(stderr, "status", "%v", err)
		}
		if clear {
			fmt.Fprint(stdout, "\x1b[H\x1b[2J")
		}
		if *asJSON {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			enc.Encode(doc)
		} else {
			printStatus(stdout, doc)
		}
		if *watch == 0 {
			return exitOK
		}
		select {
		case <-ctx.Done():
			return exitOK
		case <-time.After(*watch):
		}
		if !clear && !*asJSON {
			fmt.Fprintln(stdout)
		}
	}
}

// watchValue joins "--watch D" into "--watch=D": --watch alone means 2s,
// so pflag would take D for the directory. D joins when it reads as a
// duration and another argument is left for the directory.
func watchValue(args []string) []string {
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "--" {
			break
		}
		if args[i] != "--watch" {
			continue
		}
		if _, err := time.ParseDuration(args[i+1]); err != nil {
			continue
		}
		rest := 0
		for _, a := range append(slices.Clone(args[:i]), args[i+2:]...) {
			if !strings.HasPrefix(a, "-") {
				rest++
			}
		}
		if rest > 0 {
			joined := append(slices.Clone(args[:i]), "--watch="+args[i+1])
			return append(joined, args[i+2:]...)
		}
	}
	return args
}

// readStatus reads every ledger in dir. A line being written (no newline
// yet) is not there yet; any other bad line is an error naming it. Only
// the runs of the directory's sweep are counted: a run its last session
// retired is not, nor a shard ledger that holds another sweep (which
// nodepack run refuses to make, but an older one may have), and the counts
// add up to the total.
func readStatus(dir string, now time.Time) (*statusDoc, error) {
	files, err := runner.LedgerFiles(dir)
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: no ledger (ledger*.jsonl): not a nodepack output directory, or nothing started yet", dir)
	}
	logs := make(map[string]*runner.LedgerLog, len(files))
	var current *runner.LedgerRecord // the newest header: the directory's sweep
	for _, file := range files {
		log, err := runner.ReadLedgerFile(file)
		if err != nil {
			return nil, err
		}
		logs[file] = log
		if len(log.Sessions) > 0 {
			if h := log.Header(); current == nil || h.Time.After(current.Time) {
				current = &h
			}
		}
	}
	host, _ := os.Hostname()
	doc := &statusDoc{Format: statusFormat, Dir: dir, Time: now.UTC(), Running: []statusRun{}, Failures: []statusRun{}, Shards: []statusShard{}}
	total, totalKnown := 0, true
	left := 0 // runs not finished for good: pending, running, interrupted
	for _, file := range files {
		log := logs[file]
		if len(log.Sessions) == 0 {
			continue // created, header not written yet
		}
		h := log.Header()
		sh := statusShard{File: filepath.Base(file), Index: 0, Count: 1, Host: h.Host, PID: h.PID, Started: h.Time,
			Sessions: len(log.Sessions), Torn: log.Torn > 0}
		if h.Shard != nil {
			sh.Index, sh.Count = h.Shard.Index, h.Shard.Count
		}
		if h.Sweep != nil {
			sh.Sweep = h.Sweep.Key()
		}
		switch {
		case log.End != nil:
			sh.State, sh.Note, sh.Deferred = "ended", log.End.Note, log.End.Deferred
		case h.Host == host && !processAlive(h.PID):
			sh.State = "gone"
			log.Stop()
		case h.Host == host:
			sh.State = "running"
		default:
			sh.State = "unknown" // running on another host, or killed there
		}
		if otherSweep(h, *current) {
			sh.State = "other sweep"
			doc.Shards = append(doc.Shards, sh)
			continue
		}
		doc.Shards = append(doc.Shards, sh)

		c := log.Count()
		doc.Counts.Running += c[runner.StateRunning]
		doc.Counts.Succeeded += c[runner.StateSucceeded]
		doc.Counts.Failed += c[runner.StateFailed]
		doc.Counts.Interrupted += c[runner.StateInterrupted]
		if h.Total != nil && *h.Total >= 0 {
			total += *h.Total
			doc.Counts.Pending += max(0, *h.Total-log.Members())
		} else {
			totalKnown = false
		}
		left += c[runner.StateRunning] + c[runner.StateInterrupted]

		finished := 0 // in the last session
		session := len(log.Sessions) - 1
		for _, run := range log.SortedRuns() {
			if run.Retired {
				continue
			}
			switch run.State {
			case runner.StateRunning:
				doc.Running = append(doc.Running, statusRunOf(dir, run, now))
			case runner.StateFailed:
				doc.Failures = append(doc.Failures, statusRunOf(dir, run, now))
			}
			if run.Session == session && run.Finished != nil && (run.State == runner.StateSucceeded || run.State == runner.StateFailed) {
				finished++
			}
		}
		if sh.State == "running" || sh.State == "unknown" {
			if elapsed := now.Sub(h.Time).Hours(); elapsed > 0 && finished > 0 {
				doc.RunsPerHour += float64(finished) / elapsed
			}
		}
	}
	if totalKnown {
		doc.Total = &total
		left += doc.Counts.Pending
		if doc.RunsPerHour > 0 {
			eta := float64(left) / doc.RunsPerHour * 3600
			doc.ETASeconds = &eta
		}
	}
	slices.SortFunc(doc.Running, func(a, b statusRun) int { return a.Started.Compare(b.Started) })
	return doc, nil
}

// otherSweep reports whether a shard ledger's last header h belongs to
// another sweep than current, the directory's newest header.
func otherSweep(h, current runner.LedgerRecord) bool {
	switch {
	case h.Sweep != nil && current.Sweep != nil:
		return h.Sweep.Key() != current.Sweep.Key() || max(h.Sweep.Shards, 1) != max(current.Sweep.Shards, 1)
	case h.Sweep == nil && current.Sweep == nil:
		return shardCount(h) != shardCount(current)
	}
	return false // a ledger from before definitions were recorded: assumed the same
}

// processAlive reports whether pid exists on this host.
func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

func statusRunOf(dir string, run *runner.LedgerRun, now time.Time) statusRun {
	s := statusRun{ID: run.ID, Attempt: run.Attempts, GPUs: []string{}}
	if st := run.Started; st != nil {
		s.Origin, s.GPUs, s.CPUs, s.Host, s.Started = st.Origin, st.GPUs, st.CPUs, st.Host, st.Time
		if st.Slot != nil {
			s.Slot = *st.Slot
		}
		if s.GPUs == nil {
			s.GPUs = []string{}
		}
		s.Stdout, s.Stderr = logPath(dir, st.Stdout), logPath(dir, st.Stderr)
	}
	if run.State == runner.StateRunning && run.Started != nil {
		s.Elapsed = now.Sub(run.Started.Time).Round(time.Millisecond).Seconds()
	}
	if fin := run.Finished; fin != nil && run.State == runner.StateFailed {
		s.ExitCode, s.Signal, s.Reason, s.Error = fin.ExitCode, fin.Signal, string(fin.Reason), fin.Error
		if s.Origin == "" {
			s.Origin = fin.Origin
		}
		if s.Stderr == "" {
			s.Stdout, s.Stderr = logPath(dir, fin.Stdout), logPath(dir, fin.Stderr)
		}
		if s.Slot == 0 && fin.Slot != nil {
			s.Slot = *fin.Slot
		}
	}
	return s
}

// logPath turns a ledger's log path (relative to its directory) into one
// usable from here.
func logPath(dir, p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}

func printStatus(w io.Writer, doc *statusDoc) {
	c := doc.Counts
	total := "?"
	if doc.Total != nil {
		total = fmt.Sprint(*doc.Total)
	}
	fmt.Fprintf(w, "%s: %s %s: %d succeeded, %d failed, %d interrupted, %d running, %d pending\n",
		doc.Dir, total, plural(c.Succeeded+c.Failed+c.Interrupted+c.Running+c.Pending, "run"), c.Succeeded, c.Failed, c.Interrupted, c.Running, c.Pending)
	for _, sh := range doc.Shards {
		fmt.Fprintf(w, "  %s (shard %d/%d): %s", sh.File, sh.Index, sh.Count, sh.State)
		switch sh.State {
		case "ended":
			fmt.Fprintf(w, ": %s", sh.Note)
			if sh.Deferred > 0 {
				fmt.Fprintf(w, ", %d deferred", sh.Deferred)
			}
		case "gone":
			fmt.Fprintf(w, ": nodepack (pid %d) ended without an end record (killed, or its node went down); rerun to resume", sh.PID)
		case "other sweep":
			fmt.Fprintf(w, ": holds another sweep than the newest ledger here, not counted")
		default:
			fmt.Fprintf(w, " on %s (pid %d) since %s", sh.Host, sh.PID, sh.Started.Local().Format(time.DateTime))
		}
		fmt.Fprintln(w)
	}
	if len(doc.Running) > 0 {
		fmt.Fprintln(w, "running:")
		for _, r := range doc.Running {
			gpus := strings.Join(r.GPUs, ",")
			if gpus == "" {
				gpus = "none"
			}
			fmt.Fprintf(w, "  %s  attempt %d  slot %d  gpus %s  cpus %s  %v  %s\n", r.ID, r.Attempt, r.Slot, gpus, r.CPUs,
				time.Duration(r.Elapsed*float64(time.Second)).Round(time.Second), r.Origin)
		}
	}
	if len(doc.Failures) > 0 {
		fmt.Fprintln(w, "failed:")
		for _, r := range doc.Failures {
			exit := "?"
			if r.ExitCode != nil {
				exit = fmt.Sprint(*r.ExitCode)
			}
			fmt.Fprintf(w, "  %s  exit %s (%s)  %s  %s\n", r.ID, exit, r.Reason, r.Origin, r.Stderr)
		}
	}
	if doc.RunsPerHour > 0 {
		fmt.Fprintf(w, "throughput %.1f runs/h", doc.RunsPerHour)
		if doc.ETASeconds != nil {
			fmt.Fprintf(w, ", about %v left", time.Duration(*doc.ETASeconds*float64(time.Second)).Round(time.Second))
		}
		fmt.Fprintln(w)
	}
}
