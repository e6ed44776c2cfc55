package submit

import (
	"bufio"
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
)

// Detect returns the scheduler whose commands lookPath (exec.LookPath)
// finds: Slurm's sbatch, else Grid Engine's qconf, else PBS's pbsnodes.
func Detect(lookPath func(string) (string, error)) (Scheduler, error) {
	for _, c := range []struct {
		command string
		s       Scheduler
	}{{"sbatch", Slurm}, {"qconf", SGE}, {"pbsnodes", PBS}} {
		if _, err := lookPath(c.command); err == nil {
			return c.s, nil
		}
	}
	return "", errors.New("no scheduler found: none of sbatch (Slurm), qconf (Grid Engine) or pbsnodes (PBS) is in PATH")
}

// command runs a scheduler command and returns its standard output; its
// standard error, when it fails, is in the error.
func command(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return out, fmt.Errorf("%s: %w: %s", name, err, msg)
		}
		return out, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}

// Submit hands the batch script at path to the scheduler and returns the
// job id it gave: sbatch --parsable, qsub -terse (Grid Engine), qsub
// (PBS).
func Submit(ctx context.Context, s Scheduler, path string) (string, error) {
	var out []byte
	var err error
	switch s {
	case Slurm:
		out, err = command(ctx, "sbatch", "--parsable", path)
	case SGE:
		out, err = command(ctx, "qsub", "-terse", path)
	case PBS:
		out, err = command(ctx, "qsub", path)
	default:
		return "", fmt.Errorf("scheduler %q: want slurm, sge or pbs", s)
	}
	if err != nil {
		return "", err
	}
	id, err := jobID(s, string(out))
	if err != nil {
		return "", fmt.Errorf("submit: %w", err)
	}
	return id, nil
}

var (
	slurmID = regexp.MustCompile(`^([0-9]+)(;\S+)?$`)             // 123 or 123;cluster
	sgeID   = regexp.MustCompile(`^([0-9]+)(\.[0-9]+-[0-9:]+)?$`) // 123 or 123.1-3:1
	pbsID   = regexp.MustCompile(`^([0-9]+(\[\])?(\.\S+)?)$`)     // 123[].server
)

// jobID finds the job id in what the submitting command printed.
func jobID(s Scheduler, out string) (string, error) {
	line := strings.TrimSpace(out)
	if i := strings.LastIndexByte(line, '\n'); i >= 0 {
		line = strings.TrimSpace(line[i+1:])
	}
	re := map[Scheduler]*regexp.Regexp{Slurm: slurmID, SGE: sgeID, PBS: pbsID}[s]
	m := re.FindStringSubmatch(line)
	if m == nil {
		return "", fmt.Errorf("no job id in %q", out)
	}
	return m[1], nil
}

// Task is one array task as the scheduler's queue shows it.
type Task struct {
	Job   string `json:"job"`   // the array job's id
	Task  int    `json:"task"`  // the array task's id, as the scheduler counts (Grid Engine from 1); -1 for a job that is no array
	State string `json:"state"` // pending, running, or the scheduler's own word (suspended, held, error, …)
	Node  string `json:"node,omitempty"`
}

// Queue returns the tasks of jobs that the scheduler still has queued or
// running; a finished task is not in it. PBS is not asked: it returns an
// error saying so.
func Queue(ctx context.Context, s Scheduler, jobs []string) ([]Task, error) {
	want := map[string]bool{}
	for _, j := range jobs {
		want[j] = true
	}
	switch s {
	case Slurm:
		// Every job of the user, filtered here: squeue -j fails as a
		// whole when one of the ids has left the queue.
		out, err := command(ctx, "squeue", "-h", "-r", "-o", "%F|%K|%T|%N")
		if err != nil {
			return nil, err
		}
		return parseSqueue(out, want), nil
	case SGE:
		out, err := command(ctx, "qstat", "-u", "*", "-g", "d", "-xml")
		if err != nil {
			return nil, err
		}
		return parseQstatXML(out, want)
	}
	return nil, fmt.Errorf("asking %s for its queue is not supported", s)
}

// parseSqueue reads squeue -h -r -o '%F|%K|%T|%N' lines.
func parseSqueue(out []byte, want map[string]bool) []Task {
	var tasks []Task
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Split(strings.TrimSpace(sc.Text()), "|")
		if len(f) != 4 || !want[f[0]] {
			continue
		}
		t := Task{Job: f[0], Task: -1, State: slurmState(f[2]), Node: f[3]}
		if n, err := strconv.Atoi(f[1]); err == nil {
			t.Task = n
		}
		tasks = append(tasks, t)
	}
	return tasks
}

func slurmState(s string) string {
	switch s {
	case "PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "CONFIGURING":
		return "pending"
	case "RUNNING", "COMPLETING", "STAGE_OUT", "SIGNALING":
		return "running"
	}
	return strings.ToLower(s)
}

// qstatXML is the part of qstat -xml that Queue reads.
type qstatXML struct {
	Jobs []struct {
		Number string `xml:"JB_job_number"`
		State  string `xml:"state"`
		Queue  string `xml:"queue_name"`
		Tasks  string `xml:"tasks"`
	} `xml:"queue_info>job_list"`
	Pending []struct {
		Number string `xml:"JB_job_number"`
		State  string `xml:"state"`
		Tasks  string `xml:"tasks"`
	} `xml:"job_info>job_list"`
}

// parseQstatXML reads qstat -u '*' -g d -xml (-g d: an array's pending
// tasks one per entry).
func parseQstatXML(out []byte, want map[string]bool) ([]Task, error) {
	var doc qstatXML
	if err := xml.Unmarshal(out, &doc); err != nil {
		return nil, fmt.Errorf("qstat -xml: %w", err)
	}
	var tasks []Task
	add := func(number, state, queue, task string) {
		if !want[number] {
			return
		}
		t := Task{Job: number, Task: -1, State: sgeState(state)}
		if _, host, ok := strings.Cut(queue, "@"); ok {
			t.Node = host
		}
		if n, err := strconv.Atoi(strings.TrimSpace(task)); err == nil {
			t.Task = n
		}
		tasks = append(tasks, t)
	}
	for _, j := range doc.Jobs {
		add(j.Number, j.State, j.Queue, j.Tasks)
	}
	for _, j := range doc.Pending {
		add(j.Number, j.State, "", j.Tasks)
	}
	return tasks, nil
}

// sgeState words qstat's state letters.
func sgeState(s string) string {
	switch {
	case strings.Contains(s, "E"):
		return "error"
	case strings.Contains(s, "d"):
		return "deleting"
	case strings.ContainsAny(s, "sST"):
		return "suspended"
	case strings.ContainsAny(s, "rt"):
		return "running" // also hr: held, but running already
	case strings.Contains(s, "h"):
		return "held"
	case strings.ContainsAny(s, "qw"):
		return "pending"
	}
	return s
}
