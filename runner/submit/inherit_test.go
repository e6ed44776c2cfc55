package submit

import (
	"fmt"
	"testing"
)

// TestInheritedVars: the variables of the submitting shell that change a
// job, for its scheduler only; where a scheduler is installed is none.
func TestInheritedVars(t *testing.T) {
	env := []string{"HOME=/h", "SLURM_CONF=/etc/slurm.conf", "SBATCH_PARTITION=debug", "SLURM_CPU_BIND=map_cpu:0",
		"SLURM_JOB_ID=7", "SGE_ROOT=/sge", "SGE_TASK_ID=3", "PBS_EXEC=/pbs", "PBS_O_QUEUE=q", "noequals"}
	for _, tc := range []struct {
		s    Scheduler
		want string
	}{
		{Slurm, "[SBATCH_PARTITION SLURM_CPU_BIND SLURM_JOB_ID]"},
		{SGE, "[SGE_TASK_ID]"},
		{PBS, "[PBS_O_QUEUE]"},
	} {
		var names []string
		for _, v := range InheritedVars(tc.s, env) {
			if v.Why == "" {
				t.Errorf("%s: no why", v.Name)
			}
			names = append(names, v.Name)
		}
		if fmt.Sprint(names) != tc.want {
			t.Errorf("%s: %v, want %s", tc.s, names, tc.want)
		}
	}
}
