"""What tunelab loads and runs from a model folder, decided before anything is loaded.

- **Weights come from safetensors only.** A `.bin` / `.pt` / `.pth` file is a Python pickle, and
  unpickling one can run any code; a folder whose weights are only pickles is refused with the
  lines that convert it (run once, somewhere trusted). Every `from_pretrained` of weights passes
  `use_safetensors=True`, so a folder holding both never falls back to the pickle.
- **`model.trust_remote_code: true` is said and recorded.** transformers then imports the
  folder's Python files: each load warns (`RemoteCodeWarning`, once per process), and the base
  model's identity records the sha256 of every `.py` file and the config's `auto_map`, so a
  reviewer can see what code ran.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

from tunelab.core.digest import sha256_file
from tunelab.core.errors import TunelabError
from tunelab.core.spec import ModelSpec

WEIGHT_SUFFIXES = (".safetensors",)
"""The only weight files tunelab loads or hashes (a GGUF base is hashed as its one file)."""
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl")
"""Weights as Python pickles: loading one can run any code, so tunelab refuses them."""


class ModelFolderError(TunelabError):
    """A model folder tunelab will not load from (pickled weights only, or no weights)."""


class RemoteCodeWarning(UserWarning):
    """`model.trust_remote_code: true`: the model folder's Python files will run."""


CONVERT_HINT = (
    "Convert them once, in an environment you trust (loading a pickle runs its code):\n"
    "  from transformers import AutoTokenizer, {cls}\n"
    "  {cls}.from_pretrained({src!r}).save_pretrained({dst!r}, safe_serialization=True)\n"
    "  AutoTokenizer.from_pretrained({src!r}).save_pretrained({dst!r})\n"
    "then point {field} at {dst}."
)
ADAPTER_HINT = (
    "Convert the adapter once, in an environment you trust (loading a pickle runs its code): "
    "load it with peft's PeftModel.from_pretrained(base, {src!r}) and save it with "
    "save_pretrained({dst!r}, safe_serialization=True)."
)


def require_safetensors(folder: Path, field: str) -> None:
    """Refuse, before anything is loaded, a folder without `.safetensors` weights (for a PEFT
    adapter: without `adapter_model.safetensors`): tunelab never unpickles `.bin` / `.pt` /
    `.pth` weights, since loading a pickle can run code."""
    adapter = (folder / "adapter_config.json").exists()
    if adapter and (folder / "adapter_model.safetensors").is_file():
        return
    if not adapter and any(p.suffix in WEIGHT_SUFFIXES for p in folder.iterdir()):
        return
    pickles = sorted(p.name for p in folder.iterdir() if p.suffix in PICKLE_SUFFIXES)
    if not pickles:
        raise ModelFolderError(
            f"{field}: {folder} has no .safetensors weights; point {field} at a folder saved "
            "with save_pretrained."
        )
    dst = f"{folder}-safetensors"
    hint = (
        ADAPTER_HINT.format(src=str(folder), dst=dst)
        if adapter
        else CONVERT_HINT.format(cls=_model_class(folder), src=str(folder), dst=dst, field=field)
    )
    raise ModelFolderError(
        f"{field}: {folder} holds its weights only as {', '.join(pickles)}, pickle files "
        f"that tunelab does not load; it loads weights from safetensors only. {hint}"
    )


def _model_class(folder: Path) -> str:
    """The class the folder's config names (so a conversion keeps every weight), else
    AutoModel."""
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        return str(config["architectures"][0])
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        return "AutoModel"


def remote_code(path: Path) -> dict:
    """What `trust_remote_code: true` lets run: the sha256 of each Python file in the model
    folder (by its path inside it) and the config's `auto_map`, which names the classes."""
    config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    files = sorted(p for p in path.rglob("*.py") if p.is_file())
    return {
        "trusted": True,
        "files": {f.relative_to(path).as_posix(): sha256_file(f) for f in files},
        "auto_map": config.get("auto_map"),
    }


def remote_kwargs(spec: ModelSpec, path: Path) -> dict:
    """`trust_remote_code` for a from_pretrained call; when it is true, warn that the model
    folder's code will run (and name the record that keeps its hashes)."""
    if spec.trust_remote_code:
        names = sorted(remote_code(path)["files"]) or ["none in the folder itself"]
        warnings.warn(
            f"model.trust_remote_code is true: transformers will import and run the Python "
            f"code of {path} ({', '.join(names)}) with your permissions. Each file's sha256 "
            "is recorded in the run's base_model.remote_code; read the code before trusting "
            "it, or set model.trust_remote_code: false.",
            RemoteCodeWarning,
            stacklevel=1,  # one place: Python shows the same warning once per process
        )
    return {"trust_remote_code": spec.trust_remote_code}
