"""What `tunelab export` refuses of a run from its record alone: anything but a completed, trained
variant with saved weights. Nothing here imports torch, and the command makes this check before
the others on the run's recorded spec, so a baseline or an interrupted run is told what it is in
well under a second, not that its base model has moved."""

from __future__ import annotations

from pathlib import Path

from tunelab.core.errors import TunelabError
from tunelab.core.ledger import described


class ExportError(TunelabError):
    """The run cannot be exported as asked."""


def check_exportable(record: dict, run_dir: Path) -> None:
    if record["kind"] != "variant" or record["status"] != "completed":
        raise ExportError(
            f"{record['id']} is {described(record, run_dir)}: only a completed, trained "
            "variant has weights to hand over."
        )
    if not record.get("weights"):
        raise ExportError(f"{record['id']} has no saved weights.")


def exportable(lab) -> None:
    """`check_exportable` as a check of the run's recorded lab (`commands.opening.reopened`)."""
    check_exportable(lab.store.read_record(lab.recorded), lab.store.run_dir(lab.recorded))
