package runner

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/nodepack/nodepack/runner/ledger"
	"github.com/nodepack/nodepack/runner/metrics"
	"github.com/nodepack/nodepack/runner/schedule"
)

// Reading a prior (Options.PrunePrior): the runs of an earlier sweep's
// output directory, each run's values of the pruning policy's metric by
// step, from its metrics file (and its stdout, with the sweep's metric
// patterns). What they mean for the policy is runner/schedule's
// (Pruner.UsePrior); this file only reads, bounded and untrusted as every
// reader of a ledger and of what runs leave behind.

// Bounds of a prior's read.
const (
	// priorEnded and priorOthers bound the runs read of one prior: those
	// that succeeded, and the others (pruned, paused, failed, stopped),
	// an even spread of each over its ledgers; the rest are left out.
	priorEnded  = 1024
	priorOthers = 3072
	// priorPoints bounds the points kept of one run's curve (evenly
	// thinned past it).
	priorPoints = 512
)

// ErrPriorRule is the error for a prior given to a pruning policy that
// does not learn from one.
var ErrPriorRule = errors.New("goes with the forecast rule of the pruning policy (a last step and no first rung, or rule forecast)")

// ErrPriorPolicy is the error for a prior with no pruning policy.
var ErrPriorPolicy = errors.New("goes with a pruning policy")

// PriorError is a prior the sweep cannot learn from: Dir (empty when the
// priors as a whole do not go with the pruning policy) and why.
type PriorError struct {
	Dir string
	Err error
}

func (e *PriorError) Error() string {
	if e.Dir == "" {
		return "prune prior: " + e.Err.Error()
	}
	return "prune prior " + e.Dir + ": " + e.Err.Error()
}

func (e *PriorError) Unwrap() error { return e.Err }

// readPriors reads each directory of dirs as a prior of policy (the
// output directory's own excluded), checks that the policy can use it,
// and returns the priors with what the ledger records of each. An error
// names the directory and what is wrong with it.
func readPriors(dirs []string, output string, policy *schedule.Prune, patterns []metrics.Pattern) ([]schedule.Prior, []ledger.Prior, error) {
	if len(dirs) == 0 {
		return nil, nil, nil
	}
	if policy == nil {
		return nil, nil, &PriorError{Err: ErrPriorPolicy}
	}
	if !policy.Forecast {
		return nil, nil, &PriorError{Err: ErrPriorRule}
	}
	pruner, err := schedule.NewPruner(*policy)
	if err != nil {
		return nil, nil, err
	}
	var priors []schedule.Prior
	var recs []ledger.Prior
	for _, dir := range dirs {
		pr, rec, err := readPrior(dir, output, *policy, patterns)
		if err != nil {
			return nil, nil, &PriorError{Dir: dir, Err: err}
		}
		use, err := pruner.CheckPrior(pr)
		if err != nil {
			return nil, nil, &PriorError{Dir: dir, Err: err}
		}
		rec.Finished, rec.MaxStep = use.Finished, use.MaxStep
		priors, recs = append(priors, pr), append(recs, rec)
	}
	return priors, recs, nil
}

// priorRun is a run of a prior to read: where its logs are, and whether
// it succeeded.
type priorRun struct {
	id    string
	logs  string // its run directory, relative to the prior's directory
	ended bool
}

// readPrior reads dir's runs for policy.
func readPrior(dir, output string, policy schedule.Prune, patterns []metrics.Pattern) (schedule.Prior, ledger.Prior, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return schedule.Prior{}, ledger.Prior{}, err
	}
	rec := ledger.Prior{Dir: abs}
	if same(abs, output) {
		return schedule.Prior{}, rec, errors.New("is this sweep's own output directory: a prior is an earlier sweep's")
	}
	if st, err := os.Stat(abs); err != nil {
		return schedule.Prior{}, rec, err
	} else if !st.IsDir() {
		return schedule.Prior{}, rec, errors.New("not a directory: want an earlier sweep's output directory")
	}
	d, err := ledger.ReadDir(abs, ledger.ReadOptions{})
	if err != nil {
		return schedule.Prior{}, rec, err
	}
	logs, err := d.Sweep()
	if errors.Is(err, ledger.ErrNoLedger) {
		return schedule.Prior{}, rec, errors.New("not a sweep's output directory: it holds no ledger (ledger*.jsonl)")
	}
	if err != nil {
		return schedule.Prior{}, rec, err
	}
	if h := logs[0].Header(); h.Sweep != nil {
		rec.Sweep = h.Sweep.Key()
	}
	for _, log := range logs {
		for _, h := range log.Sessions {
			if other, ok := pruneOf(h.Command); ok && other.Metric == policy.Metric && other.Max != policy.Max {
				return schedule.Prior{}, rec, fmt.Errorf("its runs were judged by %s to %s, this sweep's by %s to %s: a prior of the other direction",
					other.Metric, direction(other.Max), policy.Metric, direction(policy.Max))
			}
		}
	}
	runs, err := priorRuns(logs)
	if err != nil {
		return schedule.Prior{}, rec, err
	}
	out := schedule.Prior{Runs: make([]schedule.PriorRun, len(runs))}
	reported := make([]bool, len(runs))
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(runtime.GOMAXPROCS(0), len(runs)) {
		wg.Go(func() {
			for i := range next {
				out.Runs[i], reported[i] = readPriorRun(abs, runs[i], policy.Metric, patterns)
			}
		})
	}
	for i := range runs {
		next <- i
	}
	close(next)
	wg.Wait()
	kept, ids := out.Runs[:0], []string(nil)
	for i, r := range out.Runs {
		if reported[i] {
			kept, ids = append(kept, r), append(ids, runs[i].id)
		}
	}
	out.Runs, rec.Runs, rec.Digest = kept, len(kept), priorDigest(ids, kept)
	return out, rec, nil
}

// priorRuns lists the runs of a prior's ledgers to read: an even spread
// of at most priorEnded of those that succeeded, then of at most
// priorOthers of the others, each with its run directory inside the
// prior's (a run whose records name none, or one outside it, is left
// out), retired runs left out.
func priorRuns(logs []*ledger.Log) ([]priorRun, error) {
	var ended, others []priorRun
	for _, log := range logs {
		err := log.LastAllFields(ledger.NoCurves, func(i int, s *ledger.Started, fin *ledger.Finished) error {
			r := log.At(i)
			if r.Retired {
				return nil
			}
			stdout := ""
			if fin != nil {
				stdout = fin.Stdout
			}
			if stdout == "" && s != nil {
				stdout = s.Stdout
			}
			runDir := filepath.Dir(filepath.FromSlash(stdout))
			if stdout == "" || !filepath.IsLocal(runDir) {
				return nil // no run directory, or one outside the prior's: nothing to read
			}
			pr := priorRun{id: r.ID, logs: runDir, ended: r.State == ledger.StateSucceeded}
			if pr.ended {
				ended = append(ended, pr)
			} else {
				others = append(others, pr)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return append(evenly(ended, priorEnded), evenly(others, priorOthers)...), nil
}

// priorDigest is a digest of what was read of a prior: each run's id,
// whether it ended, and its points, so that a resume tells a changed
// prior.
func priorDigest(ids []string, runs []schedule.PriorRun) string {
	h := sha256.New()
	for i, r := range runs {
		h.Write([]byte(ids[i]))
		var b [17]byte
		if r.Ended {
			b[16] = 1
		}
		for _, pt := range r.Points {
			binary.LittleEndian.PutUint64(b[0:], math.Float64bits(pt[0]))
			binary.LittleEndian.PutUint64(b[8:], math.Float64bits(pt[1]))
			h.Write(b[:])
		}
	}
	return hex.EncodeToString(h.Sum(nil)[:6])
}

// readPriorRun reads run r's values of metric below the prior's
// directory dir: false when it reported none. A file that is a link or
// not a regular file, or that cannot be read, leaves its values out, as
// does a metrics file read only in part (its first steps skipped: what a
// run's curve was at the prior's first rungs would be wrong).
func readPriorRun(dir string, r priorRun, metric string, patterns []metrics.Pattern) (schedule.PriorRun, bool) {
	sum := metrics.Summary{Limit: priorPoints}
	reader := metrics.Reader{Root: dir, Path: filepath.Join(r.logs, metrics.FileName)}
	if err := reader.Read(true, sum.Add); err != nil || reader.Skipped > 0 {
		return schedule.PriorRun{}, false
	}
	if len(patterns) > 0 {
		lr := metrics.Reader{Root: dir, Path: filepath.Join(r.logs, "stdout.log"), Patterns: patterns}
		if err := lr.Read(true, sum.Add); err != nil || lr.Skipped > 0 {
			return schedule.PriorRun{}, false
		}
	}
	m := sum.Get(metric)
	if m == nil {
		return schedule.PriorRun{}, false
	}
	pts := m.Curve(priorPoints + 1)
	if len(pts) == 0 {
		return schedule.PriorRun{}, false
	}
	return schedule.PriorRun{Points: pts, Ended: r.ended}, true
}

// evenly returns at most n of xs, evenly spread over them.
func evenly[T any](xs []T, n int) []T {
	if len(xs) <= n {
		return xs
	}
	out := make([]T, n)
	for i := range out {
		out[i] = xs[i*len(xs)/n]
	}
	return out
}

// same says paths a and b are one directory.
func same(a, b string) bool {
	if b == "" {
		return false
	}
	if ab, err := filepath.Abs(b); err == nil && filepath.Clean(a) == ab {
		return true
	}
	sa, errA := os.Stat(a)
	sb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(sa, sb)
}

// pruneOf finds the pruning policy in the command line of an earlier
// session (--prune SPEC or --prune=SPEC, before any "--"); false without
// one or with one that does not parse.
func pruneOf(argv []string) (schedule.Prune, bool) {
	for i, a := range argv {
		if a == "--" {
			break // the runs' own command: its flags are not nodepack's
		}
		spec, ok := strings.CutPrefix(a, "--prune=")
		if !ok && a == "--prune" && i+1 < len(argv) {
			spec, ok = argv[i+1], true
		}
		if ok {
			p, _, err := schedule.ParsePrune(spec)
			return p, err == nil
		}
	}
	return schedule.Prune{}, false
}

func direction(higher bool) string {
	if higher {
		return "maximise"
	}
	return "minimise"
}

// priorNotes compares the priors this session read with those the
// ledger's last session did: a change is said, not silently used.
func priorNotes(was, now []ledger.Prior, judged bool) []string {
	if slices.EqualFunc(was, now, func(a, b ledger.Prior) bool { return a.Dir == b.Dir && a.Digest == b.Digest }) {
		return nil
	}
	if len(was) == 0 && !judged {
		return nil // a first session with a prior, or one that judged nothing yet
	}
	stand := ""
	if judged {
		stand = ": the judgements made so far stand, and from here on the policy learns from the prior as it is now"
	}
	describe := func(ps []ledger.Prior) string {
		if len(ps) == 0 {
			return "none"
		}
		var b []string
		for _, p := range ps {
			b = append(b, fmt.Sprintf("%s (%d runs, digest %s)", p.Dir, p.Runs, p.Digest))
		}
		return strings.Join(b, ", ")
	}
	return []string{fmt.Sprintf("the prune prior changed since this sweep's last session: it was %s, now %s%s", describe(was), describe(now), stand)}
}
