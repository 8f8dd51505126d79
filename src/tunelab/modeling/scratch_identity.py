"""A scratch model of a lab: its tokenizer, config and seeded weights, and its identity.

The identity stands where a pretrained base's does (`modeling.identity.identity`): its config and
tokenizer digests say what the model is, `weights_sha256` combines them (the initial weights
follow from them and the seed, which the run records), and `params`, `flops_per_token` and
the resolved `config` are what `compare` sets side by side for a fair ablation.

A bundle carries that base as files (`write_base`): `config.json`, the resolved config the
identity hashes, and `tokenizer/`, the tokenizer's files byte for byte; `base_identity` hashes
such a folder again, so `tunelab verify` checks a scratch bundle's base as it checks a
pretrained one's weights.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

from transformers import PretrainedConfig, PreTrainedModel, PreTrainedTokenizerBase

from tunelab.core.digest import sha256_file
from tunelab.core.errors import TunelabError
from tunelab.core.spec import ModelSpec
from tunelab.modeling.bpe import (
    files_sha256,
    scratch_tokenizer,
    scratch_tokenizer_folder,
    tokenizer_files,
)
from tunelab.modeling.scratch import build_scratch, describe, scratch_config


def config_for(spec: ModelSpec, tokenizer: PreTrainedTokenizerBase) -> PretrainedConfig:
    """The transformers config of `spec.arch` for this tokenizer's vocabulary and specials."""
    special = {
        "pad_token_id": tokenizer.pad_token_id,
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
    }
    return scratch_config(spec.arch, len(tokenizer), spec.max_length, special)


def scratch_model(
    spec: ModelSpec, lab: Path, seed: int, data_version: str | None = None
) -> PreTrainedModel:
    """Fresh weights for the lab's scratch model, drawn from `seed`, sized for the tokenizer
    of `data_version` (default: the current one)."""
    from tunelab.modeling.model import DTYPES

    tokenizer, _ = scratch_tokenizer(spec, lab, data_version)
    model = build_scratch(config_for(spec, tokenizer), seed, DTYPES[spec.dtype])
    if spec.attention != "auto":
        model.set_attn_implementation(spec.attention)
    return model


def scratch_identity(
    spec: ModelSpec,
    lab: Path,
    sequence_length: int | None = None,
    data_version: str | None = None,
) -> dict:
    """What a run records of its scratch model (see the module docstring); FLOPs per token at
    `sequence_length` (default `spec.max_length`); the tokenizer of `data_version`."""
    tokenizer, tok = scratch_tokenizer(spec, lab, data_version)
    config = config_for(spec, tokenizer)
    described = describe(config, sequence_length or spec.max_length)
    return {
        "init": "scratch",
        "path": None,
        "name": f"scratch {described['config_class']}",
        "revision": spec.revision,
        "weights_sha256": _combined(described["config_sha256"], tok["sha256"]),
        "weight_files": [],
        "files": {},
        "tokenizer": tok,
        **described,
    }


BASE_CONFIG = "config.json"
BASE_TOKENIZER = "tokenizer"


def _combined(config_sha256: str, tokenizer_sha256: str) -> str:
    return hashlib.sha256(f"{config_sha256}:{tokenizer_sha256}".encode()).hexdigest()


def write_base(
    spec: ModelSpec, lab: Path, data_version: str | None, identity: dict, out: Path
) -> None:
    """The scratch base of `identity` as files in `out`: `config.json` (its resolved config)
    and `tokenizer/` (the files of `data_version`'s tokenizer, copied byte for byte)."""
    _, folder, _ = scratch_tokenizer_folder(spec, lab, data_version)
    (out / BASE_TOKENIZER).mkdir(parents=True)
    for file in tokenizer_files(folder):
        shutil.copy2(file, out / BASE_TOKENIZER / file.name)
    text = json.dumps(identity["config"], indent=2, sort_keys=True)
    (out / BASE_CONFIG).write_text(text + "\n", encoding="utf-8")


def base_identity(folder: Path) -> dict:
    """The identity of a scratch base written by `write_base`: the sha256 of its config (as
    `describe` hashes it), of its tokenizer's files, and the two combined (`weights_sha256`)."""
    config = folder / BASE_CONFIG
    tokenizer = folder / BASE_TOKENIZER
    if not config.is_file() or not tokenizer.is_dir():
        raise TunelabError(
            f"{folder}: a scratch model's base is a folder with {BASE_CONFIG} and "
            f"{BASE_TOKENIZER}/ (the bundle's base/); give that folder with --base / base=."
        )
    resolved = json.loads(config.read_text(encoding="utf-8"))
    text = json.dumps(resolved, sort_keys=True, default=str)
    config_sha = hashlib.sha256(text.encode()).hexdigest()
    tok_sha = files_sha256({p.name: sha256_file(p) for p in tokenizer_files(tokenizer)})
    return {
        "path": str(folder),
        "config_sha256": config_sha,
        "tokenizer_sha256": tok_sha,
        "weights_sha256": _combined(config_sha, tok_sha),
    }
