package submit

import (
	"context"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nodepack/nodepack/runner/results"
)

var update = flag.Bool("update", false, "rewrite the golden scripts in testdata")

func job(s Scheduler) Job {
	return Job{Scheduler: s, Name: "nodepack-sweep", Shards: 3, Time: 4 * time.Hour, GPUsPerNode: 4, CPUsPerNode: 32, MemBytes: 64 << 30,
		Partition: "gpu", Account: "proj1", Extra: []string{map[Scheduler]string{Slurm: "--constraint=a100", SGE: "-l scratch=1", PBS: "-l place=scatter"}[s]},
		Output: "/shared/sweeps/out", Dir: "/shared/sweeps", Nodepack: "/opt/nodepack/bin/nodepack", Run: []string{"--runs-per-gpu", "2", "--sweep", "--", "python", "train.py", "lr=0.1,0.01", "name='a b'"}}
}

// TestScriptGolden writes each scheduler's script for a first submission
// and a resubmission of two shards, and compares them with testdata.
func TestScriptGolden(t *testing.T) {
	for _, tc := range []struct {
		description string
		job         Job
		golden      string
	}{
		{"slurm, all shards", job(Slurm), "slurm.sh"},
		{"grid engine, all shards", job(SGE), "sge.sh"},
		{"pbs, all shards", job(PBS), "pbs.sh"},
		{"slurm, a resubmission of shards 0 and 2, 1 at a time, retrying failures, whole nodes", func() Job {
			j := job(Slurm)
			j.Indices, j.Nodes, j.RetryFailed, j.GPUsPerNode, j.CPUsPerNode, j.Time = []int{0, 2}, 1, true, 0, 0, 0
			return j
		}(), "slurm-resubmit.sh"},
		{"grid engine, a resubmission of shards 1 and 2 (contiguous)", func() Job {
			j := job(SGE)
			j.Indices, j.Nodes = []int{1, 2}, 1
			return j
		}(), "sge-resubmit.sh"},
		{"slurm, GPUs and no CPUs or memory: a whole node (the README's line)", func() Job {
			j := job(Slurm)
			j.CPUsPerNode, j.MemBytes, j.Partition, j.Account, j.Extra = 0, 0, "", "", nil
			return j
		}(), "slurm-gpus.sh"},
		{"pbs, GPUs and no CPUs: a whole node", func() Job {
			j := job(PBS)
			j.CPUsPerNode, j.MemBytes, j.Partition, j.Account, j.Extra, j.Time = 0, 0, "", "", nil, 0
			return j
		}(), "pbs-gpus.sh"},
		{"pbs, one shard: no array", func() Job {
			j := job(PBS)
			j.Indices = []int{1}
			return j
		}(), "pbs-one.sh"},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			got, err := tc.job.Script()
			if err != nil {
				t.Fatalf("%s: %v", tc.description, err)
			}
			path := filepath.Join("testdata", tc.golden)
			if *update {
				os.WriteFile(path, []byte(got), 0o644)
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("%s: script differs from %s (go test -update rewrites it):\n%s", tc.description, path, got)
			}
		})
	}
}

// TestScriptRefuses lists jobs no script can be written for.
func TestScriptRefuses(t *testing.T) {
	for _, tc := range []struct {
		description string
		change      func(*Job)
		want        string
	}{
		{"unknown scheduler", func(j *Job) { j.Scheduler = "lsf" }, "want slurm, sge or pbs"},
		{"no shards", func(j *Job) { j.Shards = 0 }, "want 1 to"},
		{"indices out of range", func(j *Job) { j.Indices = []int{1, 3} }, "ascending indices below 3"},
		{"indices not ascending", func(j *Job) { j.Indices = []int{2, 1} }, "ascending"},
		{"empty indices", func(j *Job) { j.Indices = []int{} }, "no shard"},
		{"relative output", func(j *Job) { j.Output = "out" }, "absolute path"},
		{"output with a space", func(j *Job) { j.Output = "/shared/my out" }, "cannot name a path"},
		{"output with a dollar", func(j *Job) { j.Output = "/shared/$HOME" }, "cannot name a path"},
		{"a directive over two lines", func(j *Job) { j.Extra = []string{"--x\n#SBATCH --y"} }, "one line"},
		{"a partition with a space", func(j *Job) { j.Partition = "gpu -A other" }, "no spaces"},
		{"negative nodes", func(j *Job) { j.Nodes = -1 }, "must not be negative"},
		{"grid engine without a CPU count", func(j *Job) { j.Scheduler, j.CPUsPerNode = SGE, 0 }, "no CPU count"},
	} {
		j := job(Slurm)
		tc.change(&j)
		if _, err := j.Script(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error with %q", tc.description, err, tc.want)
		}
	}
}

