package runner_test

import (
	"fmt"
	"strings"

	"github.com/nodepack/nodepack/runner"
)

func ExampleParseSweep() {
	sweep, err := runner.ParseSweep([]string{"python", "train.py", "model=convnet,transformer", "+iteration=range(2)", "lr=0.1"})
	if err != nil {
		fmt.Println(err)
		return
	}
	runs, _ := sweep.Runs(runner.SourceOptions{})
	for run := range runs {
		fmt.Println(run.Index, strings.Join(run.Args, " "))
	}
	// Output:
	// 0 python train.py model=convnet +iteration=0 lr=0.1
	// 1 python train.py model=convnet +iteration=1 lr=0.1
	// 2 python train.py model=transformer +iteration=0 lr=0.1
	// 3 python train.py model=transformer +iteration=1 lr=0.1
}

func ExampleReadGrid() {
	grid, err := runner.ReadGrid(strings.NewReader("gpu: -1\nbatchsize: [100, 500]\nepoch: !!python/tuple [5, 20, 5]\n"), "params.yml")
	if err != nil {
		fmt.Println(err)
		return
	}
	runs, _ := grid.Runs([]string{"python", "train_mnist.py"}, runner.SourceOptions{Shard: runner.Shard{Index: 1, Count: 2}})
	for run := range runs {
		fmt.Println(run.Index, strings.Join(run.Args[2:], " "))
	}
	// Output:
	// 1 --gpu=-1 --batchsize=100 --epoch=10
	// 3 --gpu=-1 --batchsize=500 --epoch=5
	// 5 --gpu=-1 --batchsize=500 --epoch=15
}
