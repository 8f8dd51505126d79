"""`tunelab.load_bundle`: a bundle's model on the exact base it was trained on, or an error.

PEFT loads an adapter onto any base of the right shape without a word, so a same-shaped but
different base (another checkpoint of the same architecture) gives silently wrong outputs.
This loader hashes the base it is given and refuses one whose weights differ from the base
recorded in the bundle, naming both. A model trained from scratch (`model.init: scratch`) has
no pretrained weights: its base is its config and tokenizer, carried in the bundle's `base/`
folder and checked by their hashes the same way (`modeling.scratch_identity.base_identity`).
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path

from tunelab.core.errors import TunelabError
from tunelab.core.exports import BUNDLE_FILE, SCRATCH_BASE
from tunelab.core.files import DamagedFile, read_json
from tunelab.core.layout import CACHE, STORE_DIR
from tunelab.core.sums import require_plain


class WrongBaseError(TunelabError):
    """The base given is not the one the bundle was trained on."""


def read_bundle(bundle: Path) -> dict:
    path = Path(bundle) / BUNDLE_FILE
    if not Path(bundle).is_dir():
        what = "a file, not a folder" if Path(bundle).exists() else "no such folder"
        raise TunelabError(f"{bundle}: {what}; give the path of a bundle `export` wrote.")
    if not path.exists():
        raise TunelabError(f"{bundle}: no {BUNDLE_FILE}; this is not a tunelab bundle.")
    again = "export the run again (`tunelab export RUN --lab LAB`) or take an undamaged copy"
    try:
        info = read_json(path)
    except DamagedFile as err:  # fsck, which DamagedFile points to, checks labs, not bundles
        raise TunelabError(f"{path}: {err.why}: the bundle was damaged; {again}") from None
    if not isinstance(info, dict) or not isinstance(info.get("base_model"), dict):
        raise TunelabError(
            f"{path}: not what `tunelab export` writes (no base_model record); give the folder "
            f"`export` wrote, or {again}"
        )
    return info


def is_scratch(info: dict) -> bool:
    """Whether the bundle's model was trained from scratch (its base is in the bundle)."""
    return info["base_model"].get("init") == "scratch"


def default_base(info: dict, bundle: Path) -> Path:
    """The base to check when none is given: the recorded path, or a scratch bundle's own
    `base/` folder. A base the run's spec named inside its lab (a relative `model.path`) is
    the one in the lab the bundle lies in: once that lab moved, the recorded absolute path had
    failed `verify` with the same base beside it, and a copy of the lab checked the original
    lab's base."""
    if is_scratch(info):
        return Path(bundle) / SCRATCH_BASE
    recorded = Path(info["base_model"]["path"])
    named = ((info.get("spec") or {}).get("model") or {}).get("path")
    lab = lab_of(bundle)
    if not named or Path(named).expanduser().is_absolute() or lab is None:
        return recorded
    here = (lab / named).resolve()
    return here if here.exists() else recorded


def require_present(info: dict, base: Path, outcome: str = "") -> None:
    """Refuse a base that is not there (no folder with a config.json, no GGUF file): moved, or
    on another machine; `outcome` says what that left undone. A scratch bundle's base is its
    own."""
    base = Path(base).expanduser().resolve()
    if is_scratch(info) or (base.is_file() or (base / "config.json").is_file()):
        return
    raise WrongBaseError(
        f"no base model at {base} (moved, or on another machine?){outcome}: give its folder "
        "with `tunelab verify BUNDLE --base PATH` (or `tunelab.load_bundle(..., base=PATH)`); "
        f"its weights must have the recorded sha256 {info['base_model']['weights_sha256'][:16]}…"
    )


