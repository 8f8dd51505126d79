"""The shape of a model and what of it trains, as `tunelab size`'s estimate reads them.

`describe` works on a model built on the meta device (no memory), PEFT-wrapped or not.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

BERT_TYPES = {"bert", "roberta", "xlm-roberta", "camembert", "electra"}
LLAMA_TYPES = {"llama", "mistral", "qwen2", "qwen3", "smollm3", "olmo", "olmo2", "granite"}

# module name inside a layer -> (role, the tensor it reads)
ROLES = {
    "bert": {
        "attention.self.query": ("q", "attn_in"),
        "attention.self.key": ("k", "attn_in"),
        "attention.self.value": ("v", "attn_in"),
        "attention.output.dense": ("o", "ctx"),
        "intermediate.dense": ("up", "ffn_in"),
        "output.dense": ("down", "act"),
    },
    "llama": {
        "self_attn.q_proj": ("q", "attn_in"),
        "self_attn.k_proj": ("k", "attn_in"),
        "self_attn.v_proj": ("v", "attn_in"),
        "self_attn.o_proj": ("o", "ctx"),
        "mlp.gate_proj": ("gate", "ffn_in"),
        "mlp.up_proj": ("up", "ffn_in"),
        "mlp.down_proj": ("down", "act"),
    },
}


@dataclass(frozen=True)
class Shape:
    """What the activation count reads from the model's config."""

    family: str  # bert | llama
    kind: str  # encoder (sequence classifier) | causal (LM head over the vocabulary)
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    num_labels: int = 2
    attention_dropout: float = 0.0
    hidden_dropout: float = 0.0
    dtype_bytes: int = 4
    approximate: bool = False
    compute_bytes: int | None = None
    """Bytes per element of what the matrix products give: bf16 autocast over float32 weights
    (2), else the weights' dtype (None: dtype_bytes)."""

    @property
    def c(self) -> int:
        return self.compute_bytes or self.dtype_bytes


@dataclass(frozen=True)
class Trainables:
    """What trains, counted on the model (on the meta device: no memory)."""

    params: int
    weight_bytes: int
    trainable: int
    trainable_bytes: int
    largest_trainable_bytes: int
    head_bytes: int = 0
    """Bytes of the output head's trainable weight: its gradient appears first in backward."""
    embedding_bytes: int = 0
    """Bytes of trainable input embeddings not tied to the head: their gradient comes last."""
    full: frozenset[str] = frozenset()
    """Roles whose own weight trains (every role in full fine-tuning)."""
    lora: dict[str, int] = field(default_factory=dict)
    """Roles with a LoRA adapter -> rank."""
    lora_dropout: float = 0.0
    lora_fp32: bool = False
    """PEFT keeps adapters in float32 on a 16-bit base, so their inputs are upcast."""
    norms: bool = False
    embeddings: bool = False
    head: bool = False
    pooler: bool = False
    """BERT's pooler trains (full, or a LoRA matched it): its input, a slice of the last
    layer's output, keeps that whole output alive."""


def shape_dict(sh: Shape, tr: Trainables) -> dict:
    return {"shape": asdict(sh), "trainables": asdict(tr) | {"full": sorted(tr.full)}}


def family_of(model_type: str) -> tuple[str, bool]:
    """The activation family of a config's model_type, and whether the count is approximate."""
    if model_type in BERT_TYPES:
        return "bert", False
    return "llama", model_type not in LLAMA_TYPES


