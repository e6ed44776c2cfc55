"""hydra/launcher=nodepack: the jobs Hydra gives run through nodepack.

Each job runs as the Hydra app itself, in a process of its own that
nodepack starts on the GPUs and cores the job asks for: the app's script
with the job's overrides and hydra.run.dir set to the job's directory in
the sweep (so .hydra/ and the job's log are where the basic launcher puts
them), hydra.job.num and hydra.job.id set as the basic launcher sets them,
and a callback that writes the return value as JSON (callbacks.py). The
launcher writes one task file per launch, runs it with nodepack run (or
submits it with nodepack submit and waits), then reads every job's return
value and returns one JobReturn per job, in order.
"""
import errno
import json
import logging
import math
import os
import shlex
import signal
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from omegaconf import DictConfig, OmegaConf, open_dict

from hydra.core.hydra_config import HydraConfig
from hydra.core.utils import JobReturn, JobStatus, configure_log, filter_overrides, setup_globals
from hydra.errors import CompactHydraException
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction

from .callbacks import RETURN_FILE, RETURN_FORMAT

log = logging.getLogger(__name__)

# The keys of a job's request, as nodepack's task-file directive takes them.
REQUEST_KEYS = ("gpus", "gpu_mem", "cpus", "mem")
# Hydra overrides of the launching command that are not the job's: the
# launcher, the sweeper and the mode, and what the launcher sets itself.
NOT_PASSED_ON = ("hydra/launcher", "hydra.launcher", "hydra/sweeper", "hydra.sweeper", "hydra.mode",
                 "hydra.run.dir", "hydra.job.num", "hydra.job.id")
# The largest return file read back.
MAX_RETURN_BYTES = 64 << 20


class NodepackError(CompactHydraException):
    """nodepack refused the launch, or the launch could not finish: Hydra
    prints it as the one line it is (a CompactHydraException), not as a
    traceback."""


@dataclass
class _Job:
    idx: int
    overrides: List[str]
    config: DictConfig
    dir: Path
    argv: List[str]  # the app's arguments (sys.argv[1:] in the job)
    line: int = 0  # its line in the launch's task file


def app_command() -> List[str]:
    """How this Hydra app was started: python and its script, or python -m
    and its module."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and spec.name and spec.name != "__main__":
        return [sys.executable, "-m", spec.name.removesuffix(".__main__")]
    return [sys.executable, os.path.abspath(sys.argv[0])]


def quote_override(value: str) -> str:
    """value as a quoted string of Hydra's override grammar."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _key(override: str) -> str:
    return override.lstrip("+~").split("=", 1)[0]


def in_batch_job() -> bool:
    env = os.environ
    return bool(env.get("SLURM_JOB_ID") or env.get("PBS_JOBID") or env.get("LSB_JOBID")
                or (env.get("JOB_ID") and (env.get("SGE_ROOT") or env.get("SGE_TASK_ID"))))


