// Command goexec runs each line of its standard input through bash -c, P at
// a time, and nothing else: no ledger, no logs, no affinity, no private
// TMPDIR. It is bench/throughput.sh's floor for a launcher written in Go:
// what os/exec and Go's scheduler cost per run, measured on the same
// machine in the same rounds as xargs and nodepack, so the gap between
// nodepack and xargs splits into what Go costs and what nodepack adds.
//
//	go build -o /tmp/goexec ./bench/goexec && /tmp/goexec P <tasks.txt
package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: goexec P <tasks")
		os.Exit(2)
	}
	p, err := strconv.Atoi(os.Args[1])
	if err != nil || p < 1 {
		fmt.Fprintln(os.Stderr, "goexec: P must be a positive number, not", os.Args[1])
		os.Exit(2)
	}
	lines := make(chan string)
	var failed atomic.Int64
	var wg sync.WaitGroup
	for range p {
		wg.Go(func() {
			for line := range lines {
				cmd := exec.Command("bash", "-c", line)
				cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
				if cmd.Run() != nil {
					failed.Add(1)
				}
			}
		})
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(nil, 1<<20)
	for in.Scan() {
		lines <- in.Text()
	}
	close(lines)
	wg.Wait()
	if err := in.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "goexec: standard input:", err)
		os.Exit(2)
	}
	if n := failed.Load(); n > 0 {
		fmt.Fprintf(os.Stderr, "goexec: %d runs failed\n", n)
		os.Exit(1)
	}
}
