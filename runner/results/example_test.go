package results_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/nodepack/nodepack/runner/metrics"
	"github.com/nodepack/nodepack/runner/results"
)

// The results table of an output directory, with a metric taken from the
// runs' stdout.
func ExampleRead() {
	dir, _ := os.MkdirTemp("", "results-example-")
	defer os.RemoveAll(dir)
	// What nodepack run leaves: a ledger, and a directory per run.
	os.WriteFile(filepath.Join(dir, "ledger.jsonl"), []byte(
		`{"type":"header","time":"2026-11-24T10:00:00Z","format":"nodepack.ledger/v1","shard":{"index":0,"count":1},"sweep":{"kind":"params","source":"p.jsonl","reps":1,"shards":1}}`+"\n"+
			`{"type":"started","time":"2026-11-24T10:00:01Z","id":"3f2a9c","origin":"p.jsonl:1","attempt":1,"stdout":"runs/lr=0.1-3f2a9c/stdout.log","stderr":"runs/lr=0.1-3f2a9c/stderr.log"}`+"\n"+
			`{"type":"finished","time":"2026-11-24T10:00:05Z","id":"3f2a9c","attempt":1,"exit_code":0,"reason":"ok","duration_s":4}`+"\n"), 0o644)
	run := filepath.Join(dir, "runs", "lr=0.1-3f2a9c")
	os.MkdirAll(run, 0o755)
	os.WriteFile(filepath.Join(run, "params.json"), []byte(`{"lr": 0.1}`), 0o644)
	os.WriteFile(filepath.Join(run, "stdout.log"), []byte("epoch 1 loss=0.9\nepoch 2 loss=0.4\n"), 0o644)
	os.WriteFile(filepath.Join(run, "metrics.json"), []byte(`{"accuracy": 0.93}`), 0o644)

	loss, _ := metrics.ParsePattern(`loss=loss=(\S+)`)
	table, err := results.Read(dir, []metrics.Pattern{loss})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, row := range table.Rows {
		fmt.Println(row.ID, row.State, "lr", string(row.Params["lr"]), "loss", string(row.Metrics["loss"]), "accuracy", string(row.Metrics["accuracy"]))
	}
	fmt.Println(table.Columns()[:3])
	// Output:
	// 3f2a9c succeeded lr 0.1 loss 0.4 accuracy 0.93
	// [id origin lr]
}
