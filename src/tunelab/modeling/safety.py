"""What tunelab loads and runs from a model folder, decided before anything is loaded.

- **Weights come from safetensors only.** A `.bin` / `.pt` / `.pth` file is a Python pickle, and
  unpickling one can run any code; a folder whose weights are only pickles is refused with the
  lines that convert it (run once, somewhere trusted). Every `from_pretrained` of weights passes
  `use_safetensors=True`, so a folder holding both never falls back to the pickle.
- **`model.trust_remote_code: true` is said and recorded.** transformers then imports the
  folder's Python files: each load warns (`RemoteCodeWarning`, once per process), and the base
  model's identity records the sha256 of every `.py` file and the config's `auto_map`, so a
  reviewer can see what code ran.
- **Remote code is local code, copied into the lab.** An `auto_map` entry that names a Hub
  repository (`"org/repo--module.Class"`, in `config.json` or `tokenizer_config.json`) would
  make transformers download and run that repository's code: it is refused before anything
  loads (`check_auto_map`). transformers copies the folder's own Python files into its modules
  cache before importing them; `use_modules_cache` points that cache into the lab's store
  (`.tunelab/cache/modules`) instead of the user's home.
"""

from __future__ import annotations

import json
import sys
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
        check_auto_map(path)
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


AUTO_MAP_FILES = ("config.json", "tokenizer_config.json")
"""The files whose `auto_map` names the classes that `trust_remote_code` imports."""


def check_auto_map(path: Path) -> None:
    """Refuse, before anything loads, an `auto_map` entry that names a Hub repository
    (`"org/repo--module.Class"`): transformers would fetch and run that repository's code.
    tunelab runs only the Python files of the model folder itself."""
    for name in AUTO_MAP_FILES:
        file = path / name
        if not file.is_file():
            continue
        auto_map = json.loads(file.read_text(encoding="utf-8")).get("auto_map") or {}
        entries = auto_map.items() if isinstance(auto_map, dict) else [("", auto_map)]
        for key, value in entries:
            for ref in value if isinstance(value, list) else [value]:
                if isinstance(ref, str) and "--" in ref:
                    repo, _, local = ref.partition("--")
                    field = f"auto_map.{key}" if key else "auto_map"
                    raise ModelFolderError(
                        f"{file}: {field} is {ref!r}, code from the Hugging Face Hub repository "
                        f"{repo!r}; tunelab runs only the model folder's own Python files and "
                        f"never fetches code. Copy that repository's Python files into {path} "
                        f"and name the class without the repository ({local!r}), or set "
                        "model.trust_remote_code: false."
                    )


MODULES = "modules"
"""The folder of a store's cache (`.tunelab/cache/modules`) that holds trusted models' code."""


def use_modules_cache(folder: Path) -> Path:
    """Make transformers copy a trusted model's Python files into `folder` (a lab's
    `.tunelab/cache/modules`) rather than the user's home cache, and import them from there.

    transformers reads the environment variable `HF_MODULES_CACHE` once, when it is imported,
    into the module constant `transformers.dynamic_module_utils.HF_MODULES_CACHE`; that
    constant is what its copying and importing read, so it is the one set here (the
    environment variable would come too late). When an earlier load in this process has
    already imported the `transformers_modules` package from another folder, this folder is
    added to the package's path, so that modules copied here import too."""
    import transformers.dynamic_module_utils as dynamic

    folder = Path(folder).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    dynamic.HF_MODULES_CACHE = str(folder)
    package = sys.modules.get(dynamic.TRANSFORMERS_DYNAMIC_MODULE_NAME)
    inside = str(folder / dynamic.TRANSFORMERS_DYNAMIC_MODULE_NAME)
    if package is not None and inside not in list(package.__path__):
        package.__path__.append(inside)
    return folder
