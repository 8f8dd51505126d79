"""A scratch model of a lab: its tokenizer, config and seeded weights, and its identity.

The identity stands where a pretrained base's does (`modeling.model.identity`): its config and
tokenizer digests say what the model is, `weights_sha256` combines them (the initial weights
follow from them and the seed, which the run records), and `params`, `flops_per_token` and
the resolved `config` are what `compare` sets side by side for a fair ablation.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from transformers import PretrainedConfig, PreTrainedModel, PreTrainedTokenizerBase

from tunelab.core.spec import ModelSpec
from tunelab.modeling.bpe import scratch_tokenizer
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
    combined = hashlib.sha256(f"{described['config_sha256']}:{tok['sha256']}".encode())
    return {
        "init": "scratch",
        "path": None,
        "name": f"scratch {described['config_class']}",
        "revision": spec.revision,
        "weights_sha256": combined.hexdigest(),
        "weight_files": [],
        "files": {},
        "tokenizer": tok,
        **described,
    }
