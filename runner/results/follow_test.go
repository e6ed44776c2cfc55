package results

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// sweep writes an output directory whose ledger's session is this test
// process (so the sweep counts as running here): run a1 ended with its
// logs written, run b2 runs.
func sweep(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	host, _ := os.Hostname()
	records := []string{
		fmt.Sprintf(`{"type":"header","time":"2026-11-24T10:00:00Z","format":"nodepack.ledger/v1","host":%q,"pid":%d,"shard":{"index":0,"count":1},"total":2,"sweep":{"kind":"tasks","source":"t.txt","reps":1,"shards":1}}`, host, os.Getpid()),
		`{"type":"started","time":"2026-11-24T10:00:01Z","id":"a1a1a1a1a1a1","origin":"t.txt:1","attempt":1,"stdout":"runs/a1/stdout.log","stderr":"runs/a1/stderr.log"}`,
		`{"type":"finished","time":"2026-11-24T10:00:02Z","id":"a1a1a1a1a1a1","origin":"t.txt:1","attempt":1,"stdout":"runs/a1/stdout.log","stderr":"runs/a1/stderr.log","exit_code":2,"reason":"failed","class":"exit"}`,
		`{"type":"started","time":"2026-11-24T10:00:03Z","id":"b2b2b2b2b2b2","origin":"t.txt:2","attempt":1,"stdout":"runs/b2/stdout.log","stderr":"runs/b2/stderr.log"}`,
	}
	files := map[string]string{
		"ledger.jsonl":       strings.Join(records, "\n") + "\n",
		"runs/a1/stdout.log": "one\ntwo\nthree\n",
		"runs/a1/stderr.log": "Traceback\nValueError: bad lr\n",
		"runs/b2/stdout.log": "old 1\nold 2\n",
	}
	writeFiles(t, dir, files)
	return dir
}

// TestFollowRunning: the running run's last line already written comes
// first, then what it writes (a line in two pieces comes whole, stderr
// made late is found), prefixed with its origin, until its finished
// record; the run that ended is not followed.
func TestFollowRunning(t *testing.T) {
	dir := sweep(t)
	var out syncBuffer
	done := make(chan error)
	go func() { done <- Follow(t.Context(), dir, FollowOptions{Lines: 1, Poll: 5 * time.Millisecond}, &out) }()
	appendTo := func(name, s string) {
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			t.Error(err)
			return
		}
		f.WriteString(s)
		f.Close()
	}
	// Each step waits until the one before shows, so the pieces are read
	// apart.
	waitFor := func(s string) {
		deadline := time.Now().Add(30 * time.Second)
		for !strings.Contains(out.String(), s) && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
	}
	waitFor("[t.txt:2] old 2\n")
	appendTo("runs/b2/stdout.log", "epoch 1 lo")
	appendTo("runs/b2/stdout.log", "ss=0.5\n")
	waitFor("epoch 1 loss=0.5\n")
	appendTo("runs/b2/stderr.log", "warning: slow\n")
	waitFor("warning: slow\n")
	appendTo("runs/b2/stdout.log", "no newline at the end")
	appendTo("ledger.jsonl", `{"type":"finished","time":"2026-11-24T10:00:09Z","id":"b2b2b2b2b2b2","origin":"t.txt:2","attempt":1,"exit_code":0,"reason":"ok"}`+"\n")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want := "[t.txt:2] old 2\n[t.txt:2] epoch 1 loss=0.5\n[t.txt:2] warning: slow\n[t.txt:2] no newline at the end\n"
	if out.String() != want {
		t.Errorf("followed:\n%s\nwant:\n%s", out.String(), want)
	}
}

// TestChoose: runs by origin, by id prefix and by state; a name that
// matches nothing or too much is an error.
func TestChoose(t *testing.T) {
	dir := sweep(t)
	for _, tc := range []struct {
		description string
		opts        FollowOptions
		want        string // what Follow prints, or the error
	}{
		{"an ended run by origin: its last lines", FollowOptions{Runs: []string{"t.txt:1"}, Lines: 2},
			"[t.txt:1] two\n[t.txt:1] three\n[t.txt:1] Traceback\n[t.txt:1] ValueError: bad lr\n"},
		{"by id prefix, none of the old lines", FollowOptions{Runs: []string{"a1a1"}, Lines: -1}, ""},
		{"the failed runs", FollowOptions{Failed: true, Lines: 1}, "[t.txt:1] three\n[t.txt:1] ValueError: bad lr\n"},
		{"no such run", FollowOptions{Runs: []string{"t.txt:9"}}, `no run "t.txt:9"`},
		{"a prefix of two ids", FollowOptions{Runs: []string{""}}, "names 2 runs"},
	} {
		t.Run(tc.description, func(t *testing.T) {
			var out bytes.Buffer
			err := Follow(t.Context(), dir, tc.opts, &out)
			got := out.String()
			if err != nil {
				got = err.Error()
			}
			if !strings.Contains(got, tc.want) || (err == nil && got != tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// syncBuffer is a bytes.Buffer one goroutine writes and another reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
