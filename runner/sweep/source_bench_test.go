package sweep

import (
	"bufio"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/runner/run"
)

// BenchmarkSourceStream streams a 1,000,000-line params file and task file
// through their sources (with IDs, templating and a shard filter, as
// nodepack run does) and reports the time from opening the file to the
// first run, the throughput, and the peak heap above the start (sampled
// every 50,000 runs; it includes the ID set's few tens of bytes per run).
// Run it with -benchtime=1x: every iteration reads the whole file.
func BenchmarkSourceStream(b *testing.B) {
	const lines = 1_000_000
	dir := b.TempDir()
	write := func(name string, line func(w *bufio.Writer, i int)) string {
		path := filepath.Join(dir, name)
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		w := bufio.NewWriter(f)
		for i := range lines {
			line(w, i)
		}
		if err := w.Flush(); err != nil {
			b.Fatal(err)
		}
		f.Close()
		return path
	}
	params := write("runs.jsonl", func(w *bufio.Writer, i int) {
		fmt.Fprintf(w, `{"lr": %g, "seed": %d, "name": "run %d"}`+"\n", 1/float64(i+1), i, i)
	})
	tasks := write("tasks.txt", func(w *bufio.Writer, i int) {
		fmt.Fprintf(w, "python train.py --seed=%d --lr=%g\n", i, 1/float64(i+1))
	})
	opts := expandOptions{Shard: Shard{Index: 0, Count: 2}, OutputDir: "/out"}
	for _, tc := range []struct {
		name string
		open func(f *os.File) iter.Seq2[run.Run, error]
	}{
		{"params", func(f *os.File) iter.Seq2[run.Run, error] {
			seq, err := readParams(bufio.NewReaderSize(f, 1<<20), "runs.jsonl", []string{"python", "train.py", "--out={run_dir}"}, opts)
			if err != nil {
				b.Fatal(err)
			}
			return seq
		}},
		{"taskfile", func(f *os.File) iter.Seq2[run.Run, error] {
			return expand(readTaskFile(bufio.NewReaderSize(f, 1<<20), "tasks.txt", pack.Request{}), opts)
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			path := map[string]string{"params": params, "taskfile": tasks}[tc.name]
			var first, total time.Duration
			var peak uint64
			n := 0
			for b.Loop() {
				runtime.GC()
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				base := ms.HeapAlloc
				start := time.Now()
				f, err := os.Open(path)
				if err != nil {
					b.Fatal(err)
				}
				n = 0
				for _, err := range tc.open(f) {
					if err != nil {
						b.Fatal(err)
					}
					if n == 0 {
						first = time.Since(start)
					}
					if n++; n%50_000 == 0 {
						runtime.ReadMemStats(&ms)
						peak = max(peak, ms.HeapAlloc-min(base, ms.HeapAlloc))
					}
				}
				total = time.Since(start)
				f.Close()
			}
			if n != lines/2 {
				b.Fatalf("%d runs in shard 0/2, want %d", n, lines/2)
			}
			b.ReportMetric(float64(first.Microseconds()), "µs-to-first-run")
			b.ReportMetric(float64(lines)/total.Seconds(), "lines/s")
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
		})
	}
}
