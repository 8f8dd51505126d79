"""A lab: its folder, its validated spec, its store and the device, passed explicitly."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

from tunelab.core.env import pick_device
from tunelab.core.spec import SPEC_FILE, Spec, load_spec
from tunelab.core.store import Store


@dataclass
class Lab:
    path: Path
    spec: Spec
    store: Store
    device: torch.device


def open_lab(path: Path, overrides: dict[str, Any] | None = None, device: str | None = None) -> Lab:
    """The lab at `path` with its spec (and this command's overrides) on `device` (a name, or
    None: see `env.pick_device`)."""
    path = Path(path).resolve()
    spec = load_spec(path / SPEC_FILE, overrides)
    return Lab(path=path, spec=spec, store=Store(path), device=pick_device(device))


def open_records_lab(path: Path, overrides: dict[str, Any] | None = None) -> Lab:
    """The lab and its spec without a compute device (`device` is None), for the commands that
    only read records (`plan`, `report`): no torch is imported to pick a device."""
    path = Path(path).resolve()
    spec = load_spec(path / SPEC_FILE, overrides)
    return Lab(path=path, spec=spec, store=Store(path), device=None)  # type: ignore[arg-type]
