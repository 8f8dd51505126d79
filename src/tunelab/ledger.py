"""The experiment ledger: every run's record, opened before work starts and never deleted.

A record is written as soon as the run exists (status `running`) and rewritten atomically as
it ends (`completed`, `interrupted`, `failed`), so a crash never loses a run from the record.
"""

from __future__ import annotations

import traceback
from pathlib import Path

from tunelab.env import fingerprint
from tunelab.lab import Lab
from tunelab.store import now
from tunelab.tasks import get_task


def open_run(lab: Lab, name: str, kind: str, data_version: str, **fields) -> tuple[dict, Path]:
    run_id, run_dir = lab.store.new_run(name)
    record = {
        "id": run_id,
        "name": name,
        "kind": kind,
        "status": "running",
        "created": now(),
        "data_version": data_version,
        "task": lab.spec.task.type,
        "spec": lab.spec.to_dict(),
        "env": fingerprint(lab.device),
        **fields,
    }
    lab.store.write_record(run_id, record)
    lab.store.log_event("run_started", run=run_id, kind=kind)
    return record, run_dir


def close_run(lab: Lab, record: dict, status: str, error: BaseException | None = None) -> None:
    record["status"] = status
    record["ended"] = now()
    if error is not None:
        record["error"] = "".join(traceback.format_exception(error))
    lab.store.write_record(record["id"], record)
    lab.store.log_event("run_" + status, run=record["id"])


def summary(record: dict) -> dict:
    """One line of `tunelab runs`: status and the primary metric."""
    metrics = record.get("metrics") or {}
    hypothesis = record.get("spec", {}).get("hypothesis")
    metric = hypothesis["metric"] if hypothesis else get_task(record["task"]).default_metric
    return {
        "id": record["id"],
        "kind": record["kind"],
        "status": record["status"],
        "data_version": record["data_version"],
        "method": record.get("method"),
        "metric": metric,
        "value": metrics.get(metric),
        "created": record["created"],
    }
