package runner

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/nodepack/nodepack/runner/execute"
	"github.com/nodepack/nodepack/runner/run"
	"github.com/nodepack/nodepack/runner/sweep"
)

// answerAsks is the searcher of the benchmark (this test binary, run with
// NODEPACK_TEST_SEARCHER=1): it answers every ask at once with a new
// {"x": N} and reads the rest.
func answerAsks(in io.Reader, out io.Writer) int {
	w := bufio.NewWriter(out)
	sc := bufio.NewScanner(in)
	n := 0
	for sc.Scan() {
		var msg struct{ Type string }
		if json.Unmarshal(sc.Bytes(), &msg) != nil {
			return 2
		}
		if msg.Type == "ask" {
			n++
			fmt.Fprintf(w, "{\"x\": %d}\n", n)
			w.Flush()
		}
	}
	return 0
}

// BenchmarkSearchPipe is the cost of the pipe per run: one ask, its
// answer read and made a run, and the run's end told, with a searcher
// that answers at once. cpu-µs/run is nodepack's own CPU time (user and
// system, this process: the searcher's is its own) per run; the target is
// at most 1000 (1 ms).
func BenchmarkSearchPipe(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	b.Setenv("NODEPACK_TEST_SEARCHER", "1")
	dir := b.TempDir()
	sw, err := Prepare(Options{Source: sweep.Spec{Search: "exec " + exe, Command: []string{"train", "--lr=0.1"}},
		Output: filepath.Join(dir, "out"), Plan: oneSlot, Execute: execute.Options{Process: execute.Process{TempDir: dir}}})
	if err != nil {
		b.Fatal(err)
	}
	defer sw.Close()
	os.MkdirAll(sw.Output(), 0o755)
	sr, err := sw.openSearch(context.Background(), 1)
	if err != nil {
		b.Fatal(err)
	}
	defer sr.close()
	metrics := json.RawMessage(`{"loss": 0.25}`)
	var before syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	b.ResetTimer()
	for range b.N {
		r, ok, err := sr.next()
		if err != nil || !ok {
			b.Fatalf("next: %v %v", ok, err)
		}
		sr.recorded(run.Event{Kind: run.Finished, Run: r, Reason: run.OK, Metrics: metrics, Steps: &run.Steps{First: 1, Last: 20}})
	}
	b.StopTimer()
	var after syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	cpu := time.Duration(after.Utime.Nano()-before.Utime.Nano()) + time.Duration(after.Stime.Nano()-before.Stime.Nano())
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/run")
}
