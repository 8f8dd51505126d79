"""What `tunelab export` refuses of a run from its record alone: anything but a completed, trained
variant with saved weights. Nothing here imports torch, and the command makes this check before
the others on the run's recorded spec, so a baseline or an interrupted run is told what it is in
well under a second, not that its base model has moved."""

from __future__ import annotations

from pathlib import Path

from tunelab.core.errors import TunelabError
from tunelab.core.ledger import described
from tunelab.modeling.checkpoint_files import can_resume


class ExportError(TunelabError):
    """The run cannot be exported as asked."""


def check_exportable(record: dict, run_dir: Path) -> None:
    if record["kind"] != "variant" or record["status"] != "completed":
        raise ExportError(
            f"{record['id']} is {described(record, run_dir)}: only a completed, trained "
            f"variant has weights to hand over. {_instead(record, run_dir)}"
        )
    if not record.get("weights"):
        raise ExportError(f"{record['id']} has no saved weights.")


def _instead(record: dict, run_dir: Path) -> str:
    """What to do instead: finish the run, or train a variant to hand over."""
    status = described(record, run_dir).split()[1]
    if record["kind"] == "variant" and status in ("interrupted", "lost", "failed"):
        if not can_resume(record, run_dir):  # `resume` would refuse it: start it over
            return (
                "It kept no checkpoint to resume from: train it again (`tunelab run`, with "
                "training.checkpoint_every for a long run), then export that run."
            )
        return f"`tunelab resume {record['id']}` finishes it; then export it."
    if record["kind"] == "variant":  # running, or invalidated
        return "Export a completed variant (`tunelab runs` lists them)."
    if record.get("name") == "probe":  # its head was fitted, on frozen features
        return (
            "A probe baseline is a linear head fitted on the frozen base's features, measured "
            "to judge variants against, not a bundle: train a variant that starts from its head "
            "(`tunelab run method.head_init=probe`) and export that."
        )
    return (
        "A baseline is the base model as it is, with nothing trained to hand over: train a "
        "variant from it (`tunelab run`) and export that."
    )


def exportable(lab) -> None:
    """`check_exportable` as a check of the run's recorded lab (`commands.opening.reopened`)."""
    check_exportable(lab.store.read_record(lab.recorded), lab.store.run_dir(lab.recorded))