def check_base(info: dict, base: Path) -> dict:
    """The identity of `base`, checked against the bundle's; WrongBaseError names both."""
    recorded = info["base_model"]
    base = Path(base).resolve()
    if is_scratch(info):
        return _check_scratch_base(recorded, base)
    from tunelab.core.spec import ModelSpec
    from tunelab.modeling.identity import TOKENIZER_FILES, changed_files, identity

    require_present(info, base)
    found = identity(ModelSpec(**(info["spec"]["model"] | {"path": str(base)})), base.parent)
    if found["weights_sha256"] != recorded["weights_sha256"]:
        raise WrongBaseError(
            f"the bundle was trained on {recorded['name']} ({recorded['path']}, weights sha256 "
            f"{recorded['weights_sha256']}), but {found['path']} has weights sha256 "
            f"{found['weights_sha256']}. Give the exact base with --base / base=."
        )
    changed = changed_files(recorded, found)
    if built := [n for n in changed if n not in TOKENIZER_FILES]:  # config.json
        raise WrongBaseError(
            f"the bundle was trained on {recorded['name']} ({recorded['path']}): "
            f"{found['path']} holds its weights, but its {' and '.join(built)} "
            f"{'differ' if len(built) > 1 else 'differs'} from the one it trained with "
            f"(sha256 {_digests(recorded, found, built)}): the same weights may build another "
            "model (an activation, a norm's epsilon, a position scaling). Put back the base's "
            "own file, or give the exact base with --base / base=."
        )
    if changed:  # the bundle's own tokenizer is the one loaded: said, not refused
        found = found | {"tokenizer_differs": changed}
    if base.is_dir():  # a bundle an older tunelab made of an encoder-decoder: never sound
        from tunelab.modeling.architecture import require_not_encoder_decoder

        try:
            require_not_encoder_decoder(base, f"the bundle's base {recorded['name']}")
        except TunelabError as err:
            raise TunelabError(
                f"{err} This bundle came from a tunelab that loaded it anyway, dropping half of "
                "it: its predictions do not stand. Train the task again on a supported base."
            ) from None
    return found


def _digests(recorded: dict, found: dict, names: list[str]) -> str:
    before, now = recorded["files"], found["files"]
    return "; ".join(
        f"{n}: {(before.get(n) or 'none')[:16]}… recorded, {(now.get(n) or 'none')[:16]}… found"
        for n in names
    )


def _check_scratch_base(recorded: dict, base: Path) -> dict:
    from tunelab.modeling.scratch_identity import base_identity

    found = base_identity(base)
    if found["weights_sha256"] != recorded["weights_sha256"]:
        recorded_parts = {
            "config.json": recorded.get("config_sha256"),
            "tokenizer/": (recorded.get("tokenizer") or {}).get("sha256"),
        }
        found_parts = {
            "config.json": found["config_sha256"],
            "tokenizer/": found["tokenizer_sha256"],
        }
        parts = [n for n in recorded_parts if recorded_parts[n] != found_parts[n]]
        which = " and ".join(parts) + (" differ" if len(parts) > 1 else " differs")
        raise WrongBaseError(
            f"the bundle was trained from scratch as {recorded['name']} (config and tokenizer "
            f"sha256 {recorded['weights_sha256']}), but {base} hashes to "
            f"{found['weights_sha256']} ({which}). Give the bundle's own {SCRATCH_BASE}/ folder, "
            "as exported, with --base / base=."
        )
    return found | {"name": recorded["name"]}


def lab_of(bundle: Path) -> Path | None:
    """The lab the bundle lies in (a folder above it holds a store), if any."""
    for folder in Path(bundle).resolve().parents:
        if (folder / STORE_DIR).is_dir():
            return folder
    return None


def cache_root(bundle: Path) -> Path:
    """Where loading a bundle keeps derived files (a GGUF base's dequantized copy, a
    remote-code base's modules): the lab's store cache (`LAB/.tunelab/cache`) when the bundle
    lies inside a lab, else the user's cache (`$XDG_CACHE_HOME/tunelab`, by default
    `~/.cache/tunelab`)."""
    lab = lab_of(bundle)
    if lab is not None:
        return lab / STORE_DIR / CACHE
    user = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(user) / "tunelab"