class NodepackLauncher(Launcher):
    def __init__(self, **params: Any) -> None:
        super().__init__()
        self.params = params
        self.config: Optional[DictConfig] = None
        self.task_function: Optional[TaskFunction] = None
        self.hydra_context: Optional[HydraContext] = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.config = config
        self.hydra_context = hydra_context
        self.task_function = task_function
        # Where the jobs run is decided here, before the sweeper makes the
        # sweep's directory: a launch refused leaves nothing behind.
        self.mode = self._mode()

    # -- the launch ---------------------------------------------------------

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        setup_globals()
        assert self.config is not None and self.hydra_context is not None
        configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        p = self.params
        mode = self.mode
        sweep_dir = Path(str(self.config.hydra.sweep.dir)).absolute()
        sweep_dir.mkdir(parents=True, exist_ok=True)
        work = sweep_dir / p.get("output_subdir", ".nodepack")
        work.mkdir(parents=True, exist_ok=True)
        log.info(f"Launching {len(job_overrides)} jobs with nodepack ({mode}): {work}")
        jobs = self._jobs(job_overrides, initial_job_idx)
        name = f"launch-{initial_job_idx}"
        tasks = work / f"{name}.txt"
        out = work / name
        tasks.write_text(self._task_file(jobs))
        cwd = str(self.config.hydra.runtime.cwd)
        nodepack = p.get("nodepack", "nodepack")
        retry = ["--retry-failed"] if p.get("retry_failed") else []
        if mode == "local":
            code = self._run([nodepack, "run", "-o", str(out), *retry, *self._run_flags(), str(tasks)], cwd)
        elif (out / "submissions.jsonl").exists():
            # Submitted before (a multirun run again to resume): new tasks
            # for the jobs left, as a new array.
            code = self._run([nodepack, "resubmit", *retry, *self._submit_flags(resubmit=True), "--wait", str(out)], cwd)
        else:
            code = self._run([nodepack, "submit", *self._submit_flags(), "--wait", "-o", str(out),
                              "--", *self._run_flags(), str(tasks)], cwd)
        if code == 2:
            raise NodepackError(f"nodepack refused the launch (exit 2; its line above says why): {tasks}")
        return self._returns(jobs, out, str(tasks), code)

    def _mode(self) -> str:
        mode = self.params.get("mode", "auto")
        if mode in ("local", "submit"):
            return mode
        if mode != "auto":
            raise NodepackError(f"hydra.launcher.mode={mode}: want auto, local or submit")
        if in_batch_job():
            return "local"
        # A login node only where a scheduler is installed and answers:
        # nodepack submit --check exits 0 when it does, 1 when it does not,
        # 2 when none is installed.
        cmd = [self.params.get("nodepack", "nodepack"), "submit", "--check"]
        if self.params.get("scheduler"):
            cmd.append(f"--{self.params['scheduler']}")
        try:
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        except FileNotFoundError:
            raise NodepackError(f"{cmd[0]}: not found: install nodepack, or set hydra.launcher.nodepack to its path")
        except subprocess.TimeoutExpired:
            res = subprocess.CompletedProcess(cmd, 1, "", "nodepack submit --check: the scheduler did not answer in 120 s")
        if res.returncode == 0:
            return "submit"
        if res.returncode == 2 and not self.params.get("scheduler"):
            return "local"
        why = (res.stderr.strip().splitlines() or [f"exit {res.returncode}"])[-1]
        # Running the whole sweep here instead may be running it on a login
        # node: not a fallback to take unasked.
        raise NodepackError(f"hydra/launcher=nodepack launched nothing: a scheduler is installed here but does not answer ({why}); "
                            f"add hydra.launcher.mode=local to run the jobs on this machine")

    def _jobs(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> List[_Job]:
        assert self.config is not None and self.hydra_context is not None
        passed_on = [o for o in OmegaConf.to_container(self.config.hydra.overrides.hydra)
                     if not _key(o).startswith(NOT_PASSED_ON)]
        callback = "+hydra.callbacks.nodepack_return._target_=hydra_plugins.nodepack_launcher.callbacks.ReturnValue"
        jobs = []
        saved = HydraConfig.instance().cfg
        try:
            for i, overrides in enumerate(job_overrides):
                idx = initial_job_idx + i
                lst = " ".join(filter_overrides(overrides))
                log.info(f"\t#{idx} : {lst}")
                cfg = self.hydra_context.config_loader.load_sweep_config(self.config, list(overrides))
                with open_dict(cfg):
                    cfg.hydra.job.id = idx
                    cfg.hydra.job.num = idx
                HydraConfig.instance().set_config(cfg)  # the job's own, for ${hydra:…} in its directory
                job_dir = Path(str(cfg.hydra.sweep.dir)) / str(cfg.hydra.sweep.subdir)
                job_dir = job_dir.absolute()
                argv = [*passed_on, *overrides, f"hydra.run.dir={quote_override(str(job_dir))}",
                        f"hydra.job.num={idx}", f"hydra.job.id={idx}", callback]
                jobs.append(_Job(idx, list(overrides), cfg, job_dir, argv))
        finally:
            HydraConfig.instance().cfg = saved
        return jobs

    def _request(self, cfg: DictConfig) -> str:
        """The job's own request, as a task-file directive's words; "" for
        none."""
        node = OmegaConf.select(cfg, self.params.get("request_key", "nodepack"), default=None)
        if node is None:
            return ""
        if not isinstance(node, DictConfig):
            raise NodepackError(f"{self.params.get('request_key')}: want a mapping of {', '.join(REQUEST_KEYS)}, got {node!r}")
        words = []
        for k, v in OmegaConf.to_container(node, resolve=True).items():
            if k not in REQUEST_KEYS:
                raise NodepackError(f"{self.params.get('request_key')}.{k}: not a request key ({', '.join(REQUEST_KEYS)})")
            if v is not None:
                words.append(f"{k}={v}")
        return " ".join(words)

    def _task_file(self, jobs: List[_Job]) -> str:
        """One line per job, each after the directive of its request and
        the line of its parameters (its overrides, for the results table
        and the report)."""
        lines = [f"# nodepack task file for {len(jobs)} Hydra jobs, written by hydra/launcher=nodepack"]
        command = app_command()
        current = ""
        for job in jobs:
            request = self._request(job.config)
            if request != current:
                lines.append(f"#nodepack {request}".rstrip())
                current = request
            params = self._params(job)
            if params:
                lines.append("#nodepack params " + json.dumps(params, allow_nan=False))
            lines.append(shlex.join([*command, *job.argv]))
            job.line = len(lines)
        return "\n".join(lines) + "\n"

    def _params(self, job: _Job) -> Dict[str, Any]:
        """The job's overrides as parameters: each key's value in the job's
        config where that is a plain value (typed: 0.1, 3, true), else the
        override's own text (a config group's option: model=convnet).
        Hydra's own keys and the job's request are not parameters."""
        request_key = str(self.params.get("request_key", "nodepack"))
        params: Dict[str, Any] = {}
        for o in filter_overrides(job.overrides):
            key, sep, text = o.partition("=")
            key = key.lstrip("+~")
            if not sep or not key or key == request_key or key.startswith(request_key + ".") or key in params:
                continue
            try:
                value = OmegaConf.select(job.config, key, default=None, throw_on_missing=False)
            except Exception:
                value = None
            if isinstance(value, bool) or isinstance(value, str) or (
                    isinstance(value, (int, float)) and math.isfinite(value)):
                params[key] = value
            else:
                params[key] = text
        return params

    def _run_flags(self) -> List[str]:
        p = self.params
        flags: List[str] = []
        for key, flag in (("gpus_per_run", "--gpus-per-run"), ("runs_per_gpu", "--runs-per-gpu"),
                          ("cpus_per_run", "--cpus-per-run"), ("mem_per_run", "--mem-per-run"),
                          ("gpu_mem_per_run", "--gpu-mem-per-run"), ("parallel_runs_per_node", "--parallel"),
                          ("retries", "--retries")):
            if p.get(key) is not None:
                flags += [flag, str(p[key])]
        for key, flag in (("stagger", "--stagger"), ("timeout", "--timeout")):
            if p.get(key) is not None:
                flags += [flag, f"{float(p[key])}s"]
        if p.get("prune") is not None:
            flags += ["--prune", str(p["prune"])]
        for d in p.get("prune_prior") or []:
            # nodepack runs in the launch's own directory: a path as the
            # user gave it is from where Hydra started.
            flags += ["--prune-prior", os.path.abspath(os.path.expanduser(str(d)))]
        return flags + [str(a) for a in p.get("run_args") or []]

    def _submit_flags(self, resubmit: bool = False) -> List[str]:
        """nodepack submit's flags; for resubmit, those it takes (the
        rest are the first submission's)."""
        p = self.params
        flags: List[str] = []
        if p.get("scheduler"):
            flags.append(f"--{p['scheduler']}")
        for key, flag in (("nodes", "--nodes"), ("total_runs_per_node", "--runs-per-node"), ("time", "--time"),
                          ("gpus_per_node", "--gpus-per-node"), ("cpus_per_node", "--cpus-per-node"),
                          ("mem_per_node", "--mem"), ("partition", "--partition"), ("queue", "--queue"),
                          ("account", "--account")):
            if p.get(key) is not None and not (resubmit and key == "total_runs_per_node"):
                flags += [flag, str(p[key])]
        if p.get("nodes") is None and p.get("total_runs_per_node") is None and not resubmit:
            flags += ["--nodes", "1"]
        for e in p.get("extra") or []:
            flags += ["--extra", str(e)]
        return flags + [str(a) for a in p.get("submit_args") or []]

    def _run(self, cmd: List[str], cwd: str) -> int:
        log.info("nodepack: %s", shlex.join(cmd))
        try:
            proc = subprocess.Popen(cmd, cwd=cwd)
        except FileNotFoundError:
            raise NodepackError(f"{cmd[0]}: not found: install nodepack, or set hydra.launcher.nodepack to its path")
        try:
            return proc.wait()
        except BaseException:
            # Ctrl-C reached nodepack too (one process group); a SIGTERM
            # to this process did not: nodepack stops its runs either way.
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            proc.wait()
            raise

    # -- the results --------------------------------------------------------

    def _status(self, out: Path) -> Dict[str, Dict[str, Any]]:
        """nodepack's row of each run in out, by its origin (tasks.txt:LINE)."""
        cmd = [self.params.get("nodepack", "nodepack"), "status", "--runs", "--format", "json", str(out)]
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode != 0:
            return {}
        try:
            rows = json.loads(res.stdout)
        except json.JSONDecodeError:
            return {}
        return {row.get("origin", ""): row for row in rows if isinstance(row, dict)}

    def _returns(self, jobs: List[_Job], out: Path, task_name: str, code: int) -> List[JobReturn]:
        assert self.config is not None
        rows = self._status(out)
        returns = []
        for job in jobs:
            ret = JobReturn()
            ret.overrides = job.overrides
            ret.cfg = OmegaConf.masked_copy(job.config, [k for k in job.config.keys() if k != "hydra"])
            ret.hydra_cfg = OmegaConf.create({"hydra": job.config.hydra})
            ret.task_name = str(self.config.hydra.job.name)
            ret.working_dir = str(job.dir) if job.config.hydra.job.chdir else str(self.config.hydra.runtime.cwd)
            row = rows.get(f"{task_name}:{job.line}", {})
            doc, why = read_return(job.dir / RETURN_FILE, job.argv)
            # Completed only when nodepack recorded the run as succeeded: a
            # return file alone may be left from an earlier attempt.
            if doc is not None and doc.get("status") == "completed" and row.get("state") == "succeeded":
                if "unencodable" in doc:
                    log.warning(f"#{job.idx}: its return value is no JSON data ({doc['unencodable']}): its repr is returned")
                ret.status, ret.return_value = JobStatus.COMPLETED, doc.get("value")
            else:
                ret.status = JobStatus.FAILED
                ret.return_value = self._failure(job, row, doc, why, out, code)
            returns.append(ret)
            outcome = f"returned {doc.get('value')!r}" if ret.status == JobStatus.COMPLETED else f"failed: {ret._return_value}"
            log.info(f"\t#{job.idx} : {' '.join(filter_overrides(job.overrides))}: {outcome}")
        return returns

    def _failure(self, job: _Job, row: Dict[str, Any], doc: Optional[dict], why: str, out: Path, code: int) -> Exception:
        what = f"job #{job.idx} ({' '.join(filter_overrides(job.overrides))})"
        state = row.get("state")
        if not row or state in ("pending", "running", "interrupted"):
            # Run again, it runs: nodepack run resumes, resubmit submits
            # new tasks for the jobs left.
            did = "did not run" if not row or state == "pending" else f"was {state}"
            return NodepackError(f"{what} {did}: nodepack exited {code} ({why}); run the same multirun again to resume it")
        parts = [f"{what} {state}"]
        if state == "succeeded":
            # nodepack ran it to exit 0, and its value could not be taken.
            parts.append(f"exit 0, but its return value was refused: {why}")
        if row.get("class"):
            parts.append(f"class {row['class']}")
        if row.get("exit_code") not in (None, "") and state != "succeeded":
            parts.append(f"exit {row['exit_code']}")
        if doc is not None and doc.get("status") == "failed":
            parts.append(str(doc.get("error")))
        if row.get("stderr"):
            parts.append(f"log {out / row['stderr']}")
        msg = ": ".join(parts[:1]) + (": " + ", ".join(parts[1:]) if len(parts) > 1 else "")
        if state == "failed":
            # A rerun skips a failed job, as nodepack skips a failed run.
            msg += "; once fixed, run the same multirun again with hydra.launcher.retry_failed=true to run it again"
        return NodepackError(msg)


def read_return(path: Path, argv: List[str]):
    """The job's return document, and why there is none: read only from a
    regular file of this user's (no link followed, a FIFO or a device
    refused without waiting on it), no larger than MAX_RETURN_BYTES, that
    this very job wrote (its arguments match). Whatever the file holds,
    the answer is a document or a reason, never a hang or an exception."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        return None, "the job wrote no return value"
    except OSError as e:
        if e.errno == errno.ELOOP:
            return None, f"{path}: a symbolic link, not followed"
        return None, f"{path}: {e.strerror}"
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        return None, f"{path}: not a regular file"
    with os.fdopen(fd, "rb") as f:
        if st.st_uid != os.getuid():
            return None, f"{path}: not a file of this user's"
        if st.st_size > MAX_RETURN_BYTES:
            return None, f"{path}: larger than {MAX_RETURN_BYTES} bytes"
        data = f.read(MAX_RETURN_BYTES + 1)
        if len(data) > MAX_RETURN_BYTES:
            return None, f"{path}: larger than {MAX_RETURN_BYTES} bytes"
        try:
            doc = json.loads(data)
        except RecursionError:
            return None, f"{path}: nested too deep"
        except (ValueError, UnicodeDecodeError) as e:
            return None, f"{path}: {e}"
    if not isinstance(doc, dict) or doc.get("format") != RETURN_FORMAT:
        return None, f"{path}: not a {RETURN_FORMAT} document"
    if doc.get("argv") != argv:
        return None, f"{path}: written by another job"
    return doc, ""
