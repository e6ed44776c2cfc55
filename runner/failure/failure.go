// Package failure names why a run's attempt failed: its class. A class
// says what to do next — a CUDA out-of-memory wants more GPU memory, a
// kernel OOM kill more host memory, a missing program a fix of the
// command — so it is recorded with every failed attempt, shown wherever a
// failure is shown, and retry budgets are set per class.
//
// The package is pure: [Classify] decides from what the runner observed
// (exit status, signal, who stopped the run, the kernel's OOM kill count,
// GPU errors) and from the tail of the run's standard error, matched
// against [Builtin] patterns and the user's own. Reading that tail is
// [ReadTail], bounded to [tailBytes] whatever the log's size, and opened
// as package untrusted opens a run's file.
package failure

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"syscall"

	"github.com/nodepack/nodepack/runner/untrusted"
)

// Class is the reason an attempt failed. The zero value means none: the
// attempt succeeded.
type Class string

// The classes, in the order they are shown.
const (
	CUDAOOM     Class = "cuda-oom"    // the run's stderr shows a GPU out-of-memory error
	GPUMem      Class = "gpu-mem"     // the runner stopped it for using more GPU memory than its gpu_mem and the GPU's headroom, before it starved a run beside it
	HostOOM     Class = "host-oom"    // the kernel's OOM killer killed it
	GPUError    Class = "gpu-error"   // the run's GPU failed (Xid, ECC) or its stderr shows a CUDA/NCCL fault
	DiskFull    Class = "disk-full"   // ENOSPC in its stderr, or the node's disk full (EDQUOT too) where the runner writes its logs
	IOError     Class = "io-error"    // an I/O error (EIO) where the runner writes the run's directory or logs: the node's disk
	Setup       Class = "setup"       // the runner could not make the attempt's directory, logs or scratch: not the run's doing
	NotFound    Class = "not-found"   // the program (or the --wrap prefix) is missing or not executable: exit 126/127, or it could not start
	Timeout     Class = "timeout"     // the runner stopped it after its time limit
	Signal      Class = "signal"      // killed by a signal the runner did not send, other than a stop signal (SIGSEGV, SIGABRT, …)
	Exit        Class = "exit"        // a non-zero exit status
	Interrupted Class = "interrupted" // the sweep was stopped, or the run ended by a stop signal from outside (SIGTERM, SIGINT, SIGHUP)
)

// Classes lists every class, in the order they are shown.
var Classes = []Class{CUDAOOM, GPUMem, HostOOM, GPUError, DiskFull, IOError, Setup, NotFound, Timeout, Signal, Exit, Interrupted}

// OfSetup returns the class of an attempt the runner could not set up
// because of err, and whether that is the node's fault (its disk full or
// failing) rather than this attempt's: then no run can be set up, and the
// sweep should stop starting runs.
func OfSetup(err error) (c Class, node bool) {
	switch {
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return DiskFull, true
	case errors.Is(err, syscall.EIO):
		return IOError, true
	}
	return Setup, false
}

// Valid reports whether c is one of Classes.
func (c Class) Valid() bool { return slices.Contains(Classes, c) }

// ParseClass reads a class name as Classes spell it.
func ParseClass(s string) (Class, error) {
	if c := Class(s); c.Valid() {
		return c, nil
	}
	return "", fmt.Errorf("unknown failure class %q (one of %s)", s, JoinClasses(Classes))
}

// JoinClasses lists classes as a message does: "cuda-oom, host-oom".
func JoinClasses(cs []Class) string {
	var b strings.Builder
	for i, c := range cs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(string(c))
	}
	return b.String()
}

// Pattern makes a line of a run's standard error evidence of a class.
type Pattern struct {
	Class  Class
	Regexp *regexp.Regexp
	Source string // where the message comes from, for people
}

// ParsePattern reads a user's pattern written CLASS=REGEX; its Source
// says so, for a caller to name where it was given. Only the classes a log can show may be given one:
// cuda-oom, gpu-error, disk-full, host-oom and not-found.
func ParsePattern(s string) (Pattern, error) {
	name, expr, ok := strings.Cut(s, "=")
	if !ok || expr == "" {
		return Pattern{}, fmt.Errorf("failure pattern %q: want CLASS=REGEX", s)
	}
	c, err := ParseClass(name)
	if err != nil {
		return Pattern{}, fmt.Errorf("failure pattern %q: %w", s, err)
	}
	switch c {
	case Timeout, Signal, Exit, Interrupted, IOError, Setup, GPUMem:
		return Pattern{}, fmt.Errorf("failure pattern %q: %s is not read from a log", s, c)
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return Pattern{}, fmt.Errorf("failure pattern %q: %w", s, err)
	}
	return Pattern{Class: c, Regexp: re, Source: "a user's pattern"}, nil
}