// TestAsks: what submit says each task asks for, with the directives
// that ask it; a job that names no CPUs asks for whole nodes.
func TestAsks(t *testing.T) {
	for _, tc := range []struct {
		description string
		change      func(*Job)
		s           Scheduler
		want        string
	}{
		{"slurm, all given", func(*Job) {}, Slurm, "32 CPUs (--cpus-per-task=32); 4 GPUs (--gres=gpu:4); 64GiB of memory (--mem=65536M); 4h0m0s (--time=04:00:00)"},
		{"slurm, GPUs alone", func(j *Job) { j.CPUsPerNode, j.MemBytes, j.Time = 0, 0, 0 }, Slurm,
			"a whole node, all its CPUs and memory (--exclusive --mem=0); 4 GPUs (--gres=gpu:4); no time limit of its own (the queue's default)"},
		{"slurm, memory but no CPUs", func(j *Job) { j.CPUsPerNode = 0 }, Slurm, "all the CPUs of a node (--exclusive); 4 GPUs (--gres=gpu:4); 64GiB of memory (--mem=65536M); 4h0m0s (--time=04:00:00)"},
		{"grid engine", func(j *Job) { j.CPUsPerNode, j.GPUsPerNode = 2, 1 }, SGE, "2 CPUs, cores of its own (-pe smp 2 -binding linear:2); 1 GPU (-l gpu=1); 64GiB of memory (-l mem_free=65536M); 4h0m0s (-l h_rt=04:00:00)"},
		{"pbs, no CPUs", func(j *Job) { j.CPUsPerNode, j.MemBytes = 0, 0 }, PBS, "a whole node (-l place=excl); 4 GPUs (ngpus=4); 4h0m0s (-l walltime=04:00:00)"},
	} {
		j := job(tc.s)
		tc.change(&j)
		if got := strings.Join(j.Asks(), "; "); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.description, got, tc.want)
		}
	}
}

func TestSize(t *testing.T) {
	for _, tc := range []struct {
		description               string
		total, nodes, runsPerNode int
		wantShards, wantAtOnce    int
	}{
		{"--nodes 3: 3 shards, all at once", 100, 3, 0, 3, 0},
		{"--runs-per-node 30: shards of up to 30", 100, 0, 30, 4, 0},
		{"--runs-per-node 25 --nodes 2: 4 shards, 2 at once", 100, 2, 25, 4, 2},
		{"more nodes than runs: a shard per run", 5, 8, 0, 5, 0},
		{"one run", 1, 0, 50, 1, 0},
	} {
		shards, atOnce := Size(tc.total, tc.nodes, tc.runsPerNode)
		if shards != tc.wantShards || atOnce != tc.wantAtOnce {
			t.Errorf("%s: Size(%d, %d, %d) = %d, %d; want %d, %d", tc.description, tc.total, tc.nodes, tc.runsPerNode, shards, atOnce, tc.wantShards, tc.wantAtOnce)
		}
	}
}

func TestStopBefore(t *testing.T) {
	for _, tc := range []struct {
		description   string
		s             Scheduler
		limit         time.Duration
		stop, warning time.Duration
	}{
		{"no limit: five minutes", Slurm, 0, 5 * time.Minute, 150 * time.Second},
		{"a twelfth of an hour", Slurm, time.Hour, 5 * time.Minute, 150 * time.Second},
		{"at least a minute", SGE, 5 * time.Minute, time.Minute, 30 * time.Second},
		{"at most fifteen minutes", Slurm, 48 * time.Hour, 15 * time.Minute, 450 * time.Second},
		{"PBS: none (its end cannot be asked)", PBS, time.Hour, 0, 30 * time.Second},
	} {
		j := Job{Scheduler: tc.s, Time: tc.limit}
		if got := j.StopBefore(); got != tc.stop {
			t.Errorf("%s: StopBefore %v, want %v", tc.description, got, tc.stop)
		}
		if got := j.Warning(); got != tc.warning {
			t.Errorf("%s: Warning %v, want %v", tc.description, got, tc.warning)
		}
	}
	// --stop-before in run's own arguments is kept, not doubled.
	j := job(Slurm)
	j.Run = []string{"--stop-before", "20m", "tasks.txt"}
	script, _ := j.Script()
	if strings.Count(script, "--stop-before") != 1 {
		t.Errorf("run's own --stop-before doubled:\n%s", script)
	}
}

