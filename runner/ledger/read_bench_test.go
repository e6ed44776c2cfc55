package ledger

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// BenchmarkReadLean reads a ledger of 1,000,000 records (500,000 runs,
// 1% failed, as a resume or a status reads it) and reports the records
// read per second and the heap the Log holds. Run with -benchtime=1x.
func BenchmarkReadLean(b *testing.B) {
	const runs = 500_000
	path := filepath.Join(b.TempDir(), "ledger.jsonl")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriter(f)
	w.WriteString(`{"type":"header","time":"2026-11-24T11:31:40.108Z","format":"nodepack.ledger/v1","host":"vm","pid":1,"shard":{"index":0,"count":1},"total":1000000,"sweep":{"kind":"tasks","source":"tasks.txt","reps":1,"shards":1}}` + "\n")
	for i := range runs {
		id := fmt.Sprintf("%012x", i*7919)
		fmt.Fprintf(w, `{"type":"started","time":"2026-11-24T11:31:40.108862452Z","host":"vm","pid":%d,"id":"%s","index":%d,"origin":"tasks.txt:%d","attempt":1,"slot":%d,"cpus":"%d","request":"gpus=0 cpus=1","stdout":"runs/true_%d-%s/stdout.log","stderr":"runs/true_%d-%s/stderr.log"}`+"\n",
			1000+i, id, i, i+1, i%2, i%2, i+1, id, i+1, id)
		code, reason := 0, "ok"
		if i%100 == 99 {
			code, reason = 1, "failed"
		}
		fmt.Fprintf(w, `{"type":"finished","time":"2026-11-24T11:31:40.109862452Z","id":"%s","index":%d,"origin":"tasks.txt:%d","attempt":1,"slot":%d,"request":"gpus=0 cpus=1","stdout":"runs/true_%d-%s/stdout.log","stderr":"runs/true_%d-%s/stderr.log","exit_code":%d,"reason":"%s","duration_s":0.001}`+"\n",
			id, i, i+1, i%2, i+1, id, i+1, id, code, reason)
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	f.Close()
	b.ResetTimer()
	var log *Log
	for b.Loop() {
		if log, err = ReadFile(path, ReadOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if log.Len() != runs {
		b.Fatalf("%d runs, want %d", log.Len(), runs)
	}
	b.ReportMetric(float64(2*runs*b.N)/b.Elapsed().Seconds(), "records/s")
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.HeapAlloc)/(1<<20), "MB-held")
	runtime.KeepAlive(log)
}