def describe(model, kind: str, num_labels: int = 2) -> tuple[Shape, Trainables]:
    """The shape and what trains, from a model (PEFT-wrapped or not; meta device is fine)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    c = base.config
    family, approximate = family_of(c.model_type)
    heads = c.num_attention_heads
    params = list(model.parameters())  # tied weights once
    trainable = [p for p in params if p.requires_grad]
    emb, out = base.get_input_embeddings(), base.get_output_embeddings()
    head = (
        out
        if kind == "causal"
        else getattr(base, "classifier", None) or getattr(base, "score", None)
    )
    head_w = getattr(head, "weight", None)
    tied = head_w is not None and head_w is emb.weight
    full, lora, dropout, fp32 = set(), {}, 0.0, False
    for name, mod in model.named_modules():
        rel = _in_first_layer(name)
        if rel not in ROLES[family]:
            continue
        role = ROLES[family][rel][0]
        layer = getattr(mod, "base_layer", mod)
        if layer.weight.requires_grad:
            full.add(role)
        if hasattr(mod, "lora_A") and "default" in mod.lora_A:
            lora[role] = int(mod.r["default"])
            dropout = float(getattr(mod.lora_dropout["default"], "p", 0.0))
            fp32 = fp32 or mod.lora_A["default"].weight.element_size() > layer.weight.element_size()
    dtype_bytes = emb.weight.element_size()
    shape = Shape(
        family=family,
        kind=kind,
        layers=c.num_hidden_layers,
        hidden=c.hidden_size,
        heads=heads,
        kv_heads=getattr(c, "num_key_value_heads", None) or heads,
        head_dim=getattr(c, "head_dim", None) or c.hidden_size // heads,
        intermediate=_intermediate(c),
        vocab=c.vocab_size,
        num_labels=num_labels,
        attention_dropout=float(
            getattr(c, "attention_probs_dropout_prob", getattr(c, "attention_dropout", 0.0)) or 0
        ),
        hidden_dropout=float(getattr(c, "hidden_dropout_prob", 0.0) or 0),
        dtype_bytes=dtype_bytes,
        approximate=approximate,
    )
    norms = any(p.requires_grad for n, p in model.named_parameters() if "norm" in n.lower())
    tr = Trainables(
        params=sum(p.numel() for p in params),
        weight_bytes=sum(p.numel() * p.element_size() for p in params),
        trainable=sum(p.numel() for p in trainable),
        trainable_bytes=sum(p.numel() * p.element_size() for p in trainable),
        largest_trainable_bytes=max((p.numel() * p.element_size() for p in trainable), default=0),
        head_bytes=_bytes(head_w) if head_w is not None and _trains(head, head_w) else 0,
        embedding_bytes=_bytes(emb.weight) if emb.weight.requires_grad and not tied else 0,
        full=frozenset(full),
        lora=lora,
        lora_dropout=dropout,
        lora_fp32=fp32,
        norms=norms,
        embeddings=emb.weight.requires_grad,
        head=head_w is not None and _trains(head, head_w),
        pooler=_pooler_keeps_output(model),
    )
    return shape, tr


WIDTH_KEYS = ("intermediate_size", "n_inner", "hidden_dim", "ffn_dim")
"""Where a config keeps its MLP's width: most, GPT-2 (`n_inner`, None meaning 4 × the hidden
size), DistilBERT (`hidden_dim`), OPT (`ffn_dim`)."""


def _intermediate(config) -> int:
    """The MLP's width, by the first of WIDTH_KEYS the config sets, else 4 × the hidden size."""
    widths = (getattr(config, key, None) for key in WIDTH_KEYS)
    return next((w for w in widths if isinstance(w, int) and w > 0), 4 * config.hidden_size)


def _bytes(p) -> int:
    return p.numel() * p.element_size()


def _trains(module, weight) -> bool:
    """A head trains itself or through PEFT's trainable copy (modules_to_save)."""
    copies = getattr(module, "modules_to_save", None)
    if copies is not None and "default" in copies:
        return copies["default"].weight.requires_grad
    return weight.requires_grad


def _pooler_keeps_output(model) -> bool:
    """A BERT pooler whose input (a view of the last layer's output) autograd saves: its
    weight trains, or a dropout-free LoRA in the same dtype reads it."""
    for name, mod in model.named_modules():
        if name.endswith("pooler.dense"):
            layer = getattr(mod, "base_layer", mod)
            if layer.weight.requires_grad:
                return True
            if hasattr(mod, "lora_A") and "default" in mod.lora_A:
                a = mod.lora_A["default"].weight
                drop = getattr(mod.lora_dropout["default"], "p", 0.0)
                return not drop and a.dtype == layer.weight.dtype
    return False


def _in_first_layer(name: str) -> str | None:
    """`...layers.0.self_attn.q_proj` -> `self_attn.q_proj` (BERT: `...layer.0.`)."""
    for marker in (".layers.0.", ".layer.0."):
        if marker in name:
            return name.split(marker, 1)[1]
    return None
