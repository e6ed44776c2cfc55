package sweep_test

import (
	"fmt"
	"strings"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/runner/sweep"
)

func ExampleParseHydra() {
	hydra, err := sweep.ParseHydra([]string{"python", "train.py", "model=convnet,transformer", "+iteration=range(2)", "lr=0.1"})
	if err != nil {
		fmt.Println(err)
		return
	}
	runs, err := hydra.Runs(sweep.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	for run, err := range runs {
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

func ExampleReadGrid() {
	grid, err := sweep.ReadGrid(strings.NewReader("gpu: -1\nbatchsize: [100, 500]\nepoch: !!python/tuple [5, 20, 5]\n"), "params.yml")
	if err != nil {
		fmt.Println(err)
		return
	}
	runs, err := grid.Runs([]string{"python", "train_mnist.py"}, sweep.Options{Shard: sweep.Shard{Index: 1, Count: 2}})
	if err != nil {
		fmt.Println(err)
		return
	}
	for run, err := range runs {
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

func ExampleReadTaskFile() {
	tasks := "# sweep\npython train.py --lr 0.1\n\npython train.py --lr 0.01\npython train.py --lr 0.1\n"
	for run, err := range sweep.ReadTaskFile(strings.NewReader(tasks), "tasks.txt", pack.Request{}) {
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(run.Index, run.Origin, run.ID, run.Args)
	}
	// Output:
	// 0 tasks.txt:2 6f124c82c242 [bash -c python train.py --lr 0.1]
	// 1 tasks.txt:4 8c3301acab3a [bash -c python train.py --lr 0.01]
	// 2 tasks.txt:5 6f124c82c242-2 [bash -c python train.py --lr 0.1]
}

func ExampleReadParams() {
	params := `{"lr": 0.1, "corpus": "news crawl; 2019"}` + "\n" + `{"lr": 0.01, "corpus": "childes"}` + "\n"
	runs, err := sweep.ReadParams(strings.NewReader(params), "runs.jsonl", []string{"python", "train.py", "--seed={rep}"}, sweep.Options{Reps: 2})
	if err != nil {
		fmt.Println(err)
		return
	}
	for run, err := range runs {
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%d %s %q %s\n", run.Index, run.Origin, run.Args[2:], run.Params)
	}
	// Output:
	// 0 runs.jsonl:1 ["--seed=0" "--lr=0.1" "--corpus=news crawl; 2019"] {"lr":0.1,"corpus":"news crawl; 2019"}
	// 1 runs.jsonl:1 ["--seed=1" "--lr=0.1" "--corpus=news crawl; 2019"] {"lr":0.1,"corpus":"news crawl; 2019"}
	// 2 runs.jsonl:2 ["--seed=0" "--lr=0.01" "--corpus=childes"] {"lr":0.01,"corpus":"childes"}
	// 3 runs.jsonl:2 ["--seed=1" "--lr=0.01" "--corpus=childes"] {"lr":0.01,"corpus":"childes"}
}

func ExampleExpand() {
	tasks := "python train.py --lr 0.1\npython train.py --lr 0.01\n"
	// Every line twice, and only shard 1 of 2: runs 1 and 3 of 0 … 3.
	runs := sweep.Expand(sweep.ReadTaskFile(strings.NewReader(tasks), "tasks.txt", pack.Request{}), sweep.Options{Reps: 2, Shard: sweep.Shard{Index: 1, Count: 2}})
	for run, err := range runs {
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(run.Index, run.Rep, run.Origin, run.Args[2])
	}
	// Output:
	// 1 1 tasks.txt:1 python train.py --lr 0.1
	// 3 1 tasks.txt:2 python train.py --lr 0.01
}
