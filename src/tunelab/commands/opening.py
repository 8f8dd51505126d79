"""Opening a command's lab, and the checks that refuse it before any model loads.

Each check imports what it uses when it runs, and a command opens its lab with them before it
imports its stage (which imports torch), so a refusal takes well under a second."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from tunelab.commands.table import arg

RUN_ARGUMENTS = ("run", "parent", "against")  # the arguments that name a run of the lab
BASE = arg(
    "--base",
    type=Path,
    help="where the base model the run trained on is now, when it moved from the place its "
    "record names (checked against the sha256 the record holds)",
)
"""`final` and `export` of a run whose base moved (`reopened` reads it)."""


def lab_store(path):
    """The store of the lab at `path`, refused when the folder is no lab at all (a mistyped
    --lab read as a lab with no runs yet)."""
    from tunelab.core.errors import TunelabError
    from tunelab.core.spec import SPEC_FILE
    from tunelab.core.store import Store

    store = Store(path)
    if not (store.root.exists() or (store.lab / SPEC_FILE).is_file()):  # a typo, not a new lab
        raise TunelabError(
            f"{store.lab} is not a tunelab lab (no {SPEC_FILE}, no store): name one with "
            "--lab DIR, or write a spec there with `tunelab init`"
        )
    return store


def name_runs(args: argparse.Namespace) -> None:
    """The runs a command line names, as their ids: `r002` for `r002-full` (`Store.resolve_run`),
    so that records, bundles and messages say the id itself."""
    given = {a: getattr(args, a, None) for a in RUN_ARGUMENTS}
    if not any(isinstance(v, str) for v in given.values()):
        return
    store = lab_store(args.lab)
    for name, value in given.items():
        if isinstance(value, str):
            setattr(args, name, store.resolve_run(value))


def opened(args: argparse.Namespace, *checks: Callable):
    """The command's lab, with its overrides; `checks` refuse it before any model loads."""
    from tunelab.core.lab import open_lab
    from tunelab.core.spec import parse_overrides

    overrides = parse_overrides(getattr(args, "overrides", None) or [])
    return open_lab(args.lab, overrides, getattr(args, "device", None), checks)


def reopened(args: argparse.Namespace, *checks: Callable):
    """The lab of an existing run `args.run` under the run's own spec and data version, for
    `resume` and `export`; `checks` refuse it before any model loads, as they do a new run."""
    from tunelab.core.lab import recorded_lab
    from tunelab.core.store import Store

    store = Store(args.lab)
    return recorded_lab(store, store.read_record(args.run), checks, getattr(args, "base", None))


def opened_records(args: argparse.Namespace):
    """The command's lab without a device, for the commands that only read records."""
    from tunelab.core.lab import open_records_lab
    from tunelab.core.spec import parse_overrides

    return open_records_lab(args.lab, parse_overrides(getattr(args, "overrides", None) or []))


def needs_one_change(parent: str | None, reason: str | None) -> Callable:
    """The one-change rule against the new run's parent (`stages.run.diff`), checked again by
    the run itself: refused here, before torch is imported, it takes well under a second."""

    def check(lab) -> None:
        from tunelab.stages.run.diff import base_of, check_one_change, diff_runs, resolve_parent

        record = resolve_parent(lab.store, lab.data_version, parent)
        if record is not None:
            # the base is hashed here only where its path moved (the same bytes elsewhere are
            # no change): a refusal stays well under a second; the run diffs its bytes itself
            moved = ((record.get("spec") or {}).get("model") or {}).get(
                "path"
            ) != lab.spec.model.path
            base = base_of(lab.spec.model, lab.path) if moved else None
            diff = diff_runs(record, lab.spec.to_dict(), lab.data_version, base)
            check_one_change(diff, reason, record["id"])

    return check


def needs_sizable(lab) -> None:
    """A lab whose memory `size` can plan (`Spec.require_sizable`: not an image lab yet)."""
    lab.spec.require_sizable()


def needs_plan(lab) -> None:
    """A hypothesis and a guardrail: what training is for (`Spec.require_plan`)."""
    lab.spec.require_plan()


def needs_usable(lab) -> None:
    """The lab's data version can be trained and evaluated on (read from its manifest)."""
    from tunelab.data.usable import require_usable

    require_usable(lab.store, lab.data_version, lab.spec)


def needs_base(lab) -> None:
    """The base model is where `model.path` says (a folder moved, a typo: refused here)."""
    from tunelab.modeling.hub_cache import require_base

    require_base(lab)


def needs_recorded_base(lab) -> None:
    """The base of a run's recorded lab (or `--base`) is the one the run trained on: its files
    hash as the record holds them (`identity.require_recorded_base`)."""
    from tunelab.modeling.identity import require_recorded_base

    if lab.recorded:
        require_recorded_base(lab.spec.model, lab.path, lab.store.read_record(lab.recorded))


def needs_targets(lab) -> None:
    """The LoRA targets name modules of the base model (read from its safetensors headers)."""
    from tunelab.modeling.targets import require_targets

    require_targets(lab)


def needs_positions(lab) -> None:
    """The spec's sequences fit the base model's positions (read from its config.json)."""
    from tunelab.modeling.positions import require_positions

    require_positions(lab)


def needs_scorable(lab) -> None:
    """A generative lab's format compiles and its validation targets can be scored
    (`tasks.targets.require_scorable`): else the evaluation would stop after the work."""
    from tunelab.tasks.targets import require_scorable

    require_scorable(lab)


def progress(args: argparse.Namespace):
    """The console of a long command's progress, on stderr: live bars on a terminal, plain lines
    where stderr is a file (`training.progress`); none with --json, nor on a rank other than
    the first under torchrun (rank 0 reports the run)."""
    from tunelab.training.distributed import main_process
    from tunelab.views.style import console

    return None if args.json or not main_process() else console(stderr=True)
