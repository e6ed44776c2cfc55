package execute

import (
	"cmp"
	"context"
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
			opts := Options{
				Policy: Policy{
					Topology:      topo,
					Request:       tc.req,
					SettleTimeout: time.Millisecond,
					Parallel:      3,
				},
				Process: Process{
					MPS:        tc.mode,
					MPSControl: program,
					MPSCompute: tc.compute,
					OutputDir:  filepath.Join(dir, "out"),
					TempDir:    dir,
				},
				Hooks: Hooks{
					OnNote: func(n string) {
						if strings.HasPrefix(n, "MPS") {
							mu.Lock()
							notes = append(notes, n)
							mu.Unlock()
						}
					},
				},
			}
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
	if _, err := Start(t.Context(), run.Runs(), Options{Policy: Policy{Topology: topo}, Process: Process{MPS: MPSOn, MPSControl: "no-such-mps-control"}}); err == nil || !strings.Contains(err.Error(), "no no-such-mps-control here") {
		t.Errorf("MPSOn without the program: %v", err)
	}

	// Two sweeps of one allocation (its scratch): the second's runs share
	// without a daemon of their own, and it says why.
	dir := t.TempDir()
	program, log := standInMPS(t, dir, false)
	hold := filepath.Join(dir, "hold")
	first, err := Start(t.Context(), run.Runs(run.Run{ID: "a", Args: []string{"bash", "-c", "while [ ! -e " + hold + " ]; do sleep 0.02; done"}}),
		Options{Policy: Policy{Topology: topo, Request: pack.Request{GPUMem: 10 << 30}, SettleTimeout: time.Millisecond}, Process: Process{MPS: MPSAuto, MPSControl: program, TempDir: dir}})
	if err != nil {
		t.Fatal(err)
	}
	poll(t, func() bool { b, _ := os.ReadFile(log); return len(b) > 0 })
	var notes []string
	sum, err := Execute(t.Context(), run.Runs(run.Run{ID: "b", Args: []string{"true"}}),
		Options{
			Policy: Policy{
				Topology:      topo,
				Request:       pack.Request{GPUMem: 10 << 30},
				SettleTimeout: time.Millisecond,
			},
			Process: Process{
				MPS:        MPSAuto,
				MPSControl: program,
				TempDir:    dir,
			},
			Hooks: Hooks{
				OnNote: func(n string) { notes = append(notes, n) },
			},
		})
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

// TestMPSStopsWhateverTheDaemonDoes: a daemon whose child leaves its
// process group holding the daemon's output (setsid sleep &) holds up
// neither the sweep's end nor its stop: every run succeeds and Wait
// returns; and a daemon that ignores quit is killed once the grace of a
// cancelled sweep is out, and Wait returns. (Before, Wait waited on the
// daemon's output pipe for ever.)
func TestMPSStopsWhateverTheDaemonDoes(t *testing.T) {
	topo := fourGPUs(t)
	topo.GPUs = topo.GPUs[:2]
	for _, tc := range []struct {
		name   string
		quits  bool   // the daemon quits when told
		task   string // each run's command
		cancel bool   // the sweep is cancelled once both runs run
	}{
		{name: "a normal end", quits: true, task: "true"},
		{name: "cancelled, a daemon that ignores quit", task: "touch $NODEPACK_RUN_DIR/../../$NODEPACK_RUN_ID.up; sleep 300", cancel: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			program := filepath.Join(dir, "mps-control")
			wait := `while [ ! -e "$CUDA_MPS_PIPE_DIRECTORY/quit" ]; do sleep 0.02; done`
			if !tc.quits {
				wait = `trap '' TERM; while :; do sleep 0.02; done`
			}
			body := `case "$1" in
-f) setsid sleep 300 & echo $! > ` + dir + `/child.pid
    echo $$ > ` + dir + `/daemon.pid
    echo $$ > "$CUDA_MPS_PIPE_DIRECTORY/nvidia-cuda-mps-control.pid"
    ` + wait + ` ;;
*)  read cmd; [ "$cmd" = quit ] && touch "$CUDA_MPS_PIPE_DIRECTORY/quit" ;;
esac`
			if err := os.WriteFile(program, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				for _, f := range []string{"child.pid", "daemon.pid"} {
					var pid int
					if b, err := os.ReadFile(filepath.Join(dir, f)); err == nil && func() bool { _, err := fmt.Sscan(string(b), &pid); return err == nil }() && pid > 0 {
						syscall.Kill(pid, syscall.SIGKILL)
					}
				}
			})
			var runs []run.Run
			for i := range 4 {
				runs = append(runs, run.Run{ID: fmt.Sprint("r", i), Args: []string{"bash", "-c", tc.task}})
			}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			e, err := Start(ctx, run.Runs(runs...), Options{
				Policy: Policy{
					Topology:      topo,
					Request:       pack.Request{GPUShare: pack.GPUWhole / 2},
					SettleTimeout: time.Millisecond,
					Parallel:      4,
				},
				Process: Process{
					MPS:        MPSOn,
					MPSControl: program,
					Grace:      200 * time.Millisecond,
					OutputDir:  filepath.Join(dir, "out"),
					TempDir:    dir,
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			if tc.cancel {
				poll(t, func() bool {
					m, _ := filepath.Glob(filepath.Join(dir, "out", "*.up"))
					return len(m) == 4
				})
				cancel()
			}
			ended := make(chan Summary, 1)
			go func() { sum, _ := e.Wait(); ended <- sum }()
			select {
			case sum := <-ended:
				if !tc.cancel && sum.Succeeded != 4 {
					t.Errorf("%d of 4 runs succeeded", sum.Succeeded)
				}
			case <-time.After(time.Minute):
				t.Fatal("the sweep did not end: it waits on its MPS daemon")
			}
			var pid int
			b, _ := os.ReadFile(filepath.Join(dir, "daemon.pid"))
			if _, err := fmt.Sscan(string(b), &pid); err != nil {
				t.Fatalf("no daemon started: %v", err)
			}
			if syscall.Kill(pid, 0) == nil && !strings.HasPrefix(procStatus(pid, "State"), "Z") {
				t.Errorf("the daemon (pid %d) outlived the sweep", pid)
			}
		})
	}
}

// TestMPSLock: the lock of one daemon per allocation lives in a folder of
// this user's own in the sweep's temporary directory (MPSLockDir), and is
// opened like every file nodepack writes: a link planted in its place, or
// in the folder's, is not followed (nothing appears at its target), nor is
// a folder another user owns or may write taken; the sweep says why and its
// runs take turns on the GPU.
func TestMPSLock(t *testing.T) {
	topo := fourGPUs(t)
	topo.GPUs = topo.GPUs[:1]
	for _, tc := range []struct {
		name  string
		plant func(t *testing.T, lockDir, target string)
		note  string // what the sweep says; "" for a daemon started
	}{
		{name: "no lock yet"},
		{name: "a lock left by an earlier sweep", plant: func(t *testing.T, lockDir, _ string) {
			os.Mkdir(lockDir, 0o700)
			os.WriteFile(filepath.Join(lockDir, "mps.lock"), nil, 0o600)
		}},
		{name: "a link in the lock's place", plant: func(t *testing.T, lockDir, target string) {
			os.Mkdir(lockDir, 0o700)
			os.Symlink(target, filepath.Join(lockDir, "mps.lock"))
		}, note: "mps.lock: a symbolic link, not followed"},
		{name: "a link in the folder's place", plant: func(t *testing.T, lockDir, target string) {
			os.Mkdir(target, 0o700)
			os.Symlink(target, lockDir)
		}, note: ": not a folder (a symbolic link is not followed)"},
		{name: "a FIFO in the lock's place", plant: func(t *testing.T, lockDir, _ string) {
			os.Mkdir(lockDir, 0o700)
			syscall.Mkfifo(filepath.Join(lockDir, "mps.lock"), 0o600)
		}, note: "mps.lock: not a regular file"},
		{name: "a folder others may write", plant: func(t *testing.T, lockDir, _ string) {
			os.Mkdir(lockDir, 0o700)
			os.Chmod(lockDir, 0o777)
		}, note: ": not a folder of this user's that only this user may write"},
		{name: "a folder of another user's", plant: func(t *testing.T, lockDir, _ string) {
			if os.Geteuid() != 0 {
				t.Skip("only root can make a folder of another user's")
			}
			os.Mkdir(lockDir, 0o700)
			os.Chown(lockDir, 65534, 65534)
		}, note: ": not a folder of this user's that only this user may write"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			program, log := standInMPS(t, dir, false)
			lockDir, target := MPSLockDir(dir), filepath.Join(dir, "target")
			if lockDir != filepath.Join(dir, fmt.Sprint("nodepack-", os.Geteuid())) {
				t.Fatalf("MPSLockDir(%s) = %s", dir, lockDir)
			}
			if tc.plant != nil {
				tc.plant(t, lockDir, target)
			}
			var notes []string
			sum, err := Execute(t.Context(), run.Runs(run.Run{ID: "a", Args: []string{"true"}}),
				Options{
					Policy: Policy{
						Topology:      topo,
						Request:       pack.Request{GPUMem: 10 << 30},
						SettleTimeout: time.Millisecond,
					},
					Process: Process{
						MPS:        MPSAuto,
						MPSControl: program,
						TempDir:    dir,
					},
					Hooks: Hooks{
						OnNote: func(n string) {
							if strings.HasPrefix(n, "MPS") {
								notes = append(notes, n)
							}
						},
					},
				})
			if err != nil || sum.Succeeded != 1 {
				t.Fatalf("Execute: %+v, %v", sum, err)
			}
			logged, _ := os.ReadFile(log)
			started := strings.Contains(string(logged), "start")
			switch {
			case tc.note == "" && (!started || len(notes) > 0):
				t.Errorf("no daemon started: notes %q", notes)
			case tc.note != "" && (started || len(notes) != 1 || !strings.HasPrefix(notes[0], "MPS: its lock: "+lockDir) || !strings.Contains(notes[0], tc.note)):
				t.Errorf("daemon started %v, notes %q; want one saying %q", started, notes, tc.note)
			}
			if _, err := os.Lstat(filepath.Join(target, "mps.lock")); err == nil {
				t.Error("the lock was made through a link")
			}
			if _, err := os.Lstat(target); err == nil && tc.name == "a link in the lock's place" {
				t.Error("the lock was made through a link")
			}
			if _, err := os.Lstat(filepath.Join(dir, "nodepack-mps.lock")); err == nil {
				t.Error("a lock in the shared temporary directory")
			}
		})
	}
}
