package submit

import (
	"slices"
	"sort"
	"strings"
)

// An Inherited is a variable of the submitting shell that changes the job
// a scheduler makes of the script, or what runs in it.
type Inherited struct {
	Name, Value string
	// Why says what it does, in words for a line.
	Why string
}

// installation are the variables that say where a scheduler is, not what
// a job is: the clients need them, and they change no job.
var installation = []string{
	"SLURM_CONF", "SGE_ROOT", "SGE_CELL", "SGE_QMASTER_PORT", "SGE_EXECD_PORT", "SGE_CLUSTER_NAME",
	"PBS_EXEC", "PBS_HOME", "PBS_SERVER", "PBS_CONF_FILE", "PBS_DEFAULT",
}

// InheritedVars returns the variables of environ (os.Environ's form) that
// change a job of scheduler s submitted from it, sorted by name: sbatch
// reads SBATCH_* as options, and the job's environment is the shell's
// (sbatch's --export=ALL, Grid Engine's -V in the script, PBS's
// variables of the submitting shell), so a SLURM_*, SGE_* or PBS_*
// variable set here reaches every task and what its runs start (an
// inherited SLURM_CPU_BIND binds every srun in a run to its CPUs).
func InheritedVars(s Scheduler, environ []string) []Inherited {
	var out []Inherited
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || slices.Contains(installation, k) {
			continue
		}
		var why string
		switch {
		case s == Slurm && strings.HasPrefix(k, "SBATCH_"):
			why = "sbatch reads it as an option of the job, over the script's #SBATCH lines"
		case s == Slurm && strings.HasPrefix(k, "SLURM_CPU_BIND"):
			why = "it goes into the job's environment (sbatch exports this shell's): an srun in a run would bind to it; nodepack leaves it out of its runs' environment"
		case s == Slurm && strings.HasPrefix(k, "SLURM_"):
			why = "it goes into the job's environment (sbatch exports this shell's), where srun and the runs read it"
		case s == SGE && strings.HasPrefix(k, "SGE_"):
			why = "it goes into the job's environment (the script's -V exports this shell's)"
		case s == PBS && strings.HasPrefix(k, "PBS_"):
			why = "PBS passes the submitting shell's PBS_ variables to the job (PBS_O_*), and its own take their place"
		default:
			continue
		}
		out = append(out, Inherited{Name: k, Value: v, Why: why})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