// Outcome is what the runner saw of a failed attempt.
type Outcome struct {
	ExitCode int    // exit status; 128+N for death by signal N; -1 if it did not start
	Signal   string // the signal that killed it ("SIGKILL"); empty if it exited
	// StartErr is why the command could not start, if it could not.
	StartErr error
	// TimedOut and Interrupted say that the runner stopped it;
	// OverGPUMem, that the runner stopped it for using more GPU memory
	// than it asked for.
	TimedOut, Interrupted, OverGPUMem bool
	// OOMKilled says that the kernel's OOM kill count of the job's memory
	// cgroup rose while the attempt ran and the attempt died of SIGKILL.
	OOMKilled bool
	// GPUFault says that one of the attempt's GPUs reported an error (an
	// Xid or a double-bit ECC error) while it ran.
	GPUFault bool
}

// Classify returns the class of a failed attempt: what the runner did to
// it first (interrupted, timeout, over its GPU memory), then what the kernel and the GPUs
// reported (host-oom, gpu-error), then what its standard error's tail
// shows (the user's patterns before the built-in ones, each in order; the
// first pattern that matches any line wins), then a missing program, then
// how it ended (signal, exit).
func Classify(o Outcome, tail []byte, patterns []Pattern) Class {
	switch {
	case o.Interrupted:
		return Interrupted
	case o.TimedOut:
		return Timeout
	case o.OverGPUMem:
		return GPUMem
	case o.OOMKilled:
		return HostOOM
	case o.GPUFault:
		return GPUError
	}
	if len(tail) > 0 {
		for _, p := range patterns {
			if p.Regexp.Match(tail) {
				return p.Class
			}
		}
	}
	switch {
	case o.StartErr != nil:
		if errors.Is(o.StartErr, os.ErrNotExist) || errors.Is(o.StartErr, os.ErrPermission) || errors.Is(o.StartErr, exec.ErrNotFound) {
			return NotFound
		}
		return Exit
	case o.Signal != "":
		return Signal
	case o.ExitCode == 126 || o.ExitCode == 127:
		return NotFound
	}
	return Exit
}

// tailBytes bounds how much of the end of a run's standard error is read
// to classify a failure.
const tailBytes = 64 << 10

// ReadTail returns at most the last tailBytes of the file rel below dir
// after offset from (where an attempt's output began, in a log that holds
// earlier attempts too), from the start of a line; nil if it cannot be
// read. The log is the run's, untrusted: read only as a regular file that
// no link below dir leads to (package untrusted).
func ReadTail(dir, rel string, from int64) []byte {
	f, err := untrusted.Open(dir, rel)
	if err != nil {
		return nil
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil
	}
	off := max(st.Size()-tailBytes, from, 0)
	if off >= st.Size() {
		return nil
	}
	buf := make([]byte, st.Size()-off)
	n, err := f.ReadAt(buf, off)
	if err != nil && err != io.EOF {
		return nil
	}
	buf = buf[:n]
	if off > from {
		if i := bytes.IndexByte(buf, '\n'); i >= 0 {
			buf = buf[i+1:] // a cut line could match half a message
		}
	}
	return buf
}

// LastLines returns up to n of the last non-blank lines of tail, each cut
// to maxLen bytes (at a UTF-8 boundary), for the ledger and the failure
// report.
func LastLines(tail []byte, n, maxLen int) []string {
	var lines []string
	for len(tail) > 0 && len(lines) < n {
		tail = bytes.TrimRight(tail, "\r\n")
		var line []byte
		if i := bytes.LastIndexByte(tail, '\n'); i >= 0 {
			tail, line = tail[:i], tail[i+1:]
		} else {
			tail, line = nil, tail
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		lines = append(lines, cut(string(bytes.TrimRight(line, "\r")), maxLen))
	}
	slices.Reverse(lines)
	return lines
}

// cut shortens s to at most n bytes without splitting a UTF-8 sequence,
// marking the cut with "…".
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := max(n-len("…"), 0)
	for i > 0 && i < len(s) && s[i]&0xC0 == 0x80 {
		i--
	}
	return strings.ToValidUTF8(s[:i], "") + "…"
}

// Counts says how many runs failed of each class, in the order of
// Classes, for a person: "3 cuda-oom, 1 exit".
func Counts(classes map[Class]int) string {
	var parts []string
	for _, c := range Classes {
		if n := classes[c]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, c))
		}
	}
	if n := classes[""]; n > 0 {
		parts = append(parts, fmt.Sprintf("%d unclassified", n))
	}
	return strings.Join(parts, ", ")
}
