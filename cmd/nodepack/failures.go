package main

import (
	"strings"

	"github.com/nodepack/nodepack/runner/escape"
	"github.com/nodepack/nodepack/runner/failure"
	"github.com/nodepack/nodepack/runner/submit"
)

// nextSteps says, per class of failed runs, what to do about them.
func nextSteps(classes map[failure.Class]int, dir string) []string {
	dir = shellWord(dir)
	var out []string
	runs := func(c failure.Class) string { return countWord(classes[c], "run") }
	for _, c := range failure.Classes {
		if classes[c] == 0 {
			continue
		}
		retry := "nodepack retry --class " + string(c) + " " + dir
		switch c {
		case failure.CUDAOOM:
			out = append(out, runs(c)+" ran out of GPU memory: give them more (gpus= or gpu_mem= on their task lines, or a larger --gpu-mem-per-run with --retry-failed), then "+retry+"; --retry cuda-oom=N retries at once")
		case failure.GPUMem:
			out = append(out, runs(c)+" used more GPU memory than they asked for and were stopped before the runs beside them ran out: give them more (gpu_mem= on their task lines, or a larger --gpu-mem-per-run with --retry-failed), then "+retry+"; --retry gpu-mem=N retries at once with half as much gpu_mem again")
		case failure.HostOOM:
			out = append(out, runs(c)+" ran out of host memory (killed by the kernel's OOM killer, or over their mem under --enforce-mem): give them more (mem= on their lines, --mem-per-run) or run fewer at once (--parallel), then "+retry+"; --retry host-oom=N retries at once with half as much mem again")
		case failure.GPUError:
			out = append(out, runs(c)+" hit a GPU error: check the GPU (nvidia-smi -q, Xid lines in dmesg), then "+retry+"; --retry gpu-error=N retries at once")
		case failure.DiskFull:
			out = append(out, runs(c)+" found the disk full: free space where they write (df -h "+dir+"), then "+retry)
		case failure.IOError:
			out = append(out, runs(c)+" hit an I/O error where nodepack writes their logs: check the disk (dmesg), then "+retry)
		case failure.Setup:
			out = append(out, runs(c)+" could not be set up by nodepack (their directory, logs or scratch; the error says which): fix that, then "+retry)
		case failure.NotFound:
			out = append(out, runs(c)+" could not start their program (exit 126/127): check the command, PATH and the --wrap prefix (their stderr says which), then "+retry)
		case failure.Timeout:
			out = append(out, runs(c)+" reached --timeout: "+retry+" after a longer one, or --retry timeout=N")
		}
	}
	if n := classes[failure.Exit] + classes[failure.Signal]; n > 0 {
		out = append(out, countWord(n, "run")+" failed in their own code (exit, signal): see their stderr above and their logs; once fixed, nodepack retry "+dir)
	}
	return out
}

// shellWord quotes s for a shell, when it needs it, so that a command
// nodepack prints can be pasted as it is.
func shellWord(s string) string {
	if termSafe(s) != s {
		// bash's $'…' shows a control character as an escape, and reads
		// it back as the byte.
		var b strings.Builder
		b.WriteString("$'")
		b.Write(escape.Append(nil, s, true))
		b.WriteString("'")
		return b.String()
	}
	return submit.Quote(s)
}
