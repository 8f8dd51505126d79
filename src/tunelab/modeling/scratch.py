"""A causal LM built from `model.arch` with transformers' own config classes, seeded.

Which config each spec asks for:

- dense, RoPE in every layer: `LlamaConfig` (`num_key_value_heads` < heads is GQA, 1 is MQA);
- some layers without positions (`arch.rope.nope_layers`): `SmolLM3Config`, whose
  `no_rope_layers` holds 1 for a RoPE layer and 0 for a NoPE one;
- experts (`arch.moe.num_experts > 0`): `Qwen2MoeConfig` (its query/key/value bias off, to
  match the Llama block).

The weights come from `AutoModelForCausalLM.from_config` under `torch.manual_seed(seed)` in a
forked RNG, so the same config and seed always give the same weights and the caller's random
state is left as it was.

FLOPs per token (training: forward + backward), after PaLM (Chowdhery et al. 2022, app. B):
`6 * N + 12 * L * T * d_attn`, where N is the active parameters that take part in matrix
products (all active parameters but the input embedding; the output head counts, also when it
is tied to the embedding), L the layers, T the sequence length and d_attn = heads * head_dim.
The second term is the attention scores and their weighted sum, which parameter counts miss.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from transformers import AutoModelForCausalLM, PretrainedConfig, PreTrainedModel

from tunelab.core.scratch import Arch

FLOPS_FORMULA = (
    "6 * N + 12 * L * T * d_attn (PaLM, appendix B): N active parameters in matrix products "
    "(input embedding excluded, output head included), L layers, T sequence length, "
    "d_attn = heads * head_dim"
)


def scratch_config(
    arch: Arch, vocab_size: int, max_length: int, special: dict[str, int | None]
) -> PretrainedConfig:
    """The transformers config of `arch` (see the module docstring for which class)."""
    from transformers import LlamaConfig, Qwen2MoeConfig

    common = {
        "vocab_size": vocab_size,
        "hidden_size": arch.hidden_size,
        "num_hidden_layers": arch.num_hidden_layers,
        "num_attention_heads": arch.num_attention_heads,
        "num_key_value_heads": arch.kv_heads,
        "intermediate_size": arch.intermediate_size,
        "max_position_embeddings": max_length,
        "rms_norm_eps": arch.rms_norm_eps,
        "initializer_range": arch.initializer_range,
        "tie_word_embeddings": arch.tie_embeddings,
        "rope_parameters": {"rope_type": "default", "rope_theta": arch.rope.theta},
        "use_cache": True,
        **special,
    }
    if arch.moe.num_experts:
        moe = arch.moe
        return Qwen2MoeConfig(
            **common,
            num_experts=moe.num_experts,
            num_experts_per_tok=moe.experts_per_token,
            moe_intermediate_size=arch.expert_size,
            shared_expert_intermediate_size=moe.shared_expert_size,
            mlp_only_layers=list(moe.dense_layers),
            decoder_sparse_step=1,
            router_aux_loss_coef=moe.router_aux_loss,
            output_router_logits=moe.router_aux_loss > 0,
            norm_topk_prob=moe.normalize_top_k,
            qkv_bias=False,
        )
    if arch.rope.nope_layers:
        return _smollm3(common, arch)
    return LlamaConfig(**common, attention_bias=False, mlp_bias=False)


def _smollm3(common: dict, arch: Arch) -> PretrainedConfig:
    from transformers import SmolLM3Config  # the spec checked that it is there

    nope = set(arch.rope.nope_layers)
    return SmolLM3Config(
        **common,
        no_rope_layers=[0 if i in nope else 1 for i in range(arch.num_hidden_layers)],
        attention_bias=False,
        mlp_bias=False,
    )


@contextmanager
def _empty_shared_expert() -> Iterator[None]:
    """Experts without a shared one are Qwen2MoE with a shared expert of width 0, whose empty
    linear layers make torch warn "Initializing zero-element tensors is a no-op" at every
    build; that one warning is expected here and kept out of the output."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Initializing zero-element tensors is a no-op")
        yield


def untrainable(model: torch.nn.Module) -> dict[str, str]:
    """The parameters no gradient can reach by construction, each with why, for full
    fine-tuning to freeze. Experts without a shared one are Qwen2MoE with a shared expert of
    width 0: its projections are empty, and the sigmoid gate in front of it scales that
    expert's output of zeros, so none of them can learn (`tunelab check` found them: "trainable
    but no gradient reached them"). Every other model: none."""
    config = getattr(model, "config", None)
    if getattr(config, "shared_expert_intermediate_size", None) != 0:
        return {}
    why = "the shared expert has width 0 (moe.shared_expert_size 0): its output is all zeros"
    return {
        n: why
        for n, _ in model.named_parameters()
        if ".mlp.shared_expert." in n or ".mlp.shared_expert_gate." in n
    }


def build_scratch(config: PretrainedConfig, seed: int, dtype: torch.dtype) -> PreTrainedModel:
    """Fresh weights for `config`, the same for the same seed (the caller's RNG untouched)."""
    with torch.random.fork_rng(devices=[]), _empty_shared_expert():
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    return model


def parameter_counts(config: PretrainedConfig) -> dict[str, int]:
    """Total parameters, active ones per token (the routed experts a token skips left out),
    and the input embedding's, counted on a weightless (meta) copy of the model."""
    with torch.device("meta"), _empty_shared_expert():
        model = AutoModelForCausalLM.from_config(config)
    total = sum(p.numel() for p in model.parameters())  # a tied head is counted once
    embedding = model.get_input_embeddings().weight.numel()
    skipped = 0
    experts = getattr(config, "num_experts", 0) or 0
    if experts:
        dense = set(config.mlp_only_layers)
        sparse = [i for i in range(config.num_hidden_layers) if i not in dense]
        per_expert = 3 * config.hidden_size * config.moe_intermediate_size  # gate, up, down
        skipped = len(sparse) * (experts - config.num_experts_per_tok) * per_expert
    return {"total": total, "active": total - skipped, "embedding": embedding}


def flops_per_token(config: PretrainedConfig, counts: dict[str, int], sequence_length: int) -> int:
    """Training FLOPs per token by `FLOPS_FORMULA`."""
    head = config.vocab_size * config.hidden_size
    tied = config.tie_word_embeddings
    matmul = counts["active"] - counts["embedding"] + (head if tied else 0)
    d_attn = config.num_attention_heads * (config.hidden_size // config.num_attention_heads)
    return 6 * matmul + 12 * config.num_hidden_layers * sequence_length * d_attn


def describe(config: PretrainedConfig, sequence_length: int) -> dict:
    """What a run records of a scratch model: its config class and resolved config (and its
    sha256), parameter counts and FLOPs per token with the formula."""
    resolved = config.to_dict()
    resolved.pop("transformers_version", None)
    text = json.dumps(resolved, sort_keys=True, default=str)
    counts = parameter_counts(config)
    return {
        "config_class": type(config).__name__,
        "config": json.loads(text),
        "config_sha256": hashlib.sha256(text.encode()).hexdigest(),
        "params": counts,
        "flops_per_token": flops_per_token(config, counts, sequence_length),
        "flops_formula": FLOPS_FORMULA,
        "sequence_length": sequence_length,
    }
