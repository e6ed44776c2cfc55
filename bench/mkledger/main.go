// Command mkledger writes the ledger that nodepack run would leave after
// running the first N runs of a task file, without running them: the
// 1,000,000-record ledger of bench/scale.sh, in seconds rather than the
// hours its runs would take. Records are made by the ledger package's own
// Writer from the runs the runner's own source gives, so resume and
// status read what they would read after a real sweep.
//
// With -metrics, each run also has three parameters in its started record
// and, in its finished record, a loss and an accuracy with their curves of
// 12 points, as a sweep whose runs report per-step metrics leaves it.
//
//	go run ./bench/mkledger [-fail-every K] [-killed] [-metrics] TASKFILE OUTPUT N
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
	withMetrics := flag.Bool("metrics", false, "give every run parameters, and metrics with curves")
	flag.Parse()
	if flag.NArg() != 3 {
		fmt.Fprintln(os.Stderr, "usage: mkledger [-fail-every K] [-killed] [-metrics] TASKFILE OUTPUT N")
		os.Exit(2)
	}
	n, err := strconv.Atoi(flag.Arg(2))
	if err == nil {
		err = write(flag.Arg(0), flag.Arg(1), n, *failEvery, *killed, *withMetrics)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mkledger:", err)
		os.Exit(1)
	}
}

func write(tasks, output string, n, failEvery int, killed, withMetrics bool) error {
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
		if withMetrics {
			r.Params, _ = json.Marshal(map[string]any{"lr": []float64{1e-4, 3e-4, 1e-3, 3e-3, 1e-2}[i%5], "width": 64 << (i / 5 % 4), "opt": []string{"adam", "sgd", "lion"}[i/20%3]})
		}
		dir := run.Dir(output, r)
		ev := run.Event{Kind: run.Started, Run: r, Attempt: 1, Lane: i % 2, Place: pack.Assignment{CPUs: []int{i % 2}, Request: pack.Request{CPUs: 1}},
			Stdout: filepath.Join(dir, "stdout.log"), Stderr: filepath.Join(dir, "stderr.log"),
			Start: start.Add(time.Duration(i) * time.Millisecond), PID: 1000 + i}
		w.Post(ev, nil)
		ev.Kind, ev.End, ev.Reason = run.Finished, ev.Start.Add(time.Millisecond), run.OK
		if withMetrics {
			ev.Metrics, ev.Curves = metricsOf(i)
		}
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

// metricsOf makes run i's final loss and accuracy and their curves of 12
// points, as metrics.Report writes them.
func metricsOf(i int) (final, curves json.RawMessage) {
	floor := 0.2 + float64(i%97)/100
	var loss, acc []string
	for k := range 12 {
		step := k * 100
		l := floor + 2*math.Exp(-float64(step)/300)
		loss = append(loss, fmt.Sprintf("[%d,%.4g]", step, l))
		acc = append(acc, fmt.Sprintf("[%d,%.4g]", step, 1-l/3))
	}
	l := floor + 2*math.Exp(-1100.0/300)
	final = json.RawMessage(fmt.Sprintf(`{"loss":%.6g,"acc":%.6g}`, l, 1-l/3))
	curves = json.RawMessage(`{"loss":[` + strings.Join(loss, ",") + `],"acc":[` + strings.Join(acc, ",") + `]}`)
	return final, curves
}
