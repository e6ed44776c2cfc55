package results

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestLostToStops: status sums what stops lost since the runs' last
// checkpoints, over every attempt (a retried one too), in steps, in the
// runs' time and in GPU time (a share of a GPU counts as its share), and
// says it in a line.
func TestLostToStops(t *testing.T) {
	dir := t.TempDir()
	lines := []string{
		`{"type":"header","time":"2026-11-27T10:00:00Z","format":"nodepack.ledger/v1","shard":{"index":0,"count":1},"sweep":{"kind":"tasks","source":"t.txt","reps":1,"shards":1}}`,
		`{"type":"started","time":"2026-11-27T10:00:00Z","id":"a","origin":"t.txt:1","attempt":1,"request":"gpus=1 cpus=4"}`,
		`{"type":"finished","time":"2026-11-27T10:01:40Z","id":"a","attempt":1,"request":"gpus=1 cpus=4","exit_code":143,"reason":"timeout","retry":true,"duration_s":100,"steps":{"first":1,"last":500,"checkpoint":450,"lost":50,"lost_s":10}}`,
		`{"type":"started","time":"2026-11-27T10:01:41Z","id":"a","origin":"t.txt:1","attempt":2,"request":"gpus=1 cpus=4"}`,
		`{"type":"finished","time":"2026-11-27T10:02:41Z","id":"a","attempt":2,"request":"gpus=1 cpus=4","exit_code":0,"reason":"ok","duration_s":60,"steps":{"first":451,"last":800,"checkpoint":800}}`,
		`{"type":"started","time":"2026-11-27T10:00:00Z","id":"b","origin":"t.txt:2","attempt":1,"request":"gpus=0.25 cpus=1"}`,
		`{"type":"finished","time":"2026-11-27T10:00:40Z","id":"b","attempt":1,"request":"gpus=0.25 cpus=1","exit_code":143,"reason":"interrupted","duration_s":40,"steps":{"first":1,"last":30,"lost":30,"lost_s":40}}`,
	}
	if err := os.WriteFile(filepath.Join(dir, "ledger.jsonl"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := ReadStatus(dir, time.Date(2026, 11, 27, 11, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	want := LostWork{Attempts: 2, Steps: 80, Seconds: 50, GPUSeconds: 20}
	if st.LostToStops != want {
		t.Errorf("lost to stops %+v, want %+v", st.LostToStops, want)
	}
	var b bytes.Buffer
	st.WriteText(&b)
	if !strings.Contains(b.String(), "lost to stops: 80 steps since their last checkpoints, 20s of GPU time (50s of the runs' time), in 2 attempts") {
		t.Errorf("status does not say what stops lost:\n%s", b.String())
	}
}
