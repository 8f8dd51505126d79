"""What `tunelab resume` refuses, read from the run's record and folder alone: a record that is
not as its event logged it, a run that is not interrupted, lost or failed, one with no checkpoint
to continue from, a checkpoint or saved weights that are not as the run wrote them. Nothing here
imports torch, so the command says so in well under a second, before it makes `run`'s checks
on the recorded spec or loads any model (it took 7 s when these came after the stage's
imports)."""

from __future__ import annotations

from pathlib import Path

from tunelab.core import ledger
from tunelab.core.audit import require_as_logged
from tunelab.core.errors import TunelabError
from tunelab.core.layout import RECORD
from tunelab.core.run_files import changed_weights, trained_to_end
from tunelab.core.store import Store
from tunelab.modeling.checkpoint_files import (
    CHECKPOINT_DIR,
    checkpoint_problems,
    find_checkpoint,
    lacks_state,
)
from tunelab.training.distributed import main_process


def resumable_record(store: Store, run_id: str) -> dict:
    """The record of `run_id` when the run can be resumed (`check_resumable`), its record as
    the log has it; else TunelabError saying why."""
    record = store.read_record(run_id)
    run_dir = store.run_dir(run_id)
    require_as_logged(store, run_dir / RECORD, "`tunelab resume`")  # before anything trains
    check_resumable(record, run_dir)
    return record


def resumable(lab) -> None:
    """`resumable_record` as a check of the run's recorded lab (`commands.opening.reopened`),
    made before the others: a completed run is told so, not that its base moved."""
    resumable_record(lab.store, lab.recorded)


def check_resumable(record: dict, run_dir: Path) -> None:
    """Only an interrupted, lost or failed run with a checkpoint can be resumed. Under several
    processes rank 0 judges the status (it reopens the run, maybe before another rank looks)."""
    run_id, status = record["id"], ledger.effective_status(record, run_dir)
    if main_process() and status not in ("interrupted", "lost", "failed"):
        still = f" (process {record['process']['pid']})" if status == "running" else ""
        raise TunelabError(
            f"{run_id} is {status}{still}: only an interrupted, lost or failed run can be resumed"
        )
    trained = trained_to_end(record, run_dir)
    found = find_checkpoint(run_dir / CHECKPOINT_DIR)
    if found is None and not trained:
        if lacks_state(run_dir / CHECKPOINT_DIR):
            raise TunelabError(
                f"{run_dir / CHECKPOINT_DIR}: {run_id}'s checkpoint has no state.json (the step "
                "and schedule it resumes at, written last), so it is damaged, not whole: it "
                "cannot be resumed from; start a new run"
            )
        if record.get("checkpoint"):  # one was written as it stopped: gone since
            raise TunelabError(
                f"{run_id}'s checkpoint ({run_dir / record['checkpoint']}) is missing: its "
                "record says the run kept one when it stopped, so it was deleted since, or not "
                "copied (or committed) with the lab. Restore it to resume, or start a new run."
            )
        every = ((record.get("spec") or {}).get("training") or {}).get("checkpoint_every")
        why = (
            f"it stopped before its first checkpoint (every {every} steps)"
            if every
            else "set training.checkpoint_every to checkpoint long runs"
        )
        raise TunelabError(f"{run_id} has no checkpoint to resume from ({why}); start a new run")
    if found is not None and not trained and (problems := checkpoint_problems(found)):
        raise TunelabError(
            f"{run_id}'s checkpoint is not as the run wrote it ({'; '.join(problems)}): "
            "resuming would train on from damaged state. Restore it from a backup, or start a "
            "new run; the run stays as it is."
        )
    if trained:  # resuming evaluates the saved weights: those the record hashed, or none
        changed = [f"{p.name} {problem}" for p, problem in changed_weights(run_dir, record)]
        if changed:
            raise TunelabError(
                f"{run_dir}: {run_id}'s saved weights are not as it wrote them "
                f"({'; '.join(changed)}), and resuming would evaluate them: restore them "
                "from a backup, or start a new run."
            )