def load_bundle(bundle, base=None, device: str = "cpu"):
    """(model, tokenizer, info): the bundle's model on `base` (default: the recorded base
    path; for a model trained from scratch, the bundle's `base/`), checked first. Classifiers
    come back with their labels, causal LMs ready to generate; both in eval mode on `device`.
    An image classifier comes back with its image processor in the tokenizer's place.

    A GGUF base is dequantized once into `cache_root(bundle)/gguf`, keyed by the file's
    sha256: the lab's store (`LAB/.tunelab/cache/gguf`) when the bundle lies inside a lab,
    else the user's cache (`$XDG_CACHE_HOME/tunelab/gguf`, by default
    `~/.cache/tunelab/gguf`); a later load of the same file finds it there. A bundle whose
    `SHA256SUMS` names a path outside it, or that holds a link, is refused before anything in
    it is read (`core.sums.require_plain`). A base with
    `trust_remote_code` has its Python files copied into `cache_root(bundle)/modules`."""
    import torch

    from tunelab.core.spec import ModelSpec
    from tunelab.modeling.model import load_trained

    bundle = Path(bundle)
    require_plain(bundle)  # a listing that points outside it, or a link: refused unread
    info = read_bundle(bundle)
    base = Path(base or default_base(info, bundle)).resolve()
    check_base(info, base)
    cache = cache_root(bundle)
    if info["spec"]["model"].get("trust_remote_code"):
        from tunelab.modeling.safety import MODULES, use_modules_cache

        use_modules_cache(cache / MODULES)
    if is_scratch(info):  # full weights in the bundle: nothing else to load
        spec = ModelSpec(**info["spec"]["model"])
    else:
        if base.suffix == ".gguf":
            from tunelab.modeling.gguf import materialize

            base = materialize(base, cache / "gguf")[0]
        spec = ModelSpec(**(info["spec"]["model"] | {"path": str(base)}))
    kind = info["kind"]
    lab = lab_of(bundle) or bundle  # paths in the spec are absolute; the lab names its cache
    with _transformers_quiet():
        model = load_trained(spec, lab, bundle, torch.device(device), info["labels"], kind)
    if kind == "image":  # the image processor the run used, saved in the bundle
        from transformers import AutoImageProcessor

        from tunelab.modeling.image_model import IMAGE_BACKEND

        return model, AutoImageProcessor.from_pretrained(bundle, backend=IMAGE_BACKEND), info
    return model, _tokenizer(bundle, info), info


@contextmanager
def _transformers_quiet():
    """transformers' words while the bundle's model is built, off and put back after: its load
    report said the base's head was "reinit due to size mismatch" (the bundle's trained head
    then replaces it), a consumer read that their classifier was re-initialised; and its
    progress bar and deprecation notices. The caller's own settings are left as they were."""
    import warnings

    from transformers.utils import logging

    level, bars = logging.get_verbosity(), logging.is_progress_bar_enabled()
    logging.set_verbosity_error()
    logging.disable_progress_bar()
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=FutureWarning, module="transformers")
            yield
    finally:
        logging.set_verbosity(level)
        if bars:
            logging.enable_progress_bar()


def _tokenizer(bundle: Path, info: dict):
    """The run's tokenizer, as the bundle holds it. A base with `trust_remote_code` may have a
    tokenizer of its own code, which the bundle keeps beside it: it runs only where each of
    the bundle's Python files is one the run allowed (the sha256 its base's identity records),
    never code a sender added or changed."""
    from transformers import AutoTokenizer

    from tunelab.core.digest import sha256_file

    trusted = bool(info["spec"]["model"].get("trust_remote_code"))
    if trusted:
        allowed = ((info.get("base_model") or {}).get("remote_code") or {}).get("files") or {}
        for file in sorted(bundle.rglob("*.py")):
            name = file.relative_to(bundle).as_posix()
            if allowed.get(name) != sha256_file(file):
                raise TunelabError(
                    f"{file}: Python code the run did not allow (its base's identity records "
                    f"{', '.join(allowed) or 'no file'} with their sha256): a bundle's code "
                    "runs only as the run allowed it. Restore the bundle from its sender's copy."
                )
        own = _own_tokenizer_class(bundle)
        if own is not None:
            return own.from_pretrained(bundle)
    return AutoTokenizer.from_pretrained(bundle, trust_remote_code=trusted)


def _own_tokenizer_class(bundle: Path):
    """The tokenizer class a trusted base's code defines, from the bundle's `auto_map`. The
    tokenizer's own `save_pretrained` writes that entry as one name, which its `from_pretrained`
    cannot read back (it wants [slow, fast]): the class is imported from the bundle directly."""
    from transformers.dynamic_module_utils import get_class_from_dynamic_module

    config = read_json(bundle / "tokenizer_config.json")
    ref = (config.get("auto_map") or {}).get("AutoTokenizer") if isinstance(config, dict) else None
    if isinstance(ref, list | tuple):
        ref = next((r for r in reversed(ref) if r), None)  # the fast one, where both are named
    return get_class_from_dynamic_module(ref, bundle) if isinstance(ref, str) else None
