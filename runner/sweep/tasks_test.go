package sweep

import (
	"iter"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/runner/run"
)

// runsOf collects a sequence: the runs, and the error that ended it.
func runsOf(seq iter.Seq2[run.Run, error]) ([]run.Run, error) {
	var runs []run.Run
	for run, err := range seq {
		if err != nil {
			return runs, err
		}
		runs = append(runs, run)
	}
	return runs, nil
}

// TestSourceTasksAreExpandedTaskFiles checks that a task file's source
// (which makes a line's origin and name only for the runs it yields)
// streams exactly what expand(readTaskFile) does, errors included.
func TestSourceTasksAreExpandedTaskFiles(t *testing.T) {
	const tasks = "\xef\xbb\xbfecho a\n\n# a comment\n#nodepack cpus=2\necho  b  \necho a\n#nodepack\n  ./train.sh --seed=1\r\n"
	base := pack.Request{CPUs: 1}
	for _, tc := range []struct {
		desc  string
		text  string
		opts  expandOptions
		fails bool
	}{
		{"one rep, every shard", tasks, expandOptions{}, false},
		{"reps and a shard", tasks, expandOptions{Reps: 3, Shard: Shard{Index: 1, Count: 2}}, false},
		{"a bad line after good ones", tasks + "echo c\n#nodepack gpus=x\n", expandOptions{Reps: 2}, true},
		{"a NUL byte", tasks + "a\x00b\n", expandOptions{}, true},
		{"params for some lines", "#nodepack params {\"lr\": 0.1}\n" + tasks + "#nodepack params {\"x\": [1]}\necho x\n", expandOptions{Reps: 2}, false},
		{"params for no line", tasks + "#nodepack params {\"x\": 1}\n", expandOptions{}, true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			want, wantErr := runsOf(expand(readTaskFile(strings.NewReader(tc.text), "t.txt", base), tc.opts))
			got, err := runsOf(expandTasks(strings.NewReader(tc.text), "t.txt", base, tc.opts))
			if !reflect.DeepEqual(got, want) {
				t.Errorf("runs\n%+v\nwant\n%+v", got, want)
			}
			if (err != nil) != tc.fails || err != nil && err.Error() != wantErr.Error() {
				t.Errorf("error %v, want %v", err, wantErr)
			}
		})
	}
}

// TestRunsExceptLeavesOutWhatSkipSays checks RunsExcept against Runs: the
// same runs but those skip names, and skip asked about every run of the
// shard, in order, once.
func TestRunsExceptLeavesOutWhatSkipSays(t *testing.T) {
	dir := t.TempDir()
	grid := filepath.Join(dir, "grid.yml")
	tasks := filepath.Join(dir, "tasks.txt")
	os.WriteFile(grid, []byte("a: [1, 2, 3]\nb: [x, y]\n"), 0o644)
	os.WriteFile(tasks, []byte("echo 1\necho 2\necho 3\necho 2\necho 5\n"), 0o644)
	for _, spec := range []Spec{
		{TaskFile: tasks, Reps: 2},
		{Grid: grid, Command: []string{"echo"}},
		{Hydra: true, Command: []string{"echo", "a=1,2,3", "b=x,y"}},
	} {
		t.Run(spec.Kind(), func(t *testing.T) {
			src, err := spec.Open()
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			if err := src.Scan(nil); err != nil {
				t.Fatal(err)
			}
			shard := Shard{Index: 1, Count: 2}
			all, err := runsOf(src.Runs(shard))
			if err != nil {
				t.Fatal(err)
			}
			var asked []string
			skip := func(id string) bool {
				asked = append(asked, id)
				return len(asked)%2 == 1 // every other run
			}
			got, err := runsOf(src.RunsExcept(shard, skip))
			if err != nil {
				t.Fatal(err)
			}
			var want []run.Run
			var allIDs []string
			for i, run := range all {
				allIDs = append(allIDs, run.ID)
				if i%2 == 1 {
					want = append(want, run)
				}
			}
			if !reflect.DeepEqual(asked, allIDs) {
				t.Errorf("skip asked about %v, want every run of the shard %v", asked, allIDs)
			}
			if !reflect.DeepEqual(got, want) || len(want) == 0 {
				t.Errorf("runs %+v, want %+v", got, want)
			}
		})
	}
}
