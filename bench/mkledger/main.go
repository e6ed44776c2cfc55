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
// With -shards S, it writes the S shard ledgers an array of S tasks
// would leave (ledger-I-of-S.jsonl), each with the first N runs of its
// shard, as bench/shards.sh reads them.
//
// With -pool T, it writes the ledgers T tasks of a shared pool would
// leave (ledger-pool-tK.jsonl), the first N runs of the sweep dealt out
// in claims of 256 runs, task after task; with -takeover also a claims
// folder whose first claim was taken over, so that the readers fold every
// run across the ledgers (bench/pool.sh).
//
//	go run ./bench/mkledger [-fail-every K] [-killed] [-metrics] [-shards S | -pool T [-takeover]] TASKFILE OUTPUT N
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
	shards := flag.Int("shards", 1, "write this many shard ledgers, each with the first N runs of its shard")
	pool := flag.Int("pool", 0, "write this many pool tasks' ledgers, the first N runs dealt out in claims of 256")
	takeover := flag.Bool("takeover", false, "with -pool, a claims folder whose first claim was taken over")
	flag.Parse()
	if flag.NArg() != 3 {
		fmt.Fprintln(os.Stderr, "usage: mkledger [-fail-every K] [-killed] [-metrics] [-shards S] TASKFILE OUTPUT N")
		os.Exit(2)
	}
	n, err := strconv.Atoi(flag.Arg(2))
	if err == nil {
		if *pool > 0 {
			err = writePool(flag.Arg(0), flag.Arg(1), n, *pool, *failEvery, *killed, *takeover)
		} else {
			err = write(flag.Arg(0), flag.Arg(1), n, max(*shards, 1), *failEvery, *killed, *withMetrics)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mkledger:", err)
		os.Exit(1)
	}
}

// prepare reads the task file's sweep for output, made absolute.
func prepare(tasks, output string) (string, *runner.Sweep, error) {
	output, err := filepath.Abs(output)
	if err != nil {
		return "", nil, err
	}
	sw, err := runner.Prepare(runner.Options{Source: sweep.Spec{TaskFile: tasks}, Output: output, Shard: "none", Restart: true})
	return output, sw, err
}

func write(tasks, output string, n, shards, failEvery int, killed, withMetrics bool) error {
	// One pass over the source, whatever the number of shards: each
	// shard's first n runs, in order.
	output, sw, err := prepare(tasks, output)
	if err != nil {
		return err
	}
	defer sw.Close()
	total, _ := sw.Total()
	def := sw.Definition()
	if shards > 1 {
		def.Shards = shards
	}
	runs := make([][]run.Run, shards)
	for r, err := range sw.Runs() {
		if err != nil {
			return err
		}
		if s := r.Index % shards; len(runs[s]) < n {
			runs[s] = append(runs[s], r)
		}
	}
	if err := os.MkdirAll(output, 0o755); err != nil {
		return err
	}
	for i := range shards {
		shard := sweep.Shard{Index: i, Count: shards}
		if shards == 1 {
			shard = sweep.Shard{}
		}
		if err := writeShard(output, shard, shard.Size(total), def, runs[i], failEvery, killed, withMetrics); err != nil {
			return err
		}
		runs[i] = nil
	}
	return nil
}

// writePool writes the ledgers of tasks tasks of a pool that ran the
// first n runs of the sweep, in claims of 256 dealt out task after task.
func writePool(tasks, output string, n, count, failEvery int, killed, takeover bool) error {
	output, sw, err := prepare(tasks, output)
	if err != nil {
		return err
	}
	defer sw.Close()
	total, _ := sw.Total()
	def := sw.Definition()
	runs := make([][]run.Run, count)
	for r, err := range sw.Runs() {
		if err != nil {
			return err
		}
		if r.Index >= n {
			break
		}
		k := r.Index / 256 % count
		runs[k] = append(runs[k], r)
	}
	if err := os.MkdirAll(output, 0o755); err != nil {
		return err
	}
	if takeover {
		claims := filepath.Join(output, "claims")
		if err := os.MkdirAll(claims, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(claims, "0.1"), []byte(`{"task":"t1","to":256,"sweep":"`+def.Key()+`"}`+"\n"), 0o644); err != nil {
			return err
		}
	}
	for k := range count {
		if err := writeLedger(filepath.Join(output, ledger.PoolFileName(fmt.Sprintf("t%d", k))), fmt.Sprintf("t%d", k), sweep.Shard{Index: 0, Count: 1}, total, def, runs[k], failEvery, killed, false); err != nil {
			return err
		}
		runs[k] = nil
	}
	return nil
}

// writeShard writes one shard's ledger: runs as started and finished.
func writeShard(output string, shard sweep.Shard, total int, def sweep.Definition, runs []run.Run, failEvery int, killed, withMetrics bool) error {
	return writeLedger(filepath.Join(output, ledger.FileName(shard.Index, shard.Count)), "", shard, total, def, runs, failEvery, killed, withMetrics)
}

// writeLedger writes a ledger at path, of pool task pool if not "": runs
// as started and finished.
func writeLedger(path, pool string, shard sweep.Shard, total int, def sweep.Definition, runs []run.Run, failEvery int, killed, withMetrics bool) error {
	output := filepath.Dir(path)
	w, err := ledger.Open(path, true)
	if err != nil {
		return err
	}
	if err := w.WriteHeader(ledger.Header{Shard: &shard, Pool: pool, Total: &total, Sweep: &def}); err != nil {
		return err
	}
	start := time.Now()
	for i, r := range runs {
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
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if !killed {
		if err := w.WriteEnd("stopped by SIGTERM", total-len(runs)); err != nil {
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
