package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// waitUntil polls cond until it holds or limit passes, and reports
// whether it held: for what happens in other processes, which send no
// event this test can wait on.
func waitUntil(limit time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// processesNamed lists the live processes whose argv[0] is name.
func processesNamed(name string) []int {
	var named []int
	for _, pid := range processesWith(name) {
		if cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && strings.HasPrefix(string(cmdline), name+"\x00") {
			named = append(named, pid)
		}
	}
	return named
}

// TestNothingOutlivesTheSweep: a run's grandchild that leaves its process
// group and clears its environment (setsid env -i, the hardest to find) is
// gone after a normal end, after SIGTERM and after kill -9 of nodepack (the
// supervisor's job), and so is the runs' scratch root.
func TestNothingOutlivesTheSweep(t *testing.T) {
	t.Parallel() // its commands run in processes of their own: beside the other such tests
	for _, tc := range []struct {
		description string
		run         string // the task line; ESCAPEE names the grandchild
		stop        syscall.Signal
	}{
		{"a normal end", "setsid env -i bash -c 'exec -a ESCAPEE sleep 300' & until test -e RELEASE; do sleep 0.05; done", 0},
		{"SIGTERM", "setsid env -i bash -c 'exec -a ESCAPEE sleep 300' & sleep 300", syscall.SIGTERM},
		{"kill -9", "setsid env -i bash -c 'exec -a ESCAPEE sleep 300' & sleep 300", syscall.SIGKILL},
	} {
		t.Run(tc.description, func(t *testing.T) {
			dir := t.TempDir()
			scratch := filepath.Join(dir, "tmp")
			os.Mkdir(scratch, 0o700)
			name := fmt.Sprintf("escapee-%d-%d", os.Getpid(), time.Now().UnixNano())
			// A normal end comes once the test saw both grandchildren
			// (it releases the runs), however slowly they start.
			release := filepath.Join(dir, "release")
			line := strings.NewReplacer("ESCAPEE", name, "RELEASE", release).Replace(tc.run)
			tasks := writeFile(t, dir, "tasks.txt", line+"\n"+line+"\n")
			cmd := nodepackCommand(t, nil, "run", "-q", "--gpus", "none", "--grace", "1s", "-o", filepath.Join(dir, "out"), tasks)
			cmd.Env = append(cmd.Env, "TMPDIR="+scratch)
			var out syncBuilder
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				for _, pid := range processesNamed(name) {
					syscall.Kill(pid, syscall.SIGKILL)
				}
			})
			if !waitUntil(time.Minute, func() bool { return len(processesNamed(name)) == 2 }) {
				cmd.Process.Kill()
				t.Fatalf("the runs' grandchildren never started:\n%s", out.String())
			}
			if tc.stop != 0 {
				cmd.Process.Signal(tc.stop)
			} else {
				os.WriteFile(release, nil, 0o644)
			}
			cmd.Wait()
			// nodepack reaps what it kills before it exits; after kill -9
			// the supervisor does it, a moment later.
			if !waitUntil(10*time.Second, func() bool { return len(processesNamed(name)) == 0 }) {
				t.Errorf("%d grandchildren that left their group and environment outlived nodepack\n%s", len(processesNamed(name)), out.String())
			}
			if !waitUntil(10*time.Second, func() bool { entries, _ := os.ReadDir(scratch); return len(entries) == 0 }) {
				entries, _ := os.ReadDir(scratch)
				t.Errorf("scratch roots left in TMPDIR: %v", entries)
			}
		})
	}
}

