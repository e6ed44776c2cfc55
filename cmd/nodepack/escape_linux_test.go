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
	for _, tc := range []struct {
		description string
		run         string // the task line; ESCAPEE names the grandchild
		stop        syscall.Signal
	}{
		{"a normal end", "setsid env -i bash -c 'exec -a ESCAPEE sleep 300' & sleep 0.3", 0},
		{"SIGTERM", "setsid env -i bash -c 'exec -a ESCAPEE sleep 300' & sleep 300", syscall.SIGTERM},
		{"kill -9", "setsid env -i bash -c 'exec -a ESCAPEE sleep 300' & sleep 300", syscall.SIGKILL},
	} {
		t.Run(tc.description, func(t *testing.T) {
			dir := t.TempDir()
			scratch := filepath.Join(dir, "tmp")
			os.Mkdir(scratch, 0o700)
			name := fmt.Sprintf("escapee-%d-%d", os.Getpid(), time.Now().UnixNano())
			line := strings.ReplaceAll(tc.run, "ESCAPEE", name)
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
// needed to start one) is quit when the sweep ends, and after kill -9 of
// nodepack the supervisor kills it: it never outlives the sweep.
func TestMPSDaemonDiesWithNodepack(t *testing.T) {
	for _, kill := range []bool{false, true} {
		t.Run(map[bool]string{false: "a normal end", true: "kill -9"}[kill], func(t *testing.T) {
			dir := t.TempDir()
			inventory := fakeGPUInventory(t, dir)
			bin := filepath.Join(dir, "bin")
			os.Mkdir(bin, 0o755)
			log := filepath.Join(dir, "mps.log")
			writeFile(t, bin, "nvidia-cuda-mps-control", `#!/bin/sh
case "$1" in
-f) echo $$ >> `+log+`; echo $$ > "$CUDA_MPS_PIPE_DIRECTORY/nvidia-cuda-mps-control.pid"
    while [ ! -e "$CUDA_MPS_PIPE_DIRECTORY/quit" ]; do sleep 0.02; done ;;
*)  read cmd; [ "$cmd" = quit ] && touch "$CUDA_MPS_PIPE_DIRECTORY/quit" ;;
esac
`)
			os.Chmod(filepath.Join(bin, "nvidia-cuda-mps-control"), 0o755)
			sleep := "sleep 0.3"
			if kill {
				sleep = "sleep 300"
			}
			tasks := writeFile(t, dir, "tasks.txt", sleep+"\n"+sleep+"\n")
			cmd := nodepackCommand(t, nil, "run", "-q", "--inventory", inventory, "--gpu-mem-per-run", "2GiB",
				"--mps", "on", "--sample-interval", "0", "--grace", "1s", "-o", filepath.Join(dir, "out"), tasks)
			cmd.Env = append(cmd.Env, "PATH="+bin+":"+os.Getenv("PATH"), "TMPDIR="+dir)
			var out syncBuilder
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var pid int
			if !waitUntil(time.Minute, func() bool { b, _ := os.ReadFile(log); _, err := fmt.Sscan(string(b), &pid); return err == nil }) {
				cmd.Process.Kill()
				t.Fatalf("no MPS daemon started:\n%s", out.String())
			}
			t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
			if kill {
				cmd.Process.Signal(syscall.SIGKILL)
			}
			cmd.Wait()
			if !waitUntil(10*time.Second, func() bool { return syscall.Kill(pid, 0) != nil }) {
				t.Errorf("the MPS daemon (pid %d) outlived nodepack\n%s", pid, out.String())
			}
		})
	}
}