func TestParseTime(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{"4h", 4 * time.Hour}, {"90m", 90 * time.Minute}, {"04:00:00", 4 * time.Hour}, {"1:30", 90 * time.Minute},
		{"2-00:00:00", 48 * time.Hour}, {"100:00:00", 100 * time.Hour},
		{"", 0}, {"0", 0}, {"-1h", 0}, {"1:60", 0}, {"x", 0}, {"1-", 0}, {"1:2:3:4", 0}, {":30", 0},
	} {
		got, err := ParseTime(tc.in)
		if tc.want == 0 && err == nil || tc.want != 0 && (err != nil || got != tc.want) {
			t.Errorf("ParseTime(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	if got := slurmTime(49*time.Hour + 90*time.Second); got != "2-01:01:30" {
		t.Errorf("slurmTime = %s", got)
	}
}

func TestJobID(t *testing.T) {
	for _, tc := range []struct {
		s        Scheduler
		out, id  string
		mistaken bool
	}{
		{Slurm, "123\n", "123", false},
		{Slurm, "123;cluster2\n", "123", false},
		{SGE, "456.1-3:1\n", "456", false},
		{SGE, "456\n", "456", false},
		{PBS, "789[].pbs01\n", "789[].pbs01", false},
		{PBS, "789.pbs01\n", "789.pbs01", false},
		{Slurm, "sbatch: error: something\n", "", true},
		{SGE, "Your job 12 has been submitted\n", "", true},
	} {
		id, err := jobID(tc.s, tc.out)
		if tc.mistaken != (err != nil) || id != tc.id {
			t.Errorf("jobID(%s, %q) = %q, %v; want %q", tc.s, tc.out, id, err, tc.id)
		}
	}
}

func TestParseQueues(t *testing.T) {
	sq := "7|0|RUNNING|node1\n7|1|PENDING|\n7|2|REQUEUED|\n8|N/A|RUNNING|node2\n9|0|RUNNING|n3\n"
	got := parseSqueue([]byte(sq), map[string]bool{"7": true, "8": true})
	want := []Task{{"7", 0, "running", "node1"}, {"7", 1, "pending", ""}, {"7", 2, "pending", ""}, {"8", -1, "running", "node2"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("squeue: got %v, want %v", got, want)
	}
	xmlOut, err := os.ReadFile("testdata/qstat.xml") // qstat -u '*' -g d -xml of Son of Grid Engine 8.1.9
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := parseQstatXML(xmlOut, map[string]bool{"12": true})
	if err != nil {
		t.Fatal(err)
	}
	wantSGE := []Task{{"12", 1, "running", "vm"}, {"12", 2, "pending", ""}, {"12", 3, "held", ""}}
	if !reflect.DeepEqual(tasks, wantSGE) {
		t.Errorf("qstat: got %v, want %v", tasks, wantSGE)
	}
	if _, err := parseQstatXML([]byte("<job_info"), nil); err == nil {
		t.Error("broken XML: no error")
	}
}

func TestRecords(t *testing.T) {
	dir := t.TempDir()
	if recs, err := Read(dir); err != nil || recs != nil {
		t.Fatalf("no records: got %v, %v", recs, err)
	}
	j := job(Slurm)
	for _, id := range []string{"7", "9"} {
		if err := Append(dir, Record{Time: time.Unix(1, 0).UTC(), JobID: id, Script: "jobs/submit-1.sh", Runs: 10, Job: j}); err != nil {
			t.Fatal(err)
		}
	}
	recs, err := Read(dir)
	if err != nil || len(recs) != 2 || recs[1].JobID != "9" || !reflect.DeepEqual(recs[0].Job, j) {
		t.Fatalf("read back: %+v, %v", recs, err)
	}
	for _, tc := range []struct {
		description, second, want string
	}{
		{"not JSON", "{not json", Records + ":2:"},
		{"no job id", `{"format":"nodepack.submission/v1","job":{"scheduler":"slurm","shards":1}}`, Records + ":2: not a"},
		{"a scheduler nodepack does not know (its name is printed)", `{"format":"nodepack.submission/v1","job_id":"2","job":{"scheduler":"\u001b[31mx","shards":1}}`, Records + ":2: scheduler"},
		{"too many shards", `{"format":"nodepack.submission/v1","job_id":"2","job":{"scheduler":"sge","shards":1e9}}`, Records + ":2:"},
		{"shards out of order", `{"format":"nodepack.submission/v1","job_id":"2","job":{"scheduler":"sge","shards":3,"indices":[2,1]}}`, Records + ":2: shards"},
	} {
		os.WriteFile(filepath.Join(dir, Records), []byte(`{"format":"nodepack.submission/v1","job_id":"1","job":{"scheduler":"slurm","shards":1}}`+"\n"+tc.second+"\n"), 0o644)
		if _, err := Read(dir); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error with %q", tc.description, err, tc.want)
		}
	}
}

// TestLook joins the queue with the ledgers: every state a shard's task
// can be in.
func TestLook(t *testing.T) {
	first := Record{JobID: "7", Job: Job{Scheduler: Slurm, Shards: 4}}
	second := Record{JobID: "9", Job: Job{Scheduler: Slurm, Shards: 4, Indices: []int{1, 3}}}
	shards := []results.ShardStatus{
		{Index: 0, Count: 4, State: results.ShardEnded, Note: "done", Left: 0},
		{Index: 1, Count: 4, State: "unknown", Host: "node1", Left: 5},
		{Index: 2, Count: 4, State: "unknown", Host: "node2", Left: 3},
	}
	queue := func(_ context.Context, _ Scheduler, ids []string) ([]Task, error) {
		if !reflect.DeepEqual(ids, []string{"7", "9"}) {
			t.Errorf("asked for %v", ids)
		}
		return []Task{{"9", 0, "running", "node5"}}, nil
	}
	v := Look(context.Background(), []Record{first, second}, shards, queue)
	got := map[int]string{}
	for _, s := range v.Shards {
		got[s.Shard] = s.JobID + " " + s.State
	}
	want := map[int]string{0: "7 ended", 1: "9 running", 2: "7 died", 3: "9 not started"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("shards: got %v, want %v", got, want)
	}
	if n := v.Submissions[0].Tasks[TaskSuperseded]; n != 2 {
		t.Errorf("job 7: %d tasks resubmitted, want 2 (shards 1 and 3)", n)
	}
	if a := v.Active(); len(a) != 1 || a[0].Shard != 1 {
		t.Errorf("active: %v, want shard 1", a)
	}
	// A scheduler that cannot be asked: the error, and no task called
	// dead for it.
	v = Look(context.Background(), []Record{first}, shards, func(context.Context, Scheduler, []string) ([]Task, error) {
		return nil, errors.New("squeue: connection refused")
	})
	if v.Error == "" || v.Shards[2].State != TaskUnknown || v.Shards[0].State != TaskEnded {
		t.Errorf("scheduler down: %+v", v)
	}
}

func TestLeft(t *testing.T) {
	// 16 runs in 4 shards of 4 each.
	shards := []results.ShardStatus{
		{Index: 0, Count: 4, State: results.ShardEnded, Left: 0, Failed: 2, Total: 4},
		{Index: 1, Count: 4, State: results.ShardEnded, Left: 3, Total: 4},
		{Index: 2, Count: 4, State: results.ShardEnded, Left: -1, Total: -1},
		{Index: 0, Count: 2, State: results.ShardEnded, Left: 9, Total: 9}, // another shard count: not this sweep's
	}
	for _, tc := range []struct {
		description string
		total       int
		retry       bool
		want        []int
	}{
		{"runs left, and the shard without a ledger", 16, false, []int{1, 3}},
		{"with failed runs retried", 16, true, []int{0, 1, 3}},
		{"the source grew by one run, which is shard 0's", 17, false, []int{0, 1, 3}},
	} {
		if got := Left(4, tc.total, shards, tc.retry); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.description, got, tc.want)
		}
	}
	if got := Left(2, 4, []results.ShardStatus{{Index: 0, Count: 2, State: "unknown", Left: -1, Total: -1}, {Index: 1, Count: 2, State: results.ShardEnded, Left: -1, Deferred: 2, Total: -1}}, false); !reflect.DeepEqual(got, []int{0, 1}) {
		t.Errorf("unknown totals: got %v, want both (one without an end record, one with runs deferred)", got)
	}
}

