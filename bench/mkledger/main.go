// Command mkledger writes the ledger that nodepack run would leave after
// running the first N runs of a task file, without running them: the
// 1,000,000-record ledger of bench/scale.sh, in seconds rather than the
// hours its runs would take. Records are made by the ledger package's own
// Writer from the runs the runner's own source gives, so resume and
// status read what they would read after a real sweep.
//
//	go run ./bench/mkledger [-fail-every K] [-killed] TASKFILE OUTPUT N
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/runner"
	"github.com/nodepack/nodepack/runner/ledger"
	"github.com/nodepack/nodepack/runner/run"
	"github.com/nodepack/nodepack/runner/sweep"
)

func main() {
	failEvery := flag.Int("fail-every", 0, "make every K-th run fail (exit 1)")
	killed := flag.Bool("killed", false, "leave the session without its end record, as a kill -9 does")
	flag.Parse()
	if flag.NArg() != 3 {
		fmt.Fprintln(os.Stderr, "usage: mkledger [-fail-every K] [-killed] TASKFILE OUTPUT N")
		os.Exit(2)
	}
	n, err := strconv.Atoi(flag.Arg(2))
	if err == nil {
		err = write(flag.Arg(0), flag.Arg(1), n, *failEvery, *killed)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mkledger:", err)
		os.Exit(1)
	}
}

func write(tasks, output string, n, failEvery int, killed bool) error {
	output, err := filepath.Abs(output)
	if err != nil {
		return err
	}
	sw, err := runner.Prepare(runner.Options{Source: sweep.Spec{TaskFile: tasks}, Output: output, Shard: "none", Restart: true})
	if err != nil {
		return err
	}
	defer sw.Close()
	if err := os.MkdirAll(output, 0o755); err != nil {
		return err
	}
	w, err := ledger.Open(filepath.Join(output, ledger.FileName(0, 1)), true)
	if err != nil {
		return err
	}
	shard, _ := sw.Shard()
	total, _ := sw.Total()
	def := sw.Definition()
	if err := w.WriteHeader(ledger.Record{Shard: &shard, Total: &total, Sweep: &def}); err != nil {
		return err
	}
	start := time.Now()
	i := 0
	for r, err := range sw.Runs() {
		if err != nil {
			return err
		}
		if i == n {
			break
		}
		dir := run.Dir(output, r)
		ev := run.Event{Kind: run.Started, Run: r, Attempt: 1, Lane: i % 2, Place: pack.Assignment{CPUs: []int{i % 2}, Request: pack.Request{CPUs: 1}},
			Stdout: filepath.Join(dir, "stdout.log"), Stderr: filepath.Join(dir, "stderr.log"),
			Start: start.Add(time.Duration(i) * time.Millisecond), PID: 1000 + i}
		w.Post(ev, nil)
		ev.Kind, ev.End, ev.Reason = run.Finished, ev.Start.Add(time.Millisecond), run.OK
		if failEvery > 0 && i%failEvery == failEvery-1 {
			ev.ExitCode, ev.Reason = 1, run.Failed
		}
		w.Post(ev, nil)
		i++
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if !killed {
		if err := w.WriteEnd("stopped by SIGTERM", total-i); err != nil {
			return err
		}
	}
	return w.Close()
}
