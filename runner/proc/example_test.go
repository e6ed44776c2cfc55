package proc_test

import (
	"fmt"
	"os/exec"
	"time"

	"github.com/nodepack/nodepack/runner/proc"
)

// A process is launched from a plain Spec and waited for on the same
// goroutine; its exit status is data, not an error.
func ExampleLaunch() {
	p, err := proc.Launch(proc.Spec{Cmd: exec.Command("sh", "-c", "exit 3"), Key: proc.Key{Run: "example", Attempt: 1}})
	if err != nil {
		fmt.Println(err)
		return
	}
	exit := p.Wait()
	fmt.Println("exit", exit.Code)
	// Output: exit 3
}

// Stop climbs its ladder from another goroutine: here SIGTERM, which ends
// the process, so SIGKILL after the grace is never sent.
func ExampleProcess_Stop() {
	p, err := proc.Launch(proc.Spec{Cmd: exec.Command("sleep", "300"), Key: proc.Key{Run: "example", Attempt: 1}})
	if err != nil {
		fmt.Println(err)
		return
	}
	go p.Stop(proc.Ladder{Grace: time.Minute})
	exit := p.Wait()
	fmt.Println(exit.Signal)
	// Output: SIGTERM
}
