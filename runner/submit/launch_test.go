package submit

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// standIns puts stand-ins for sbatch and squeue first in PATH: sbatch
// prints the next job id (from 100); squeue prints bin/queue.txt, or fails
// as a client does where no controller answers when bin/down exists.
func standIns(t *testing.T) (bin string) {
	t.Helper()
	bin = t.TempDir()
	for name, body := range map[string]string{
		"sbatch": `n=$(cat "$(dirname "$0")/next" 2>/dev/null || echo 100); echo $((n + 1)) > "$(dirname "$0")/next"; echo "$n"`,
		"squeue": `[ -e "$(dirname "$0")/down" ] && { echo "squeue: error: Could not establish a configuration source" >&2; exit 1; }; cat "$(dirname "$0")/queue.txt" 2>/dev/null; exit 0`,
	} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	return bin
}

// TestLaunch: each submission's script is jobs/submit-K.sh and its record
// holds the scheduler's job id; where the scheduler does not answer,
// nothing is written and the error says nothing was submitted.
func TestLaunch(t *testing.T) {
	bin := standIns(t)
	out := t.TempDir()
	j := Job{Scheduler: Slurm, Shards: 2, Output: out}
	for k, id := range []string{"100", "101"} {
		rec, err := Launch(context.Background(), j, "#!/bin/sh\necho "+id+"\n", 7, "")
		if err != nil || rec.JobID != id || rec.Script != filepath.Join("jobs", "submit-"+string(rune('1'+k))+".sh") || rec.Runs != 7 {
			t.Fatalf("launch %d: %+v, %v", k+1, rec, err)
		}
		if b, err := os.ReadFile(filepath.Join(out, rec.Script)); err != nil || !strings.Contains(string(b), "echo "+id) {
			t.Errorf("launch %d: script %q, %v", k+1, b, err)
		}
	}
	if recs, err := Read(out); err != nil || len(recs) != 2 || recs[1].JobID != "101" {
		t.Errorf("records %+v, %v; want jobs 100 and 101", recs, err)
	}

	os.WriteFile(filepath.Join(bin, "down"), nil, 0o644)
	fresh := t.TempDir()
	j.Output = fresh
	_, err := Launch(context.Background(), j, "#!/bin/sh\n", 7, "")
	if !errors.Is(err, ErrNothingSubmitted) || !strings.Contains(err.Error(), "Slurm does not answer here") {
		t.Errorf("scheduler down: %v; want Slurm does not answer here, nothing was submitted", err)
	}
	if entries, _ := os.ReadDir(fresh); len(entries) != 0 {
		t.Errorf("scheduler down: %d entries written, want none", len(entries))
	}
}

// TestWait returns once no task of the submissions is queued, with the
// sweep's status, and returns the context's error when it ends first.
func TestWait(t *testing.T) {
	bin := standIns(t)
	out := t.TempDir()
	if _, err := Launch(context.Background(), Job{Scheduler: Slurm, Shards: 2, Output: out}, "#!/bin/sh\n", 4, ""); err != nil {
		t.Fatal(err)
	}
	queue := filepath.Join(bin, "queue.txt")
	os.WriteFile(queue, []byte("100|0|RUNNING|node1\n100|1|PENDING|\n"), 0o644)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Wait(ctx, out, time.Millisecond); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled wait: %v, want context.Canceled", err)
	}

	// The queue lists the job's tasks once, then none.
	os.WriteFile(filepath.Join(bin, "squeue"), []byte("#!/bin/sh\ncat \"$(dirname \"$0\")/queue.txt\" 2>/dev/null; rm -f \"$(dirname \"$0\")/queue.txt\"\n"), 0o755)
	doc, err := Wait(context.Background(), out, time.Millisecond)
	if _, err := os.Stat(queue); err == nil {
		t.Error("wait returned before the scheduler was asked again")
	}
	if err != nil || doc.Scheduler == nil || doc.Total == nil || *doc.Total != 4 || doc.Counts.Pending != 4 {
		t.Fatalf("wait: %+v, %v; want the status of 4 runs pending (no task started)", doc, err)
	}
}
