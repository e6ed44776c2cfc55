package execute

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodepack/nodepack/pack"
	"github.com/nodepack/nodepack/resources"
	"github.com/nodepack/nodepack/runner/failure"
	"github.com/nodepack/nodepack/runner/run"
)

// TestEnforceMemCgroup: under EnforceMem with a memory cgroup to make
// groups in, a run that asks for mem is in a group of its own from its
// first instruction and is killed at its limit (host-oom, its log saying
// why); a run that asks for more than it uses, and one that asks for none,
// run through, one at a time from the same spawner thread (so the last
// one shows the thread went back to this process's group); no group is
// left behind. Needs cgroup v1's memory
// hierarchy and the right to make groups in it (root in CI).
func TestEnforceMemCgroup(t *testing.T) {
	parent := ownMemoryCgroup(t)
	const grab = `head -c 150000000 /dev/zero | tail -n 1 > /dev/null` // tail holds 150 MB: /dev/zero has no newline
	runs := []run.Run{
		{ID: "small", Args: []string{"bash", "-c", `grep memory /proc/self/cgroup > "$NODEPACK_RUN_DIR/cgroup"; ` + grab + `; exit $?`}, Request: request("mem=48MiB cpus=1")},
		{ID: "roomy", Args: []string{"bash", "-c", `grep memory /proc/self/cgroup > "$NODEPACK_RUN_DIR/cgroup"; ` + grab}, Request: request("mem=1GiB cpus=1")},
		{ID: "unasked", Args: []string{"bash", "-c", `grep memory /proc/self/cgroup > "$NODEPACK_RUN_DIR/cgroup"; ` + grab}, Request: request("cpus=1")},
	}
	out := t.TempDir()
	topo := pack.Topology{CPUs: allowedCPUs(t), Memory: 8 << 30}
	oneLane := func(o *Options) { o.Topology, o.Parallel = topo, 1 }
	_, evs, err := execute(t, t.Context(), oneLane, Options{Process: Process{OutputDir: out, EnforceMem: true, MemCgroup: parent}}, runs...)
	if err != nil || len(evs) != len(runs) {
		t.Fatalf("%v, %d events", err, len(evs))
	}
	own := strings.TrimPrefix(parent, "/sys/fs/cgroup/memory")
	for _, ev := range evs {
		b, err := os.ReadFile(filepath.Join(run.Dir(out, ev.Run), "cgroup"))
		if err != nil {
			t.Fatal(err)
		}
		group := strings.TrimSpace(string(b))[strings.LastIndex(strings.TrimSpace(string(b)), ":")+1:]
		inOwn := strings.HasPrefix(group, own+"/nodepack-")
		switch ev.Run.ID {
		case "small":
			if ev.Class != failure.HostOOM || !slices.ContainsFunc(ev.StderrTail, func(l string) bool {
				return strings.Contains(l, "OOM killer killed a process of this run at the mem=48MiB it asked for")
			}) {
				t.Errorf("over its mem: %s %q (exit %d %s), tail %q", ev.Reason, ev.Class, ev.ExitCode, ev.Signal, ev.StderrTail)
			}
		default:
			if ev.Reason != run.OK {
				t.Errorf("%s: %s %q, tail %q; want it to run through", ev.Run.ID, ev.Reason, ev.Class, ev.StderrTail)
			}
		}
		if want := ev.Run.ID != "unasked"; inOwn != want {
			t.Errorf("%s ran in memory cgroup %s: in a group of its own %v, want %v", ev.Run.ID, group, inOwn, want)
		}
	}
	// Only this process's: nodepack in other test packages, run at the
	// same time, makes groups in the same parent.
	left, _ := filepath.Glob(filepath.Join(parent, fmt.Sprintf("nodepack-%d-*", os.Getpid())))
	if len(left) > 0 {
		t.Errorf("groups left behind: %v", left)
	}
}

// ownMemoryCgroup returns this process's group in cgroup v1's memory
// hierarchy, or skips the test when there is none it may make groups in.
func ownMemoryCgroup(t *testing.T) string {
	t.Helper()
	b, _ := os.ReadFile("/proc/self/cgroup")
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 || !slices.Contains(strings.Split(f[1], ","), "memory") {
			continue
		}
		dir := filepath.Join("/sys/fs/cgroup/memory", f[2])
		probe, err := os.MkdirTemp(dir, "nodepack-test-")
		if err != nil {
			t.Skipf("cannot make memory cgroups here: %v", err)
		}
		os.Remove(probe)
		return dir
	}
	t.Skip("no cgroup v1 memory hierarchy here")
	return ""
}

// TestEnforceMemSampled: without a memory cgroup, a run the Sampler (the
// real one, whose interval is an hour here: the limit sets its own pace)
// finds over its mem is killed by the runner, as host-oom with its log
// saying why; a run that asks for no mem is not checked.
func TestEnforceMemSampled(t *testing.T) {
	sampler := resources.NewUsageSampler(time.Hour)
	defer sampler.Close()
	runs := []run.Run{
		{ID: "over", Args: []string{"bash", "-c", `tail -n 1 < <(head -c 300000000 /dev/zero; sleep 60)`}, Request: request("mem=64MiB cpus=0")},
		{ID: "unasked", Args: []string{"bash", "-c", `tail -n 1 < <(head -c 100000000 /dev/zero)`}, Request: request("cpus=0")},
	}
	topo := pack.Topology{CPUs: allowedCPUs(t), Memory: 8 << 30}
	_, evs, err := execute(t, t.Context(), func(o *Options) { o.Topology = topo }, Options{Process: Process{EnforceMem: true}, Hooks: Hooks{Sampler: sampler}}, runs...)
	if err != nil || len(evs) != len(runs) {
		t.Fatalf("%v, %d events", err, len(evs))
	}
	for _, ev := range evs {
		switch ev.Run.ID {
		case "over":
			said := regexp.MustCompile(`^--- nodepack: killed: its processes held \d+MiB, over the mem=64MiB it asked for ---$`)
			if ev.Class != failure.HostOOM || ev.Signal != "SIGKILL" || !slices.ContainsFunc(ev.StderrTail, said.MatchString) {
				t.Errorf("over: %s %q %s, tail %q; want host-oom, SIGKILL, a line matching %s", ev.Reason, ev.Class, ev.Signal, ev.StderrTail, said)
			}
		case "unasked":
			if ev.Reason != run.OK {
				t.Errorf("unasked: %s %q", ev.Reason, ev.Class)
			}
		}
	}
	// Neither a group nor a Sampler: nothing could hold a run to its mem.
	if _, err := Start(t.Context(), run.Runs(runs...), Options{Policy: Policy{Topology: topo}, Process: Process{EnforceMem: true}}); err == nil {
		t.Error("EnforceMem without MemCgroup or Sampler started")
	}
}
