"""The launcher's configuration: hydra/launcher=nodepack and its keys."""
from dataclasses import dataclass, field
from typing import List, Optional

from hydra.core.config_store import ConfigStore


@dataclass
class NodepackLauncherConf:
    """What hydra.launcher.* sets. None leaves nodepack's own default."""

    _target_: str = "hydra_plugins.nodepack_launcher.launcher.NodepackLauncher"

    # The nodepack binary: a path, or a name found in PATH.
    nodepack: str = "nodepack"
    # auto: inside a batch job (Slurm, Grid Engine, PBS, LSF), or where no
    # scheduler is installed, run packed on this node (nodepack run);
    # elsewhere (a login node) submit an array job and wait for it
    # (nodepack submit). local and submit choose one.
    mode: str = "auto"

    # What each job asks for, unless its own config says otherwise under
    # request_key (a job's "nodepack: {gpus: 2}" or +nodepack.gpus=2).
    gpus_per_run: Optional[float] = None
    # A number of jobs on one GPU, or auto: as many as their measured
    # steps per second say pays (nodepack run --runs-per-gpu auto).
    runs_per_gpu: Optional[str] = None
    cpus_per_run: Optional[int] = None
    mem_per_run: Optional[str] = None
    gpu_mem_per_run: Optional[str] = None
    request_key: str = "nodepack"

    # clusterduck's knobs: jobs at once on a node (--parallel), jobs per
    # node when submitting (--runs-per-node), seconds between the first
    # wave's lanes opening (--stagger).
    parallel_runs_per_node: Optional[int] = None
    total_runs_per_node: Optional[int] = None
    stagger: Optional[float] = None

    # Seconds before a job is stopped (--timeout), and retries of a
    # failed one (--retries).
    timeout: Optional[float] = None
    retries: Optional[int] = None
    # Early stopping by the metric the jobs report (--prune), such as
    # "loss:min,max=40", and earlier sweeps' directories (an earlier
    # multirun's hydra.sweep.dir/.nodepack/<launch>, or any nodepack
    # output directory) whose runs its forecast rule learns from
    # (--prune-prior, one each; relative to where Hydra was started).
    prune: Optional[str] = None
    prune_prior: List[str] = field(default_factory=list)
    # More flags for nodepack run, as a list: ["--retry", "cuda-oom=2"].
    run_args: List[str] = field(default_factory=list)
    # A multirun run again runs the jobs that did not finish; with
    # retry_failed, also those that failed (nodepack run --retry-failed,
    # resubmit --retry-failed).
    retry_failed: bool = False

    # Submitting (mode submit): the scheduler (slurm, sge, pbs; None: the
    # installed one), nodes (array tasks; with total_runs_per_node, at
    # most this many at once), each task's time limit and what it asks
    # for, and more nodepack submit flags.
    scheduler: Optional[str] = None
    nodes: Optional[int] = None
    time: Optional[str] = None
    gpus_per_node: Optional[int] = None
    cpus_per_node: Optional[int] = None
    mem_per_node: Optional[str] = None
    partition: Optional[str] = None
    queue: Optional[str] = None
    account: Optional[str] = None
    extra: List[str] = field(default_factory=list)
    submit_args: List[str] = field(default_factory=list)

    # Where nodepack keeps each launch's task file, ledger and run logs,
    # under hydra.sweep.dir.
    output_subdir: str = ".nodepack"


ConfigStore.instance().store(group="hydra/launcher", name="nodepack", node=NodepackLauncherConf)
