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
		if msg := oneLine(stderr.String()); msg != "" {
			return out, fmt.Errorf("%s: %w: %s", name, err, msg)
		}
		return out, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}

// oneLine is what a scheduler's command said on stderr, as one line of
// an error: its last few lines that say something, joined by "; ", cut
// to a few hundred bytes (a client that prints a page says its reason
// last).
func oneLine(stderr string) string {
	var lines []string
	for _, l := range strings.Split(stderr, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	lines = lines[max(len(lines)-3, 0):]
	msg := strings.Join(lines, "; ")
	if len(msg) > 400 {
		msg = "…" + strings.ToValidUTF8(msg[len(msg)-400:], "")
	}
	return msg
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

// qhostXML is the part of qhost -q -xml that NodeCPUs reads.
type qhostXML struct {
	Hosts []struct {
		Name   string `xml:"name,attr"`
		Values []struct {
			Name  string `xml:"name,attr"`
			Value string `xml:",chardata"`
		} `xml:"hostvalue"`
		Queues []struct {
			Name   string `xml:"name,attr"`
			Values []struct {
				Name  string `xml:"name,attr"`
				Value string `xml:",chardata"`
			} `xml:"queuevalue"`
		} `xml:"queue"`
	} `xml:"host"`
}

// NodeCPUs returns how many CPUs a Grid Engine job may ask for to have a
// whole node wherever it lands, since Grid Engine has no request for a
// whole node: the fewest of any execution host (qhost -q -xml: its
// num_proc, no more than the slots of its largest queue, or of queue when
// one is named; hosts without that queue do not count), and what it was
// read from. The other schedulers have such a request (Slurm --exclusive,
// PBS place=excl): asked of them, it returns an error.
func NodeCPUs(ctx context.Context, s Scheduler, queue string) (int, string, error) {
	if s != SGE {
		return 0, "", fmt.Errorf("%s asks for whole nodes with a directive of its own", s)
	}
	out, err := command(ctx, "qhost", "-q", "-xml")
	if err != nil {
		return 0, "", err
	}
	return parseQhostXML(out, queue)
}

// parseQhostXML reads qhost -q -xml for NodeCPUs.
func parseQhostXML(out []byte, queue string) (int, string, error) {
	var doc qhostXML
	if err := xml.Unmarshal(out, &doc); err != nil {
		return 0, "", fmt.Errorf("qhost -xml: %w", err)
	}
	least, host := 0, ""
	for _, h := range doc.Hosts {
		cpus := 0
		for _, v := range h.Values {
			if v.Name == "num_proc" {
				cpus, _ = strconv.Atoi(strings.TrimSpace(v.Value))
			}
		}
		if cpus <= 0 { // "global", or a host that reports nothing
			continue
		}
		slots, named := 0, false
		for _, q := range h.Queues {
			if queue != "" && q.Name != queue {
				continue
			}
			named = true
			for _, v := range q.Values {
				if v.Name == "slots" {
					if n, err := strconv.Atoi(strings.TrimSpace(v.Value)); err == nil {
						slots = max(slots, n)
					}
				}
			}
		}
		if queue != "" && !named {
			continue
		}
		if slots > 0 {
			cpus = min(cpus, slots)
		}
		if least == 0 || cpus < least {
			least, host = cpus, h.Name
		}
	}
	if least == 0 {
		if queue != "" {
			return 0, "", fmt.Errorf("qhost lists no execution host with queue %s and a CPU count", queue)
		}
		return 0, "", errors.New("qhost lists no execution host with a CPU count")
	}
	return least, "qhost: the CPUs of host " + host + ", the fewest of any", nil
}

// Ping asks the scheduler's controller a question that needs it to answer
// (the queue: squeue, qstat; PBS: qstat -B), and returns why it could not:
// a client installed on a machine that no controller answers (a
// workstation with slurm-client, a cluster down) fails there before any job
// could be submitted.
func Ping(ctx context.Context, s Scheduler) error {
	switch s {
	case Slurm, SGE:
		_, err := Queue(ctx, s, nil)
		return err
	case PBS:
		_, err := command(ctx, "qstat", "-B")
		return err
	}
	return fmt.Errorf("scheduler %q: want slurm, sge or pbs", s)
}

// Name is how people call the scheduler: Slurm, Grid Engine, PBS.
func (s Scheduler) Name() string {
	switch s {
	case Slurm:
		return "Slurm"
	case SGE:
		return "Grid Engine"
	case PBS:
		return "PBS"
	}
	return string(s)
}