// TestMPSDaemonDiesWithNodepack: the MPS control daemon nodepack run
// --mps on starts for runs sharing a GPU (a stand-in here: no GPU is
// needed to start one) is quit when the sweep ends; after kill -9 of
// nodepack the supervisor kills it, and after kill -9 of both it dies by
// its parent-death signal: it never outlives the sweep. A daemon whose
// child leaves its process group holding the daemon's output (setsid
// sleep &) holds up neither the end (every run succeeds, the ledger has
// its end record) nor a SIGTERM, which acts within --grace; and that child
// does not outlive nodepack either.
func TestMPSDaemonDiesWithNodepack(t *testing.T) {
	for _, tc := range []struct {
		name  string
		child bool           // the daemon starts a child that keeps its output
		stop  syscall.Signal // sent to nodepack once the daemon is up
		both  bool           // the supervisor gets SIGKILL too
	}{
		{name: "a normal end"},
		{name: "kill -9", stop: syscall.SIGKILL},
		{name: "kill -9 of nodepack and its supervisor", stop: syscall.SIGKILL, both: true},
		{name: "a child that keeps the daemon's output, a normal end", child: true},
		{name: "a child that keeps the daemon's output, SIGTERM", child: true, stop: syscall.SIGTERM},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			inventory := fakeGPUInventory(t, dir)
			bin := filepath.Join(dir, "bin")
			os.Mkdir(bin, 0o755)
			log := filepath.Join(dir, "mps.log")
			child := ""
			if tc.child {
				child = "setsid sleep 300 & echo $! > " + dir + "/child.pid\n    "
			}
			writeFile(t, bin, "nvidia-cuda-mps-control", `#!/bin/sh
case "$1" in
-f) `+child+`echo $$ >> `+log+`; echo $$ > "$CUDA_MPS_PIPE_DIRECTORY/nvidia-cuda-mps-control.pid"
    while [ ! -e "$CUDA_MPS_PIPE_DIRECTORY/quit" ]; do sleep 0.02; done ;;
*)  read cmd; [ "$cmd" = quit ] && touch "$CUDA_MPS_PIPE_DIRECTORY/quit" ;;
esac
`)
			os.Chmod(filepath.Join(bin, "nvidia-cuda-mps-control"), 0o755)
			t.Cleanup(func() {
				var pid int
				if b, err := os.ReadFile(filepath.Join(dir, "child.pid")); err == nil {
					if _, err := fmt.Sscan(string(b), &pid); err == nil && pid > 0 {
						syscall.Kill(pid, syscall.SIGKILL)
					}
				}
			})
			sleep := "sleep 0.3"
			if tc.stop != 0 {
				sleep = "sleep 300"
			}
			tasks := writeFile(t, dir, "tasks.txt", sleep+"\n"+sleep+"\n")
			out := filepath.Join(dir, "out")
			cmd := nodepackCommand(t, nil, "run", "-q", "--inventory", inventory, "--runs-per-gpu", "2",
				"--mps", "on", "--sample-interval", "0", "--grace", "1s", "-o", out, tasks)
			cmd.Env = append(cmd.Env, "PATH="+bin+":"+os.Getenv("PATH"), "TMPDIR="+dir)
			var output syncBuilder
			cmd.Stdout, cmd.Stderr = &output, &output
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			ended := make(chan error, 1)
			go func() { ended <- cmd.Wait() }()
			var pid int
			if !waitUntil(time.Minute, func() bool { b, _ := os.ReadFile(log); _, err := fmt.Sscan(string(b), &pid); return err == nil }) {
				cmd.Process.Kill()
				t.Fatalf("no MPS daemon started:\n%s", output.String())
			}
			t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
			if tc.both {
				sup := childrenNamed(cmd.Process.Pid, "nodepack-supervisor")
				if len(sup) != 1 {
					t.Fatalf("nodepack's supervisors: %v", sup)
				}
				syscall.Kill(sup[0], syscall.SIGKILL)
			}
			if tc.stop != 0 {
				cmd.Process.Signal(tc.stop)
			}
			select {
			case err := <-ended:
				want := map[syscall.Signal]int{0: 0, syscall.SIGTERM: 128 + 15, syscall.SIGKILL: -1}[tc.stop]
				if code := cmd.ProcessState.ExitCode(); code != want {
					t.Errorf("nodepack: %v (exit %d), want exit %d\n%s", err, code, want, output.String())
				}
			case <-time.After(time.Minute):
				cmd.Process.Kill()
				t.Fatalf("nodepack did not end: it waits on its MPS daemon\n%s", output.String())
			}
			if !waitUntil(10*time.Second, func() bool { return syscall.Kill(pid, 0) != nil }) {
				t.Errorf("the MPS daemon (pid %d) outlived nodepack\n%s", pid, output.String())
			}
			if b, err := os.ReadFile(filepath.Join(dir, "child.pid")); err == nil && tc.stop != syscall.SIGKILL {
				var child int
				fmt.Sscan(string(b), &child)
				if !waitUntil(10*time.Second, func() bool { return syscall.Kill(child, 0) != nil }) {
					t.Errorf("the MPS daemon's child (pid %d) outlived nodepack", child)
				}
			}
			if tc.stop != syscall.SIGKILL {
				b, _ := os.ReadFile(filepath.Join(out, "ledger.jsonl"))
				if !strings.Contains(string(b), `"type":"end"`) {
					t.Errorf("no end record in the ledger:\n%s", b)
				}
			}
		})
	}
}

// childrenNamed lists the live children of ppid whose argv[0] is name.
func childrenNamed(ppid int, name string) []int {
	var named []int
	for _, pid := range processesNamed(name) {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if i := strings.LastIndexByte(string(stat), ')'); err == nil && i > 0 {
			var state string
			var parent int
			if _, err := fmt.Sscan(string(stat[i+1:]), &state, &parent); err == nil && parent == ppid {
				named = append(named, pid)
			}
		}
	}
	return named
}
