"""A lab: its folder, its validated spec, its store and the device, passed explicitly."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

from tunelab.core.env import pick_device
from tunelab.core.spec import SPEC_FILE, Spec, load_spec, origin_of, validate_spec
from tunelab.core.store import Store


@dataclass
class Lab:
    path: Path
    spec: Spec
    store: Store
    device: torch.device
    overrides: dict[str, Any] = field(default_factory=dict)
    """This command's `key=value` spec overrides, so a message can say a value came from one."""
    data: str | None = None
    """The data version this command works on: one it was given (an ablation's own version, a
    resumed run's), or else the store's CURRENT, read once when first asked (`data_version`)
    and kept, so a `tunelab data` or an ablation that runs meanwhile cannot change it."""
    recorded: str | None = None
    """The run whose recorded spec this is (`resume`, `noise`, `final`): its values come from
    the record, not from tunelab.yaml."""
    base_given: bool = False
    """Its `model.path` is the `--base` this command was given, not the record's."""

    @property
    def data_version(self) -> str:
        """The data version this command works on (see `data`); a StoreError before any data."""
        if self.data is None:
            self.data = self.store.current_data()
        return self.data

    def where(self, dotted: str) -> str:
        """Where a spec field's value comes from, for a message about it: `tunelab.yaml line
        12`, `method.r=4 (command line)`, `the default`, or a run's record."""
        if self.recorded:
            return f"run {self.recorded}'s record: the spec it trained with, kept as it was"
        return origin_of(dotted, self.path / SPEC_FILE, self.overrides)


Check = Callable[[Lab], None]
"""A check a command needs before any model loads; it raises a TunelabError to refuse."""


def open_lab(
    path: Path,
    overrides: dict[str, Any] | None = None,
    device: str | None = None,
    checks: Sequence[Check] = (),
) -> Lab:
    """The lab at `path` with its spec (and this command's overrides) on `device` (a name, or
    None: see `env.pick_device`). `checks` run first, before the device is picked and so before
    torch is imported: a lab they refuse is refused in well under a second."""
    lab = open_records_lab(path, overrides)
    for check in checks:
        check(lab)
    lab.device = pick_device(device)
    return lab


def recorded_spec(record: dict, base: Path | None = None) -> Spec:
    """The spec a run's record holds; with `base` (`--base`: where its base model is now, the
    recorded place having moved), its `model.path` is that folder, absolute. The identity check
    (`identity.require_recorded_base`) makes sure it is the base the run trained on."""
    spec = validate_spec(record["spec"])
    if base is None:
        return spec
    model = spec.model.model_copy(update={"path": str(Path(base).expanduser().resolve())})
    return spec.model_copy(update={"model": model})


def recorded_lab(
    store: Store, record: dict, checks: Sequence[Check] = (), base: Path | None = None
) -> Lab:
    """A run's lab under the spec and data version its record holds (its base at `base` when
    given), without a device (`resume`, `noise`, `final`, `export`); messages name the record
    as where its values come from. `checks` refuse it before any model loads."""
    spec = recorded_spec(record, base)
    lab = Lab(
        store.lab,
        spec,
        store,
        None,  # type: ignore[arg-type]
        data=record["data_version"],
        recorded=record["id"],
        base_given=base is not None,
    )
    for check in checks:
        check(lab)
    return lab


def open_records_lab(path: Path, overrides: dict[str, Any] | None = None) -> Lab:
    """The lab and its spec without a compute device (`device` is None), for the commands that
    only read records (`compare`, `plan`, `report`): no torch is imported to pick a device."""
    path = Path(path).resolve()
    overrides = dict(overrides or {})
    spec = load_spec(path / SPEC_FILE, overrides)
    return Lab(path=path, spec=spec, store=Store(path), device=None, overrides=overrides)  # type: ignore[arg-type]


def lab_flag(path: Path) -> str:
    """` --lab DIR` for a command a message tells the user to run, where the lab is not the
    folder they are in (a demo's lab under demo-lab/: `tunelab resume r003-lora` alone was
    refused there); DIR relative to it where the lab lies inside it."""
    if Path(path).resolve() == Path.cwd().resolve():
        return ""
    return f" --lab {shown_path(path)}"


def shown_path(path: Path) -> str:
    """`path` for a command line the user copies: relative to the folder they are in where it
    lies inside it, else absolute; quoted for the shell."""
    import os
    import shlex

    here, there = Path.cwd().resolve(), Path(path).resolve()
    return shlex.quote(os.path.relpath(there, here) if here in there.parents else str(there))