func TestDetect(t *testing.T) {
	only := func(have string) func(string) (string, error) {
		return func(name string) (string, error) {
			if name == have {
				return "/usr/bin/" + name, nil
			}
			return "", errors.New("not found")
		}
	}
	for have, want := range map[string]Scheduler{"sbatch": Slurm, "qconf": SGE, "pbsnodes": PBS} {
		if got, err := Detect(only(have)); err != nil || got != want {
			t.Errorf("with %s: %v, %v", have, got, err)
		}
	}
	if _, err := Detect(only("")); err == nil {
		t.Error("no scheduler: no error")
	}
}

// FuzzParseTime: any text is a time limit above 0 or an error, never a
// panic; what the schedulers' format writes reads back the same.
func FuzzParseTime(f *testing.F) {
	for _, s := range []string{"4h", "90m", "04:00:00", "1-02:03:04", "1:30", "x", "-1-1:1", "99999999999:00:00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseTime(s)
		if err != nil {
			return
		}
		if d <= 0 {
			t.Fatalf("ParseTime(%q) = %v", s, d)
		}
		if back, err := ParseTime(clock(d)); d%time.Second == 0 && (err != nil || back != d) {
			t.Fatalf("%q: %v written %s reads back %v, %v", s, d, clock(d), back, err)
		}
	})
}

