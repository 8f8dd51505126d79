"""`tunelab resume RUN`: continue an interrupted (or lost, or failed) run from its checkpoint,
under the run's own spec and data version, so it ends as an uninterrupted run with the same
seed would; a run stopped after it trained to its end and saved its weights is evaluated from
them, its training not repeated."""

from __future__ import annotations

import os
from pathlib import Path

from rich.console import Console

from tunelab.core import ledger
from tunelab.core.audit import require_as_logged
from tunelab.core.env import pick_device
from tunelab.core.errors import Interrupted, TunelabError, stop_cause
from tunelab.core.lab import recorded_lab
from tunelab.core.layout import RECORD
from tunelab.core.run_files import changed_weights
from tunelab.core.store import Store, now
from tunelab.modeling.checkpoint import CHECKPOINT_DIR, find_checkpoint, written_by
from tunelab.stages.run.variant import (
    _follow,
    _on_world,
    _train_and_finish,
    _trained,
    build_model,
    mixture_sampler,
    prepare,
)
from tunelab.training.distributed import main_process


def resume_run(
    lab_path: Path, run_id: str, console: Console | None = None, device: str | None = None
) -> dict:
    """Continue an interrupted (or lost) run from its checkpoint, under the run's own spec and
    data version, so it ends as an uninterrupted run with the same seed would."""
    store = Store(lab_path)
    record = store.read_record(run_id)
    run_dir = store.run_dir(run_id)
    require_as_logged(store, run_dir / RECORD, "`tunelab resume`")  # before anything trains
    _check_resumable(record, run_dir)
    lab = recorded_lab(store, record)
    lab.device = pick_device(device)
    lab, world = _on_world(lab)
    try:
        renderer, train_set, _, _ = prepare(lab, record["data_version"], "resuming")
        sampler = mixture_sampler(lab, record["data_version"], train_set)
        model, _ = build_model(lab, renderer.labels, record["data_version"])
    except KeyboardInterrupt as err:  # before it runs again: the record is as it was
        raise Interrupted(
            stop_cause(err),
            f"run {run_id} was not started again and is still {record['status']}, with its "
            f"checkpoint; `tunelab resume {run_id}` continues it.",
            run=run_id,
            resumable=True,
        ) from err
    if not world.main:  # a run trained to its end is evaluated by rank 0 alone
        if _trained(record, run_dir):
            return {}
        return _follow(
            lab, world, model, renderer, train_set, sampler, run_dir, record["data_version"]
        )
    checkpoint = find_checkpoint(run_dir / CHECKPOINT_DIR)
    record.setdefault("resumed", []).append(
        {
            "time": now(),
            "pid": os.getpid(),
            "world_size": world.size,
            "strategy": world.strategy,
            # DCP reshards a checkpoint for another number of processes or strategy
            "checkpoint_written_by": written_by(checkpoint) if checkpoint else None,
            **({"evaluated_only": True} if _trained(record, run_dir) else {}),
        }
    )
    ledger.reopen_run(lab, record)
    return _train_and_finish(
        lab, record, run_dir, model, renderer, train_set, sampler, console, True, world
    )


def _check_resumable(record: dict, run_dir: Path) -> None:
    """Only an interrupted, lost or failed run with a checkpoint can be resumed. Under several
    processes rank 0 judges the status (it reopens the run, maybe before another rank looks)."""
    run_id, status = record["id"], ledger.effective_status(record, run_dir)
    if main_process() and status not in ("interrupted", "lost", "failed"):
        still = f" (process {record['process']['pid']})" if status == "running" else ""
        raise TunelabError(
            f"{run_id} is {status}{still}: only an interrupted, lost or failed run can be resumed"
        )
    trained = _trained(record, run_dir)
    if find_checkpoint(run_dir / CHECKPOINT_DIR) is None and not trained:
        every = ((record.get("spec") or {}).get("training") or {}).get("checkpoint_every")
        why = (
            f"it stopped before its first checkpoint (every {every} steps)"
            if every
            else "set training.checkpoint_every to checkpoint long runs"
        )
        raise TunelabError(f"{run_id} has no checkpoint to resume from ({why}); start a new run")
    if trained:  # resuming evaluates the saved weights: those the record hashed, or none
        changed = [f"{p.name} {problem}" for p, problem in changed_weights(run_dir, record)]
        if changed:
            raise TunelabError(
                f"{run_dir}: {run_id}'s saved weights are not as it wrote them "
                f"({'; '.join(changed)}), and resuming would evaluate them: restore them "
                "from a backup, or start a new run."
            )
