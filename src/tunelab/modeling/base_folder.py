"""The folder a base model loads from, found without torch: the model folder `model.path` names
(`hub_cache.locate`), or the plain copy of a GGUF file dequantized once into the lab's store.
`identity` hashes what is found here, so the checks that compare a base with a record (a second
identical baseline) need no model code."""

from __future__ import annotations

from pathlib import Path

from tunelab.core.errors import TunelabError
from tunelab.core.spec import ModelSpec
from tunelab.core.store import STORE_DIR
from tunelab.modeling.safety import require_safetensors


class ModelError(TunelabError):
    """The base model or the method cannot be used as the spec says. `modules` lists the
    model's module names when a target matched none of them."""

    def __init__(self, message: str, modules: list[str] | None = None):
        super().__init__(message)
        self.modules = modules or []


def resolve_path(spec: ModelSpec, lab: Path) -> Path:
    """The folder to load from: the model folder (`locate`), or the cached plain copy of a
    GGUF file (dequantized once into the lab's store, keyed by the file's sha256)."""
    from tunelab.modeling.hub_cache import locate, missing_base

    path = locate(spec, lab)
    if path.suffix == ".gguf":
        from tunelab.modeling.gguf import materialize

        return materialize(path, lab / STORE_DIR / "cache" / "gguf")[0]
    if not (path / "config.json").exists():
        raise ModelError(missing_base(spec, path))
    require_safetensors(path, f"model.path {spec.path!r}")
    return path
