"""`tunelab resume RUN`: continue an interrupted (or lost, or failed) run from its checkpoint,
under the run's own spec and data version, so it ends as an uninterrupted run with the same
seed would; a run stopped after it trained to its end and saved its weights is evaluated from
them, its training not repeated."""

from __future__ import annotations

import json
import os
from pathlib import Path

from rich.console import Console

from tunelab.core import ledger
from tunelab.core.env import pick_device
from tunelab.core.errors import Interrupted, stop_cause
from tunelab.core.lab import recorded_lab
from tunelab.core.run_files import trained_to_end
from tunelab.core.store import Store, now
from tunelab.modeling.checkpoint_files import CHECKPOINT_DIR, STATE, find_checkpoint, written_by
from tunelab.stages.run.lines import processes_text
from tunelab.stages.run.resumable import resumable_record
from tunelab.stages.run.variant import (
    build_model,
    follow,
    mixture_sampler,
    on_world,
    prepare,
    train_and_finish,
)


def resume_run(
    lab_path: Path, run_id: str, console: Console | None = None, device: str | None = None
) -> dict:
    """Continue an interrupted (or lost) run from its checkpoint, under the run's own spec and
    data version, so it ends as an uninterrupted run with the same seed would."""
    store = Store(lab_path)
    record = resumable_record(store, run_id)  # before anything trains
    run_dir = store.run_dir(run_id)
    lab = recorded_lab(store, record)
    lab.device = pick_device(device)
    lab, world = on_world(lab, resumed=True)
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
        if trained_to_end(record, run_dir):
            return {}
        return follow(
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
            **({"evaluated_only": True} if trained_to_end(record, run_dir) else {}),
        }
    )
    if console and checkpoint and not trained_to_end(record, run_dir):
        console.print(_from_line(run_id, checkpoint, world))
    ledger.reopen_run(lab, record)
    return train_and_finish(
        lab, record, run_dir, model, renderer, train_set, sampler, console, True, world
    )


def _from_line(run_id: str, checkpoint: Path, world) -> str:
    """`resuming r006-one from its checkpoint at step 6, written by 1 process, on 2 (ddp) now`:
    where the run goes on from, and on what (DCP reshards a checkpoint for another count)."""
    step = json.loads((checkpoint / STATE).read_text()).get("step")
    wrote = written_by(checkpoint)
    before = (wrote["world_size"], wrote.get("strategy"))
    after = (world.size, world.strategy if world.distributed else None)
    line = f"resuming {run_id} from its checkpoint at step {step}, written by "
    line += processes_text(*before)
    return line + ("" if after == before else f", on {processes_text(*after)} now")
