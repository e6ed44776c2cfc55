package sweep_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/nodepack/nodepack/runner/sweep"
)

// ExampleSpec opens a Hydra sweep, the command line's --sweep: its
// overrides expand to every combination, each run's argv executed
// directly.
func ExampleSpec() {
	src, err := sweep.Spec{Hydra: true, Command: []string{"python", "train.py", "model=convnet,transformer", "+iteration=range(2)", "lr=0.1"}}.Open()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer src.Close()
	for run, err := range src.Runs(sweep.Shard{}) {
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(run.Index, strings.Join(run.Args, " "))
	}
	// Output:
	// 0 python train.py model=convnet +iteration=0 lr=0.1
	// 1 python train.py model=convnet +iteration=1 lr=0.1
	// 2 python train.py model=transformer +iteration=0 lr=0.1
	// 3 python train.py model=transformer +iteration=1 lr=0.1
}

// ExampleSpec_grid opens a YAML grid twice over (Reps) and streams shard
// 1 of 2: the runs whose index is odd.
func ExampleSpec_grid() {
	dir, err := os.MkdirTemp("", "nodepack-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	grid := filepath.Join(dir, "params.yml")
	if err := os.WriteFile(grid, []byte("gpu: -1\nbatchsize: [100, 500]\nepoch: !!python/tuple [5, 20, 5]\n"), 0o644); err != nil {
		fmt.Println(err)
		return
	}
	src, err := sweep.Spec{Grid: grid, Command: []string{"python", "train_mnist.py"}}.Open()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer src.Close()
	for run, err := range src.Runs(sweep.Shard{Index: 1, Count: 2}) {
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(run.Index, strings.Join(run.Args[2:], " "))
	}
	// Output:
	// 1 --gpu=-1 --batchsize=100 --epoch=10
	// 3 --gpu=-1 --batchsize=500 --epoch=5
	// 5 --gpu=-1 --batchsize=500 --epoch=15
}

// ExampleSpec_taskFile reads a task file: a line each run, run by bash,
// an identical line twice gets a second ID.
func ExampleSpec_taskFile() {
	dir, err := os.MkdirTemp("", "nodepack-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	tasks := filepath.Join(dir, "tasks.txt")
	if err := os.WriteFile(tasks, []byte("# sweep\npython train.py --lr 0.1\n\npython train.py --lr 0.01\npython train.py --lr 0.1\n"), 0o644); err != nil {
		fmt.Println(err)
		return
	}
	src, err := sweep.Spec{TaskFile: tasks}.Open()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer src.Close()
	for run, err := range src.Runs(sweep.Shard{}) {
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(run.Index, filepath.Base(run.Origin), run.ID, run.Args)
	}
	// Output:
	// 0 tasks.txt:2 6f124c82c242 [bash -c python train.py --lr 0.1]
	// 1 tasks.txt:4 8c3301acab3a [bash -c python train.py --lr 0.01]
	// 2 tasks.txt:5 6f124c82c242-2 [bash -c python train.py --lr 0.1]
}