// FuzzRead: any records file is records or an error naming its line,
// never a panic.
func FuzzRead(f *testing.F) {
	f.Add([]byte(`{"format":"nodepack.submission/v1","job_id":"7","job":{"scheduler":"slurm","shards":2,"indices":[1]}}` + "\n"))
	f.Add([]byte(`{"format":"nodepack.submission/v1","job_id":"8","job":{"scheduler":"pbs","shards":1,"indices":[0]}}` + "\n"))
	f.Add([]byte("{}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, Records), b, 0o644)
		recs, err := Read(dir)
		if err != nil && !strings.Contains(err.Error(), Records) {
			t.Fatalf("error without the file's name: %v", err)
		}
		for _, r := range recs {
			Look(context.Background(), []Record{r}, nil, func(context.Context, Scheduler, []string) ([]Task, error) { return nil, nil })
		}
	})
}

// TestNodeCPUs reads qhost -q -xml as Son of Grid Engine 8.1.9 prints it
// (testdata/qhost.xml, the local cell: 2 CPUs, a queue of 16 slots) and a
// cluster of three hosts: the fewest CPUs of any host, capped by its
// queue's slots, only hosts of the named queue counted.
func TestNodeCPUs(t *testing.T) {
	local, err := os.ReadFile("testdata/qhost.xml")
	if err != nil {
		t.Fatal(err)
	}
	host := func(name, cpus string, queues ...string) string {
		h := "<host name='" + name + "'><hostvalue name='num_proc'>" + cpus + "</hostvalue>"
		for _, q := range queues {
			n, slots, _ := strings.Cut(q, ":")
			h += "<queue name='" + n + "'><queuevalue qname='" + n + "' name='slots'>" + slots + "</queuevalue></queue>"
		}
		return h + "</host>"
	}
	cluster := "<qhost>" + host("global", "-") + host("big", "64", "all.q:64", "gpu.q:48") + host("small", "16", "all.q:16") + host("odd", "32", "gpu.q:8") + "</qhost>"
	for _, tc := range []struct {
		description, xml, queue string
		want                    int
		wantErr                 string
	}{
		{"the local cell", string(local), "", 2, ""},
		{"the fewest of any host, capped by its largest queue", cluster, "", 8, ""},
		{"hosts of the named queue only", cluster, "all.q", 16, ""},
		{"the named queue's slots", cluster, "gpu.q", 8, ""},
		{"a queue no host has", cluster, "nope.q", 0, "no execution host with queue nope.q"},
		{"no host", "<qhost>" + host("global", "-") + "</qhost>", "", 0, "no execution host"},
		{"not XML", "qhost: error", "", 0, "qhost -xml"},
	} {
		got, from, err := parseQhostXML([]byte(tc.xml), tc.queue)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: %d, %v; want an error with %q", tc.description, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want || !strings.HasPrefix(from, "qhost: ") {
			t.Errorf("%s: %d (%s), %v; want %d", tc.description, got, from, err, tc.want)
		}
	}
}

