"""LoRA targets checked by name before any weights load.

A model's module names are read from the headers of its safetensors files (a few kilobytes of
JSON at the start of each file) and its `config.json`, without importing torch or transformers,
so `run`, `check` and `size` refuse a target the architecture does not have in well under a
second instead of after the model has loaded. The load checks again on the built model
(`modeling.model.check_targets`, then PEFT); this check refuses only what those refuse too: a
name no module has, or one whose modules hold no weights (a dropout), which PEFT cannot adapt.
"""

from __future__ import annotations

import json
from pathlib import Path

from tunelab.core.errors import TunelabError
from tunelab.core.lab import Lab
from tunelab.core.spec import LoraMethod, ModelSpec
from tunelab.modeling.hub_cache import locate
from tunelab.modeling.whole_files import NotSafetensors, safetensors_header

HEAD_NAMES = frozenset(
    {
        "classifier",
        "pre_classifier",
        "classification_head",
        "score",
        "out_proj",
        "summary",
        "lm_head",
        "embed_out",
    }
)
"""Modules a model may get at load time without their weights in the checkpoint: the new
sequence-classification head (`classifier`, `score`, ...) and an output layer tied to the
embeddings (`lm_head`). A target naming one of them is left to the check on the built model."""


class TargetError(TunelabError):
    """A LoRA target or module to save that names no module of the model."""


def require_targets(lab: Lab) -> None:
    """Refuse `method.target_modules` or `method.modules_to_save` entries that match no module
    of the lab's base model, naming where the entry comes from and the modules it has. Does
    nothing for full fine-tuning, or when the checkpoint's names cannot be read without loading
    it (a GGUF file, pickled weights): the load checks those."""
    method = lab.spec.method
    if not isinstance(method, LoraMethod):
        return
    folder = model_folder(lab.spec.model, lab.path)
    names = checkpoint_modules(folder) if folder else None
    if not names:
        return
    for field, patterns in (
        ("method.target_modules", method.target_modules or []),  # left out: the blocks
        ("method.modules_to_save", method.modules_to_save or []),
    ):
        missing = unmatched(patterns, names)
        if missing:
            where = lab.where(field)
            subject = where if where.startswith(f"{field}=") else f"{field} ({where})"
            verb = "matches" if len(missing) == 1 else "match"
            raise TargetError(
                f"{subject}: {', '.join(map(repr, missing))} {verb} no "
                f"module of {_described(folder)}. Its modules with a weight matrix are named "
                f"{weight_matrices(names)}; name some of them in {field}."
            )


def model_folder(model: ModelSpec, lab: Path) -> Path | None:
    """The model folder `model.path` names (relative to the lab unless absolute), or None when
    it is not a folder with a config.json (a GGUF file, a wrong path: the load says which)."""
    folder = locate(model, lab)
    return folder if (folder / "config.json").is_file() else None


def checkpoint_modules(folder: Path) -> dict[str, list[int]]:
    """Every module named in the folder's safetensors headers, each with the shape of its
    `weight` (empty for a module that only holds others, or has no `weight`). Empty when the
    folder has no safetensors file."""
    modules: dict[str, list[int]] = {}
    for file in sorted(folder.glob("*.safetensors")):
        for tensor, shape in _header(file).items():
            module, _, param = tensor.rpartition(".")
            parts = module.split(".") if module else []
            for i in range(1, len(parts) + 1):
                modules.setdefault(".".join(parts[:i]), [])
            if module and param == "weight":
                modules[module] = shape
    return modules


def _header(file: Path) -> dict[str, list[int]]:
    """Tensor name -> shape from a safetensors file's header, reading only the header."""
    try:
        _, header = safetensors_header(file)
    except NotSafetensors as err:
        raise TargetError(f"{file}: {err}") from None
    return {k: v.get("shape", []) for k, v in header.items() if k != "__metadata__"}


def matches(name: str, pattern: str) -> bool:
    """PEFT's rule for a list of target names: the full module name or its last components.
    A pattern may also carry a prefix the checkpoint's names lack (`bert.` when the checkpoint
    was saved from the bare encoder and loads under a head)."""
    return name == pattern or name.endswith("." + pattern) or pattern.endswith("." + name)


def unmatched(patterns: list[str], names: dict[str, list[int]]) -> list[str]:
    """The patterns that match no module in `names` and cannot be a module the model only gets
    at load time (a new head, a tied output layer: HEAD_NAMES)."""
    return [
        p
        for p in patterns
        if not any(matches(n, p) for n in names) and not HEAD_NAMES & set(p.split("."))
    ]


def weight_matrices(names: dict[str, list[int]]) -> list[str]:
    """The last name component of each module with a 2-D weight (linear layers, embeddings):
    what LoRA can adapt, as a target list names them."""
    return sorted({n.rsplit(".", 1)[-1] for n, shape in names.items() if len(shape) == 2})


def _described(folder: Path) -> str:
    """`model (bert)`: the folder's name and its config's model_type, when it says one."""
    try:
        kind = json.loads((folder / "config.json").read_text(encoding="utf-8")).get("model_type")
    except (OSError, ValueError, AttributeError):
        kind = None
    return f"{folder.name} ({kind})" if kind else folder.name
