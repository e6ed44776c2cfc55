//go:build linux

package proc

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// scratchPrefix is how this process's scratch roots (the runs' TMPDIRs'
// parent) begin: nodepack-PID-START-, START its start time in clock ticks
// since boot, so that a later nodepack can tell a root whose nodepack is
// gone from one whose pid was reused (see removeStaleScratch).
func scratchPrefix() string {
	start, _ := procStart(os.Getpid())
	return "nodepack-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatUint(start, 10) + "-"
}

// trackScratch and untrackScratch tell the supervisor, if there is one,
// about a scratch root: it removes one still there when this process
// dies.
func trackScratch(path string)   { procs.supervisor.scratch(path) }
func untrackScratch(path string) { procs.supervisor.scratchDone(path) }

// removeStaleScratch removes the scratch roots in base that belong to this
// user and whose nodepack is gone (its pid is free, or another process
// started since holds it): what a nodepack killed together with its
// supervisor left.
func removeStaleScratch(base string) {
	entries, err := os.ReadDir(base)
	if err != nil {
		return
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), "nodepack-")
		if !ok || !e.IsDir() {
			continue
		}
		f := strings.SplitN(rest, "-", 3)
		if len(f) != 3 {
			continue // not a root named by pid and start
		}
		pid, err1 := strconv.Atoi(f[0])
		start, err2 := strconv.ParseUint(f[1], 10, 64)
		if err1 != nil || err2 != nil || pid <= 0 {
			continue
		}
		if now, alive := procStart(pid); alive && now == start {
			continue // its nodepack runs
		}
		path := filepath.Join(base, e.Name())
		if st, err := os.Lstat(path); err != nil || st.Sys().(*syscall.Stat_t).Uid != uint32(os.Geteuid()) {
			continue // another user's
		}
		os.RemoveAll(path)
	}
}

// procStart returns when process pid started, in clock ticks since boot
// (the 22nd field of /proc/PID/stat), and whether it exists.
func procStart(pid int) (uint64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// "pid (comm) state ppid …": comm may hold spaces and parens.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 20 {
		return 0, false
	}
	start, err := strconv.ParseUint(string(f[19]), 10, 64)
	return start, err == nil
}