// TestScriptRunsFromHostileDirectories runs each scheduler's script with
// bash, as the array task would, from submitting directories whose names
// are shell syntax (R&D, a(b), w;{touch,pwned}, …) and into an output
// directory of the same kind: the task changes into that directory and
// runs nodepack (a stand-in that records what it got) with the output
// directory as one argument, and nothing else runs.
func TestScriptRunsFromHostileDirectories(t *testing.T) {
	for _, name := range []string{"R&D", "a(b)", "w;{touch,pwned}", "x|y", "semi;colon", "star*", "tilde~", "back`tick", "brace{a,b}", "lt<gt>", "hash#", "bang!",
		"with space", "dollar$HOME", "quote'd", "dq\"x", "$(touch pwned)"} {
		for _, s := range []Scheduler{Slurm, SGE, PBS} {
			root := t.TempDir()
			dir := filepath.Join(root, name)
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			stub := filepath.Join(root, "nodepack-stub")
			os.WriteFile(stub, []byte("#!/bin/sh\npwd > \"$(dirname \"$0\")/cwd\"\nprintf '%s\\n' \"$@\" > \"$(dirname \"$0\")/args\"\n"), 0o755)
			out := filepath.Join(dir, "out")
			if strings.ContainsAny(name, "`$'\" ") { // what no directive names: the output elsewhere
				out = filepath.Join(root, "out")
			}
			j := Job{Scheduler: s, Shards: 2, CPUsPerNode: 2, Output: out, Dir: dir, Nodepack: stub, Run: []string{"tasks.txt"}}
			script, err := j.Script()
			if err != nil {
				// Only what a directive cannot name is refused: not these.
				t.Errorf("%s, %s: %v", name, s, err)
				continue
			}
			cmd := exec.Command("bash", "-c", script)
			cmd.Dir = root
			cmd.Env = append(os.Environ(), "SLURM_ARRAY_TASK_ID=1", "SGE_TASK_ID=2", "PBS_ARRAY_INDEX=1")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("%s, %s: the script failed: %v\n%s\n%s", name, s, err, out, script)
				continue
			}
			cwd, _ := os.ReadFile(filepath.Join(root, "cwd"))
			args, _ := os.ReadFile(filepath.Join(root, "args"))
			if strings.TrimSpace(string(cwd)) != dir || !strings.Contains(string(args), "--output\n"+j.Output+"\n--shard\n1/2\n") {
				t.Errorf("%s, %s: nodepack ran in %q with %q; want %q and --output %s --shard 1/2", name, s, cwd, args, dir, j.Output)
			}
			for _, canary := range []string{"pwned", "touch", "D", "b", "y"} {
				if _, err := os.Stat(filepath.Join(root, canary)); err == nil {
					t.Errorf("%s, %s: the script ran something of the directory's name (%s exists)", name, s, canary)
				}
			}
		}
	}
}

// TestNotStartedTaskLog: a task not started is sent to its log only when
// it left one (by the name its script asks for); one that never ran is
// said to have none, not sent to look for it.
func TestNotStartedTaskLog(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "jobs"), 0o755)
	for _, name := range []string{"slurm-7_2.log", "sge-8.3.log", "11[4].server.OU"} {
		os.WriteFile(filepath.Join(dir, "jobs", name), []byte("log\n"), 0o644)
	}
	for _, tc := range []struct {
		s    Scheduler
		job  string
		task int
		want string
	}{
		{Slurm, "7", 2, "jobs/slurm-7_2.log"},
		{Slurm, "7", 3, ""},
		{SGE, "8", 3, "jobs/sge-8.3.log"},
		{SGE, "8", 1, ""},
		{PBS, "11[].server", 4, "jobs/11[4].server.OU"},
		{PBS, "11[].server", 5, ""},
	} {
		if got := taskLog(jobLogs(dir), tc.s, tc.job, tc.task); got != tc.want {
			t.Errorf("%s job %s task %d: log %q, want %q", tc.s, tc.job, tc.task, got, tc.want)
		}
	}
	for log, want := range map[string]string{
		"jobs/slurm-7_2.log": "not in the queue, and no ledger: see its log, jobs/slurm-7_2.log",
		"":                   "not in the queue, no ledger and no log: it never ran",
	} {
		var b strings.Builder
		doc := Doc{Status: results.NewStatus(dir, time.Now()), Scheduler: &View{Scheduler: Slurm, Shards: []ShardView{{Shard: 2, JobID: "7", Task: 2, State: TaskNotStarted, Log: log, Left: -1}}}}
		doc.WriteText(&b)
		if !strings.Contains(b.String(), want) {
			t.Errorf("log %q: %q, want %q", log, b.String(), want)
		}
	}
}
