"""The job's side: a Hydra callback that writes the job's return value.

Each job runs in a process of its own (a run of nodepack), as the Hydra
app itself with the job's overrides. This callback, added to that process
by the launcher, writes what the task function returned, or the exception
it raised, as JSON in the job's output directory; the launcher reads it
back. JSON, not pickle: reading it runs no code, whoever wrote the file.
"""
import json
import math
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.core.utils import JobReturn, JobStatus
from hydra.experimental.callback import Callback

RETURN_FILE = ".nodepack-return.json"
RETURN_FORMAT = "nodepack.hydra-return/v1"


def to_json(value: Any) -> Any:
    """value as JSON data: as it is when json takes it; numpy and torch
    scalars and arrays by .item() and .tolist(); OmegaConf containers as
    plain ones. Anything else raises TypeError."""
    try:
        json.dumps(value, allow_nan=True)
        return value
    except (TypeError, ValueError):
        pass
    try:
        from omegaconf import DictConfig, ListConfig, OmegaConf

        if isinstance(value, (DictConfig, ListConfig)):
            return to_json(OmegaConf.to_container(value, resolve=True))
    except ImportError:  # pragma: no cover - omegaconf comes with hydra
        pass
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    for convert in ("item", "tolist"):
        method = getattr(value, convert, None)
        if callable(method):
            try:
                return to_json(method())
            except Exception:
                continue
    raise TypeError(f"{type(value).__name__} is not JSON data")


# The metric a number the job returns is reported as; a returned dict's
# numbers are reported by their keys.
RETURN_METRIC = "return"


def numbers(value: Any, prefix: str = "") -> dict:
    """The finite numbers in a JSON value: a number as RETURN_METRIC (or
    prefix), a dict's by their keys, nested ones joined with '.'; no
    booleans, no lists."""
    if isinstance(value, bool):
        return {}
    if isinstance(value, (int, float)):
        return {prefix or RETURN_METRIC: value} if math.isfinite(value) else {}
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            out.update(numbers(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {}


def report_metrics(value: Any) -> None:
    """Appends the numbers of the job's return value to the run's metrics
    file (NODEPACK_METRICS), one JSON line: nodepack's results table and
    report then show them as the run's metrics, beside the per-step ones
    the job reported itself."""
    path = os.environ.get("NODEPACK_METRICS")
    found = numbers(value)
    found.pop("step", None)  # the metrics file's own key
    if not path or not found:
        return
    try:
        with open(path, "a") as f:
            f.write(json.dumps(found, allow_nan=False) + "\n")
    except OSError as e:  # the value still goes back to Hydra
        print(f"hydra/launcher=nodepack: the return value's numbers are not in the run's metrics: {e}", file=sys.stderr)


class ReturnValue(Callback):
    """Writes the job's return value (or its exception) to RETURN_FILE in
    the job's output directory when the job ends, and its numbers to the
    run's metrics (report_metrics)."""

    def on_job_end(self, config: Any, job_return: JobReturn, **kwargs: Any) -> None:
        doc = {"format": RETURN_FORMAT, "argv": sys.argv[1:], "run_id": os.environ.get("NODEPACK_RUN_ID", "")}
        if job_return.status == JobStatus.COMPLETED:
            doc["status"] = "completed"
            value = job_return._return_value
            try:
                doc["value"] = to_json(value)
            except TypeError as e:
                doc["value"] = repr(value)
                doc["unencodable"] = str(e)
            else:
                report_metrics(doc["value"])
        else:
            error = job_return._return_value
            doc["status"] = "failed"
            doc["error"] = f"{type(error).__name__}: {error}"
        out = Path(HydraConfig.get().runtime.output_dir)
        out.mkdir(parents=True, exist_ok=True)
        text = json.dumps(doc, allow_nan=True)
        # Written whole or not at all: a reader never sees half of it.
        fd, tmp = tempfile.mkstemp(dir=out, prefix=RETURN_FILE + ".")
        try:
            with os.fdopen(fd, "w") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, out / RETURN_FILE)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise

