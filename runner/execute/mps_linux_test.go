package execute

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/runner/run"
)

// standInMPS writes a stand-in for nvidia-cuda-mps-control into dir: with
// -f it is the daemon (it logs "start PID", writes its pid file in the
// pipe directory and runs until told to quit); without, it reads one
// command from standard input, as the real one does, and logs it. With
// failing set it exits at once, as the real one does where MPS cannot run.
func standInMPS(t *testing.T, dir string, failing bool) (program, log string) {
	t.Helper()
	program, log = filepath.Join(dir, "mps-control"), filepath.Join(dir, "mps.log")
	body := `case "$1" in
-f) echo "start $$" >> ` + log + `
    echo $$ > "$CUDA_MPS_PIPE_DIRECTORY/nvidia-cuda-mps-control.pid"
    while [ ! -e "$CUDA_MPS_PIPE_DIRECTORY/quit" ]; do sleep 0.02; done
    echo stopped >> ` + log + ` ;;
*)  read cmd; echo "cmd $cmd" >> ` + log + `
    [ "$cmd" = quit ] && touch "$CUDA_MPS_PIPE_DIRECTORY/quit" ;;
esac`
	if failing {
		body = `echo "An MPS daemon cannot start here: the GPU is in exclusive-process mode for another user" >&2; exit 1`
	}
	if err := os.WriteFile(program, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return program, log
}

// TestMPS: runs that share a GPU by memory are the clients of one MPS
// control daemon of the sweep's own, started with the first of them in the
// sweep's scratch and quit at its end, each held by the driver to its
// gpu_mem; runs with GPUs of their own start none, nor does MPSOff; a
// daemon that cannot start is said once, and the runs take turns on the
// GPU without it; MPSOn without the program is refused before anything
// starts.
func TestMPS(t *testing.T) {
	topo := fourGPUs(t)
	topo.GPUs = topo.GPUs[:1]
	envOf := "echo \"$CUDA_MPS_PIPE_DIRECTORY|$CUDA_MPS_PINNED_DEVICE_MEM_LIMIT|$CUDA_MPS_ACTIVE_THREAD_PERCENTAGE\" > $NODEPACK_RUN_DIR/mps.env"
	for _, tc := range []struct {
		name     string
		req      pack.Request
		mode     MPSMode
		compute  bool
		failing  bool
		daemon   bool   // one started and quit
		limit    string // each run's CUDA_MPS_PINNED_DEVICE_MEM_LIMIT|CUDA_MPS_ACTIVE_THREAD_PERCENTAGE
		wantNote string
	}{
		{name: "sharing by memory", req: pack.Request{GPUMem: 10 << 30}, mode: MPSAuto, daemon: true, limit: "0=10240M|"},
		{name: "sharing by fraction", req: pack.Request{GPUShare: pack.GPUWhole / 4}, mode: MPSOn, daemon: true},
		{name: "compute shares: a quarter", req: pack.Request{GPUShare: pack.GPUWhole / 4}, mode: MPSOn, compute: true, daemon: true, limit: "|25"},
		{name: "compute shares: 10 GiB of 40", req: pack.Request{GPUMem: 10 << 30}, mode: MPSOn, compute: true, daemon: true, limit: "0=10240M|25"},
		{name: "a GPU of its own", req: pack.Request{GPUs: 1}, mode: MPSAuto},
		{name: "off, the default", req: pack.Request{GPUMem: 10 << 30}},
		{name: "a daemon that cannot start", req: pack.Request{GPUMem: 10 << 30}, mode: MPSAuto, failing: true,
			wantNote: "MPS: mps-control exited at once: An MPS daemon cannot start here: the GPU is in exclusive-process mode for another user: runs that share a GPU take turns on it (time-slicing)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			program, log := standInMPS(t, dir, tc.failing)
			var mu sync.Mutex
			var notes []string
			var runs []run.Run
			for i := range 3 {
				runs = append(runs, run.Run{ID: fmt.Sprint("r", i), Args: []string{"bash", "-c", envOf}})
			}
			opts := Options{Topology: topo, Request: tc.req, MPS: tc.mode, MPSControl: program, MPSCompute: tc.compute, SettleTimeout: time.Millisecond,
				OutputDir: filepath.Join(dir, "out"), TempDir: dir, Parallel: 3,
				OnNote: func(n string) {
					if strings.HasPrefix(n, "MPS") {
						mu.Lock()
						notes = append(notes, n)
						mu.Unlock()
					}
				}}
			sum, err := Execute(t.Context(), run.Runs(runs...), opts)
			if err != nil || sum.Succeeded != 3 {
				t.Fatalf("Execute: %d of 3 succeeded, %v", sum.Succeeded, err)
			}
			logged, _ := os.ReadFile(log)
			lines := strings.Fields(string(logged))
			switch {
			case tc.daemon && (len(lines) != 5 || strings.Join(append([]string{lines[0]}, lines[2:]...), " ") != "start cmd quit stopped"):
				t.Errorf("the daemon's log %q; want one start, quit at the end", logged)
			case !tc.daemon && len(logged) > 0:
				t.Errorf("a daemon started: %q", logged)
			}
			if tc.daemon {
				var pid int
				fmt.Sscan(lines[1], &pid)
				poll(t, func() bool { return syscall.Kill(pid, 0) != nil }) // the daemon does not outlive the sweep
			}
			var pipes []string
			for _, r := range runs {
				b, err := os.ReadFile(filepath.Join(dir, "out", "runs", r.ID, "mps.env"))
				pipe, limit, _ := strings.Cut(strings.TrimSpace(string(b)), "|")
				if err != nil || limit != cmp.Or(tc.limit, "|") || (pipe != "") != tc.daemon {
					t.Errorf("run %s: MPS env %q, %v; want a pipe directory %v, limit %q", r.ID, b, err, tc.daemon, tc.limit)
				}
				if pipe != "" && !strings.HasPrefix(pipe, dir) {
					t.Errorf("run %s: the pipe directory %s is not in the sweep's scratch (%s)", r.ID, pipe, dir)
				}
				pipes = append(pipes, pipe)
			}
			if pipes[0] != pipes[1] || pipes[1] != pipes[2] {
				t.Errorf("pipe directories %q: want the one daemon's", pipes)
			}
			if tc.wantNote != "" && (len(notes) != 1 || notes[0] != tc.wantNote) || tc.wantNote == "" && len(notes) > 0 {
				t.Errorf("notes %q; want %q", notes, tc.wantNote)
			}
		})
	}
	if _, err := Start(t.Context(), run.Runs(), Options{Topology: topo, MPS: MPSOn, MPSControl: "no-such-mps-control"}); err == nil || !strings.Contains(err.Error(), "no no-such-mps-control here") {
		t.Errorf("MPSOn without the program: %v", err)
	}

	// Two sweeps of one allocation (its scratch): the second's runs share
	// without a daemon of their own, and it says why.
	dir := t.TempDir()
	program, log := standInMPS(t, dir, false)
	hold := filepath.Join(dir, "hold")
	first, err := Start(t.Context(), run.Runs(run.Run{ID: "a", Args: []string{"bash", "-c", "while [ ! -e " + hold + " ]; do sleep 0.02; done"}}),
		Options{Topology: topo, Request: pack.Request{GPUMem: 10 << 30}, MPS: MPSAuto, MPSControl: program, SettleTimeout: time.Millisecond, TempDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	poll(t, func() bool { b, _ := os.ReadFile(log); return len(b) > 0 })
	var notes []string
	sum, err := Execute(t.Context(), run.Runs(run.Run{ID: "b", Args: []string{"true"}}),
		Options{Topology: topo, Request: pack.Request{GPUMem: 10 << 30}, MPS: MPSAuto, MPSControl: program, SettleTimeout: time.Millisecond, TempDir: dir,
			OnNote: func(n string) { notes = append(notes, n) }})
	os.WriteFile(hold, nil, 0o644)
	first.Wait()
	if err != nil || sum.Succeeded != 1 || !slices.ContainsFunc(notes, func(n string) bool {
		return strings.HasPrefix(n, "MPS: another nodepack of this allocation runs its MPS daemon")
	}) {
		t.Errorf("a second sweep of the allocation: %+v, %v, notes %q", sum, err, notes)
	}
	if b, _ := os.ReadFile(log); strings.Count(string(b), "start") != 1 {
		t.Errorf("daemons started: %q; want one", b)
	}
}
