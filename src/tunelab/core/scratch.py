"""The spec's sections for small ablations from scratch: `task: pretrain` and a model built
from a config (`model.init: scratch`).

`model.arch` describes a decoder that transformers' own config classes build
(`tunelab.modeling.scratch` maps each field to them); `model.bpe` the byte-level BPE trained on
the lab's train split when `model.tokenizer` names no tokenizer. The checks across fields live
here, each naming the field it is about.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field, model_validator

from tunelab.core.section_base import FieldError, _Section


class Rope(_Section):
    theta: float = Field(10_000.0, gt=0)
    """RoPE base frequency (transformers' `rope_parameters.rope_theta`)."""
    nope_layers: list[int] = Field(default_factory=list)
    """Indices of layers that use no positional encoding at all (NoPE); built with
    `SmolLM3Config.no_rope_layers`. Empty: RoPE in every layer (`LlamaConfig`)."""


class Moe(_Section):
    num_experts: int = Field(0, ge=0)
    """Routed experts per sparse layer (`Qwen2MoeConfig.num_experts`); 0: a dense model."""
    experts_per_token: int = Field(2, gt=0)
    """Experts each token is routed to (`num_experts_per_tok`)."""
    expert_size: int | None = Field(None, gt=0)
    """Hidden width of one routed expert (`moe_intermediate_size`); default: the dense
    `intermediate_size` divided by `experts_per_token`, so a token's routed width matches the
    dense block's."""
    shared_expert_size: int = Field(0, ge=0)
    """Hidden width of the shared expert every token passes through
    (`shared_expert_intermediate_size`); 0: none."""
    dense_layers: list[int] = Field(default_factory=list)
    """Layers that keep the dense MLP (`mlp_only_layers`); every other layer is sparse."""
    router_aux_loss: float = Field(0.001, ge=0)
    """Weight of the router's load-balancing loss in the training loss (`router_aux_loss_coef`;
    `output_router_logits` is on when it is above 0)."""
    normalize_top_k: bool = True
    """Renormalise the chosen experts' router weights to sum to 1 (`norm_topk_prob`)."""


class Arch(_Section):
    hidden_size: int = Field(64, gt=0)
    num_hidden_layers: int = Field(2, gt=0)
    num_attention_heads: int = Field(4, gt=0)
    num_key_value_heads: int | None = Field(None, gt=0)
    """Key/value heads: equal to `num_attention_heads` is MHA, fewer is GQA, 1 is MQA.
    Default: `num_attention_heads` (MHA)."""
    intermediate_size: int = Field(256, gt=0)
    """Hidden width of the dense MLP (SwiGLU)."""
    rope: Rope = Rope()
    moe: Moe = Moe()
    tie_embeddings: bool = True
    """Share the input embedding and the output head."""
    rms_norm_eps: float = Field(1e-6, gt=0)
    initializer_range: float = Field(0.02, gt=0)
    """Standard deviation of the seeded normal initialisation."""

    @property
    def kv_heads(self) -> int:
        return self.num_key_value_heads or self.num_attention_heads

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @model_validator(mode="after")
    def _shapes(self) -> Arch:
        heads, kv, layers = self.num_attention_heads, self.kv_heads, self.num_hidden_layers
        if self.hidden_size % heads:
            raise FieldError(
                "num_attention_heads",
                f"hidden_size ({self.hidden_size}) must be a multiple of num_attention_heads "
                f"({heads}): each head gets hidden_size / num_attention_heads channels",
            )
        if self.head_dim % 2:
            raise FieldError(
                "num_attention_heads",
                f"the head dimension hidden_size / num_attention_heads = {self.head_dim} must be "
                "even (RoPE rotates channel pairs); change hidden_size or num_attention_heads",
            )
        if kv > heads or heads % kv:
            raise FieldError(
                "num_key_value_heads",
                f"num_attention_heads ({heads}) must be a multiple of num_key_value_heads ({kv}):"
                " each key/value head serves a whole group of query heads (MHA: equal, MQA: 1)",
            )
        for field, layers_named in (
            ("rope.nope_layers", self.rope.nope_layers),
            ("moe.dense_layers", self.moe.dense_layers),
        ):
            bad = sorted({i for i in layers_named if not 0 <= i < layers})
            if bad:
                raise FieldError(field, f"layer(s) {bad} do not exist: layers are 0..{layers - 1}")
        moe = self.moe
        if moe.num_experts and len(set(moe.dense_layers)) == layers:
            raise FieldError(
                "moe.dense_layers",
                f"every layer (0..{layers - 1}) is dense, so no token reaches an expert: set "
                "moe.num_experts: 0 for a dense model, or leave a layer out of dense_layers",
            )
        if moe.num_experts and moe.experts_per_token > moe.num_experts:
            raise FieldError(
                "moe.experts_per_token",
                f"experts_per_token ({moe.experts_per_token}) is more than num_experts "
                f"({moe.num_experts})",
            )
        if self.rope.nope_layers and not transformers_has("smollm3"):
            raise FieldError(
                "rope.nope_layers",
                "NoPE layers are built with SmolLM3Config, which the installed transformers "
                "does not have (it came in 4.53): upgrade transformers, or leave nope_layers "
                "empty",
            )
        if moe.num_experts and self.rope.nope_layers:
            raise FieldError(
                "rope.nope_layers",
                "NoPE layers come from SmolLM3Config and experts from Qwen2MoeConfig; "
                "transformers has no config with both: ablate them one at a time",
            )
        return self

    @property
    def expert_size(self) -> int:
        return self.moe.expert_size or max(1, self.intermediate_size // self.moe.experts_per_token)


def transformers_has(model_type: str) -> bool:
    """Whether the installed transformers ships `models/<model_type>`, found on disk so that
    validating a spec does not import transformers."""
    found = importlib.util.find_spec("transformers")
    if found is None or found.origin is None:
        return False
    return (Path(found.origin).parent / "models" / model_type).is_dir()


class Bpe(_Section):
    vocab_size: int = Field(512, ge=260)
    """Tokens in the vocabulary: the 256 bytes, the special tokens and the learned merges."""
    min_frequency: int = Field(2, gt=0)
    """A pair is merged only when it occurs at least this often in the train split."""


class PretrainTask(_Section):
    type: Literal["pretrain"] = "pretrain"
    sequence_length: int | None = Field(None, gt=1)
    """Tokens per packed training sequence (default: `model.max_length`)."""
    boundaries: Literal["mask", "none"] = "mask"
    """Where one document ends inside a packed sequence. `mask`: position ids restart at each
    document and attention is block-diagonal (no token attends across a boundary); `none`:
    plain concatenation, the documents separated by EOS only."""

    generative: ClassVar[bool] = True
    needs_target: ClassVar[bool] = False
    """Rows are text alone: the text is both the input and what is learned."""


def check_scratch(spec) -> None:
    """The checks across sections of a spec (`tunelab.core.spec.Spec`) that a scratch model,
    task pretrain and a token budget need; each FieldError names its field."""
    if spec.training.budget.tokens is not None and spec.task.type != "pretrain":
        raise FieldError(
            "training.budget.tokens",
            "a token budget is for task pretrain (packed sequences of one length); "
            "give steps or epochs",
        )
    if not spec.model.scratch:
        if spec.task.type == "pretrain":
            raise FieldError(
                "model.init",
                "task pretrain trains a model from scratch: set model.init: scratch "
                "(with model.arch)",
            )
        return
    if spec.method.type != "full":
        raise FieldError(
            "method.type",
            "a scratch model has no pretrained weights to adapt: use method: {type: full}",
        )
    if spec.task.type != "pretrain":
        raise FieldError(
            "task.type", "a scratch model learns language first: use task: {type: pretrain}"
        )
    length = spec.task.sequence_length
    if length is not None and length > spec.model.max_length:
        raise FieldError(
            "task.sequence_length",
            f"{length} is longer than model.max_length ({spec.model.max_length}), the "
            "longest sequence the model is built for: raise model.max_length or shorten it",
        )


def check_init(model) -> None:
    """The fields `model.init` asks for (`tunelab.core.sections.ModelSpec`): a pretrained
    model's `path` and nothing of a scratch one; a scratch model's `arch` (default `Arch()`)
    and one tokenizer source (`tokenizer`, else `bpe`, default `Bpe()`), filled in place."""
    if model.init == "pretrained":
        if model.path is None:
            raise FieldError("path", "give the pretrained model's folder, or init: scratch")
        given = [f for f in ("arch", "tokenizer", "bpe") if getattr(model, f) is not None]
        if given:
            raise FieldError(
                given[0], f"{given[0]} is for init: scratch; a pretrained model brings its own"
            )
        return
    if model.path is not None:
        raise FieldError(
            "path", "a scratch model is built from model.arch, not loaded: remove model.path"
        )
    if model.tokenizer is not None and model.bpe is not None:
        raise FieldError("bpe", "bpe trains a tokenizer; model.tokenizer already names one")
    if model.kind == "encoder":
        raise FieldError("kind", "a scratch model is a causal LM: use kind auto or causal")
    if model.arch is None:
        model.arch = Arch()
    if model.tokenizer is None and model.bpe is None:
        model.bpe = Bpe()
