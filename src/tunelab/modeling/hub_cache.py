"""Bases in Hugging Face's local hub cache: a `model.path` that names a Hub repository
(`ORG/NAME`) and is no folder of the lab is looked up in the cache `transformers` and
`huggingface_hub` download into (`HF_HUB_CACHE`, by default `~/.cache/huggingface/hub`), never
on the network; a snapshot folder of that cache is named by its repository and commit; and a
base found in neither place is refused saying what to do (`missing_base`).

The cache keeps a repository as `models--ORG--NAME/`, its downloaded commits as
`snapshots/<commit>/` (files linked into `blobs/`) and its branch heads in `refs/`.
"""

from __future__ import annotations

import re
from pathlib import Path

from tunelab.core.spec import ModelSpec

REPO_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")
"""A Hub repository id: an owner and a name, one slash between."""


def locate(spec: ModelSpec, lab: Path) -> Path:
    """Where `model.path` is: the file or folder it names (relative to the lab unless
    absolute), else, for a Hub repository id, its snapshot in the local hub cache
    (`cached_snapshot`), else the path as named (the load then says what is missing)."""
    path = spec.location(lab)
    if path.exists() or spec.path is None:
        return path
    return cached_snapshot(spec.path, spec.revision) or path


def looks_like_repo_id(name: str) -> bool:
    return REPO_ID.fullmatch(name) is not None and not name.startswith((".", "~"))


def cached_snapshot(name: str, revision: str | None = None) -> Path | None:
    """The snapshot folder of repository `name` at `revision` (a branch, tag or commit; None:
    `main`) in the local hub cache, if it holds that snapshot's config.json; else None."""
    if not looks_like_repo_id(name):
        return None
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(name, "config.json", revision=revision)
    return Path(found).parent if isinstance(found, str) else None


def cache_folder() -> str:
    from huggingface_hub import constants

    return constants.HF_HUB_CACHE


def hub_snapshot(path: Path) -> tuple[str, str] | None:
    """The repository id and commit of a snapshot folder of the hub cache
    (`.../models--<org>--<name>/snapshots/<commit>`), or None for any other folder."""
    snapshots, repo = path.parent, path.parent.parent
    if snapshots.name != "snapshots" or not repo.name.startswith("models--"):
        return None
    return repo.name.removeprefix("models--").replace("--", "/"), path.name


TEMPLATE_PATHS = ("models/encoder", "models/causal-lm", "models/image-model")
"""The `model.path` placeholders `tunelab init` writes: no model, no Hub id."""


def missing_base(spec: ModelSpec, path: Path) -> str:
    """Why there is no base where `model.path` says, and what to do."""
    if spec.path in TEMPLATE_PATHS and not path.exists():
        return (
            f"model.path {spec.path!r} is the placeholder `tunelab init` wrote: set it to your "
            "base model, a local folder saved with save_pretrained (or, where the task takes "
            "one, a .gguf file or a Hub id already in Hugging Face's local cache)."
        )
    if spec.path is not None and looks_like_repo_id(spec.path) and not path.exists():
        at = f" at revision {spec.revision!r}" if spec.revision else ""
        return (
            f"model.path {spec.path!r}: no folder {path}, and Hugging Face's local cache "
            f"({cache_folder()}) holds no snapshot of {spec.path}{at}. tunelab never downloads: "
            f"fetch it once where the Hub is reachable (`hf download {spec.path}`, into that "
            "cache), or point model.path at a folder saved with save_pretrained."
        )
    what = f"no config.json in {path}" if path.exists() else f"no folder {path}"
    return (
        f"model.path {spec.path!r}: {what}. tunelab loads local models only; point model.path "
        "at a folder saved with save_pretrained."
    )


def _a_base(path: Path) -> bool:
    """A model folder (with its config.json), or a GGUF file."""
    return (path / "config.json").is_file() or (path.is_file() and path.suffix == ".gguf")


def moved_base(path: Path, run: str) -> str:
    """A run's recorded base is not where its record says: its spec cannot be edited, so the
    way out is the base put back, or (to hand the run over) its new place given."""
    return (
        f"the base model {run} trained on is not at {path}, where its record says (moved, "
        "renamed, or on another machine): put it back there (a symbolic link will do), or give "
        "its place with --base PATH (`final`, `export`: checked against the sha256 the record "
        "holds); editing tunelab.yaml does not change a run's record."
    )


def require_base(lab) -> None:
    """Refuse a base model that is not where `model.path` says (a folder moved, a typo), that is
    an encoder-decoder (`architecture`), whose weights are only pickles, or whose files are
    damaged (`whole_files.require_whole`), before a
    command records anything: the load says so too,
    but only after a run, a seed group or the test split's opening would have been recorded.
    A model built from scratch has no base."""
    from tunelab.core.errors import TunelabError

    model = lab.spec.model
    if model.scratch or model.path is None:
        return
    path = locate(model, lab.path)
    if lab.base_given and not _a_base(path):
        what = "no config.json in it" if path.is_dir() else "no such folder"
        raise TunelabError(
            f"--base {path}: no base model there ({what}): give the folder the base "
            f"{lab.recorded} trained on lies in now, as saved with save_pretrained"
        )
    if not path.exists():
        raise TunelabError(
            moved_base(path, lab.recorded) if lab.recorded else missing_base(model, path)
        )
    if path.is_dir() and (path / "config.json").is_file():  # the load refuses pickles too,
        from tunelab.modeling.architecture import require_known_type, require_not_encoder_decoder
        from tunelab.modeling.safety import require_safetensors  # after torch: seconds later

        require_not_encoder_decoder(path, f"model.path {model.path!r}")
        require_known_type(path, f"model.path {model.path!r}", model.trust_remote_code)
        require_safetensors(path, f"model.path {model.path!r}")
        from tunelab.modeling.whole_files import require_whole

        require_whole(path, f"model.path {model.path!r}", images=bool(lab.spec.images))
