"""The memory of one training step, estimated from the model's shape (`tunelab size`).

Components (bytes): the weights (parameters x their dtype), the gradients of the trainable
parameters, AdamW's state (two tensors per trainable parameter, in the parameter's dtype, so
8 bytes each in float32), the activations autograd saves for the backward pass, the logits of
a causal LM's loss (upcast to float32), the short-lived buffers of the backward pass, and the
framework's own memory (measured by the probe, never guessed).

The activations are counted tensor by tensor, as the transformers implementations save them
on this torch (checked against autograd's saved tensors in
`tests/unit/stages/size/test_estimate.py`): two families, BERT-like encoders (post-LayerNorm,
GELU, dropout) and llama-like decoders (RMSNorm, SwiGLU, RoPE, grouped key/value heads); other
architectures use the llama count and are marked approximate. Sequences are unpadded (the
probe measures exactly `seq_len` tokens).
Under bf16 autocast over float32 weights (llama family, `under_autocast`) the products give
bf16 and each keeps its own bf16 copies of its input and weight; checked the same way under CPU
autocast, and against an H200's measured peaks (within 1.1%; bench/README.md).

The peak is not the sum of everything: the gradients do not exist during the first
microbatch's forward, and the activations are freed layer by layer as gradients appear, so
the step is walked phase by phase (forward and loss, loss backward, the layers' backward,
the optimizer step) and the largest phase is the estimate.
"""

from __future__ import annotations

from dataclasses import replace

from tunelab.stages.size.shape import ROLES, Shape, Trainables


def math_attention(sh: Shape, device: str) -> bool:
    """BERT's attention with dropout runs torch's math kernel on CPU (the scores are
    materialised, in float32); fused kernels otherwise."""
    return sh.family == "bert" and sh.attention_dropout > 0 and device != "cuda"


def _widths(sh: Shape) -> tuple[dict[str, int], dict[str, int]]:
    """The width of each tensor the projections read, and each projection's output width."""
    h, i = sh.hidden, sh.intermediate
    qd, kvd = sh.heads * sh.head_dim, sh.kv_heads * sh.head_dim
    dims = {"attn_in": h, "ctx": qd, "ffn_in": h, "act": i}
    outputs = {"q": qd, "k": kvd, "v": kvd, "o": h, "gate": i, "up": i, "down": h}
    return dims, outputs


def autocast_cache(sh: Shape, tr: Trainables) -> int:
    """Under autocast, torch caches the compute-dtype copy of every float32 weight that is a
    leaf requiring grad (a trained weight, a LoRA's matrices) until the forward's autocast
    region ends. Without checkpointing those copies are the ones saved for the backward
    (`layer_saved`'s casts); with it they are not saved, yet every layer's stays alive to the
    end of the forward and the loss: an H200 saw 1,856 MiB of them (a 1.1B Llama, full
    fine-tune) at the peak of a step that accumulates with checkpointing."""
    if sh.c == sh.dtype_bytes:
        return 0
    dims, outputs = _widths(sh)
    per_layer = 0
    for role, tensor in ROLES[sh.family].values():
        width = dims[tensor]
        per_layer += width * outputs[role] if role in tr.full else 0
        per_layer += (width + outputs[role]) * tr.lora.get(role, 0)
    return sh.layers * per_layer * sh.c


def layer_saved(
    sh: Shape, tr: Trainables, b: int, s: int, rg: bool = True, device: str = "cpu"
) -> dict[str, int]:
    """Bytes autograd saves in one layer; `rg`: whether the layer's input requires grad (the
    first layer's does not with frozen embeddings and no checkpointing)."""
    e, c, bs, h, i = sh.dtype_bytes, sh.c, b * s, sh.hidden, sh.intermediate
    qd, kvd = sh.heads * sh.head_dim, sh.kv_heads * sh.head_dim
    dims, outputs = _widths(sh)
    le = 4 if tr.lora_fp32 else e
    out = {"attention": 0, "mlp": 0, "norms": 0, "dropout": 0, "lora": 0, "inputs": 0}
    out |= {"casts": 0} if c != e else {}
    trains = set(tr.full) | set(tr.lora)

    def reads(tensor: str, input_rg: bool, shared: bool = False) -> None:
        """The input of the projections reading `tensor`: saved for their weight gradient (or
        a dropout-free LoRA), plus each LoRA's dropout mask, dropout output and rank-r input."""
        roles = [r for r, t in ROLES[sh.family].values() if t == tensor]
        n = bs * dims[tensor]
        if c != e:
            reads_cast(tensor, roles, n, input_rg, shared)
            return
        direct = any(r in tr.full for r in roles) or any(
            r in tr.lora and not tr.lora_dropout and le == e for r in roles
        )
        out["inputs"] += n * e if direct and not shared else 0
        for r in roles:
            if r not in tr.lora:
                continue
            if tr.lora_dropout:
                out["lora"] += n * le if input_rg else 0  # the dropout mask (x * mask)
            if tr.lora_dropout or le != e:
                out["lora"] += n * le  # lora_A's input
            out["lora"] += bs * tr.lora[r] * le  # lora_B's input

    def reads_cast(tensor: str, roles: list[str], n: int, input_rg: bool, shared: bool) -> None:
        """The same under autocast, where each product casts its own copy of its input and
        weight to the compute dtype: the weight's copy is saved for the input's gradient, the
        input's for the weight's. A product's output (the attention's, SwiGLU's) is already in
        that dtype and is saved once."""
        width, product = dims[tensor], tensor in ("ctx", "act")
        for r in roles:
            out["casts"] += width * outputs[r] * c if input_rg else 0
            out["inputs"] += n * c if r in tr.full and not product else 0
        kept = any(r in tr.full for r in roles)
        out["inputs"] += n * c if product and kept and not shared else 0
        for r in roles:  # PEFT casts the input to the adapter's dtype, then drops out
            if r not in tr.lora:
                continue
            rank = tr.lora[r]
            out["lora"] += n * le if tr.lora_dropout and input_rg else 0  # the mask
            out["lora"] += n * c + bs * rank * c  # lora_A's copy of its input, lora_B's input
            out["casts"] += ((width * rank if input_rg else 0) + rank * outputs[r]) * c

    def rg_of(*roles: str) -> bool:
        return any(r in trains for r in roles)

    if sh.family == "bert":
        reads("attn_in", rg)
        q, k, v = (rg or rg_of(r) for r in "qkv")
        bass = b * sh.heads * s * s
        if math_attention(sh, device):  # scores materialised, upcast to float32
            out["attention"] += (bs * qd * 4 if k else 0) + (bs * qd * 4 if q else 0)
            out["attention"] += (2 * bass * 4 + bs * kvd * 4) if (q or k) else 0
            out["attention"] += bass * 4 if v else 0
            reads("ctx", q or k or v)
        elif q or k or v:  # fused attention: q, k, v, output, log-sum-exp
            out["attention"] += bs * (2 * qd + 2 * kvd) * e + b * sh.heads * s * 4
            reads("ctx", True, shared=True)
        o = q or k or v or rg_of("o")
        drop = bs * h * e if sh.hidden_dropout > 0 else 0
        out["dropout"] += drop if o else 0
        ln1 = o or rg
        out["norms"] += bs * h * e + 2 * bs * e if ln1 else 0
        reads("ffn_in", ln1)
        up = ln1 or rg_of("up")
        out["mlp"] += bs * i * e if up else 0  # GELU's input
        reads("act", up)
        down = up or rg_of("down")
        out["dropout"] += drop if down else 0
        out["norms"] += bs * h * e + 2 * bs * e if (down or ln1) else 0
        return out

    # llama: RMSNorm saves its float32 input and 1/rms (and the normalised x if it trains)
    norm = bs * h * 4 + bs * 4
    out["norms"] += (norm if rg else 0) + (bs * h * e if tr.norms else 0)
    reads("attn_in", rg)
    att = rg or rg_of("q", "k", "v")
    if att:
        out["attention"] += bs * (2 * qd + 2 * kvd) * c + b * sh.heads * s * 4
    reads("ctx", att, shared=True)
    h1 = att or rg_of("o")
    out["norms"] += (norm if h1 else 0) + (bs * h * e if tr.norms else 0)
    reads("ffn_in", h1)
    g, u = h1 or rg_of("gate"), h1 or rg_of("up")
    out["mlp"] += bs * i * c * (2 * g + u)  # SiLU's input, up's output; SiLU's output
    reads("act", g or u)
    return out


def activation_bytes(
    sh: Shape, tr: Trainables, b: int, s: int, checkpointing: bool = False, device: str = "cpu"
) -> dict[str, int]:
    """Saved activations at the end of the forward pass, by part."""
    e, bs, h = sh.dtype_bytes, b * s, sh.hidden
    input_grads = tr.embeddings or checkpointing  # checkpointing makes embeddings' output rg
    full_layer = sum(layer_saved(sh, tr, b, s, True, device).values())
    first = sum(layer_saved(sh, tr, b, s, input_grads, device).values())
    pre, post = 0, 0
    if sh.family == "bert":
        pre += 2 * bs * 8 if tr.embeddings else 0  # token and token-type ids
        if input_grads:
            pre += bs * h * e + 2 * bs * e + (bs * h * e if sh.hidden_dropout > 0 else 0)
        post += 3 * b * h * e  # the pooler's tanh, the classifier's dropout and input
        post += bs * h * e if tr.pooler else 0  # a trained pooler keeps the whole last layer
    else:
        pre += bs * 8 if tr.embeddings else 0
        post += bs * h * 4 + bs * 4 + (bs * h * e if tr.norms else 0)  # final norm
        post += bs * h * sh.c if tr.head else 0  # lm_head's input
        outputs = sh.vocab if sh.kind == "causal" else sh.num_labels  # lm_head, or score
        post += outputs * h * sh.c if sh.c != e else 0  # autocast: the head's weight, copied
        post += 0 if checkpointing else 2 * s * sh.head_dim * e  # rotary cos / sin
    # checkpointing keeps each layer's input only
    layers = sh.layers * bs * h * e if checkpointing else first + (sh.layers - 1) * full_layer
    return {
        "layers": layers,
        "per_layer": full_layer,
        "embeddings": pre,
        "head": post,
        "total": pre + layers + post,
    }


def target_tokens(s: int, targets: int | None = None) -> int:
    """Target tokens per sequence of `s`: `targets` (what the lab's examples hold, from `size`),
    else the size probe's default, the second half."""
    return s - s // 2 if targets is None else max(1, min(int(targets), s))


def loss_bytes(sh: Shape, b: int, s: int, targets: int | None = None) -> dict[str, int]:
    """The logits and the loss. A causal LM projects only its target positions onto the
    vocabulary (`training/step.py`, `summed_loss`): `target_tokens` per sequence (the size
    probe's sequences end with that many). Those logits (model dtype), their float32 copy
    unless the model is float32, and log-softmax (saved); in backward, log-softmax's output,
    its gradient and the gradient of its input."""
    if sh.kind != "causal":
        return {"forward": 3 * b * sh.num_labels * 4, "backward": 3 * b * sh.num_labels * 4}
    kept = b * target_tokens(s, targets)
    logits = kept * sh.vocab * sh.c
    upcast = kept * sh.vocab * 4
    copy = upcast if sh.c != 4 else 0
    return {"forward": logits + copy + upcast, "backward": 3 * upcast, "logits": logits}


def backward_buffers(sh: Shape, tr: Trainables, b: int, s: int, device: str = "cpu") -> int:
    """Gradients in flight in one layer's backward, beyond what that layer has freed by then.
    The MLP runs first: two (GELU) or three (SwiGLU's product) intermediate-sized gradients
    and two hidden-sized ones. Materialised attention (BERT with dropout on CPU) adds one
    score-sized gradient at a time, after the layer's MLP, norm and dropout tensors are gone."""
    e, bs = sh.dtype_bytes, b * s
    hidden = 2 * bs * sh.hidden * e
    if sh.family != "bert":
        return 3 * bs * sh.intermediate * sh.c + hidden
    mlp = 2 * bs * sh.intermediate * e + hidden
    if not math_attention(sh, device):
        return mlp
    part = layer_saved(sh, tr, b, s, True, device)
    freed = part["mlp"] + part["norms"] + part["dropout"]
    return max(mlp, b * sh.heads * s * s * 4 + hidden - freed)


def validation_bytes(
    sh: Shape, b: int, s: int, targets: int | None = None, device: str = "cpu"
) -> int:
    """The largest moment of a forward pass without gradients over `b` padded sequences of `s`
    tokens, in the weights' dtype: the residual stream (the embeddings' output, a layer's input
    and output, an RMSNorm's float32 copy), the attention mask, the larger of the MLP's
    intermediates (SwiGLU holds SiLU's output, up's output and their product; GELU its input
    and output) and the attention's q, k, v, their rotated copies and its output (a Llama's
    scores too on CPU, where a masked attention is materialised); then the loss (a causal LM's
    target logits, their float32 copy and log-softmax; `loss_bytes`)."""
    e, bs, bert = sh.dtype_bytes, b * s, sh.family == "bert"
    qd, kvd = sh.heads * sh.head_dim, sh.kv_heads * sh.head_dim
    stream = bs * sh.hidden * (3 * e + 4)  # with the embeddings' output, held to the end
    mask = b * s * s * (e if bert else 1)  # BERT's additive mask, a Llama's boolean one
    mlp = (2 if bert else 3) * bs * sh.intermediate * e
    attention = bs * (3 * qd + 4 * kvd) * e
    attention += b * sh.heads * s * s * e if not bert and device != "cuda" else 0
    return stream + mask + max(mlp, attention) + loss_bytes(sh, b, s, targets)["forward"]


def optimizer_buffers(tr: Trainables, device: str) -> int:
    """AdamW's temporaries, for the fused AdamW `training.step.make_optimizer` takes: per
    tensor on CPU (sqrt, then the division: two of the largest parameter); none on CUDA, whose
    fused kernel updates each tensor in place (an H200 measured a full fine-tune with
    checkpointing, whose peak is the optimizer step, at 17,245 MiB: weights, gradients and
    state come to 16,848; counting foreach's copy of every tensor gave 21,061)."""
    return 0 if device == "cuda" else 2 * tr.largest_trainable_bytes


def estimate(
    sh: Shape,
    tr: Trainables,
    b: int,
    s: int,
    checkpointing: bool = False,
    accumulation: int = 1,
    overhead_bytes: int = 0,
    device: str = "cpu",
    precision: str = "fp32",
    targets: int | None = None,
    during=None,
) -> dict:
    """The breakdown (bytes) and the peak, walking the phases of one optimizer step, for
    sequences of `s` tokens ending with `targets` target tokens (`target_tokens`). bf16
    autocast over float32 weights is counted for the llama family (`under_autocast`); for
    BERT the activations are counted in the weights' dtype and the result marked approximate.
    `during` (`size.during.During`): keep best's copy of the trained weights, held through
    every phase, and the validation pass between steps, a phase of its own."""
    validation = during.validation_batch if during is not None else None
    best = tr.trainable_bytes if during is not None and during.keep_best else 0
    plain = sh
    sh = under_autocast(sh, precision)
    acts = activation_bytes(sh, tr, b, s, checkpointing, device)
    loss = loss_bytes(sh, b, s, targets)
    grads, opt = tr.trainable_bytes, 2 * tr.trainable_bytes
    buffers = backward_buffers(sh, tr, b, s, device)
    layer = sum(layer_saved(sh, tr, b, s, True, device).values())
    recompute = layer if checkpointing else 0
    # gradients already there: from the earlier microbatches when accumulating
    before = grads if accumulation > 1 else 0
    head = max(before, tr.head_bytes)
    # with checkpointing, the autocast copies of the trained weights (saved, otherwise)
    cache = autocast_cache(sh, tr) if checkpointing else 0
    phases = {
        "forward_and_loss": acts["total"] + loss["forward"] + before + cache,
        "loss_backward": acts["total"] + loss["backward"] + before,
        "first_layer_backward": acts["total"] - acts["head"] + head + recompute + buffers,
        "last_layer_backward": acts["embeddings"]
        + max(before, grads - tr.embedding_bytes)
        + recompute
        + buffers,
        "optimizer_step": grads + optimizer_buffers(tr, device),
    }
    if sh.kind == "causal":  # the gradient of the logits beside the head's weight gradient
        phases["head_backward"] = acts["total"] - acts["head"] + head + loss["logits"]
    if validation:  # between steps, without autocast (training.validate)
        phases["validation"] = validation_bytes(plain, validation, s, targets, device)
    phase = max(phases, key=phases.get)
    peak = tr.weight_bytes + opt + best + phases[phase] + overhead_bytes
    return {
        "components": {
            "framework": overhead_bytes,
            "weights": tr.weight_bytes,
            "gradients": grads,
            "optimizer_state": opt,
            "activations": acts["total"],
            "logits_and_loss": loss["forward"],
            "backward_buffers": buffers + recompute,
        }
        | ({"best_weights": best} if best else {}),
        "activations": acts,
        "phases": phases,
        "peak_phase": phase,
        "peak_bytes": peak,
        "approximate": sh.approximate or (precision == "bf16" and sh.c == sh.dtype_bytes),
    }


def under_autocast(sh: Shape, precision: str) -> Shape:
    """The shape as bf16 autocast over float32 weights runs it: the matrix products give bf16
    (RMSNorm keeps float32 and the residual stream stays in the weights' dtype). Counted, and
    checked against autograd under CPU autocast, for the llama family only."""
    if precision == "bf16" and sh.dtype_bytes == 4 and sh.family == "llama":
        return replace(sh, compute_bytes=2)
    return sh


def calibrated(at: dict, measured_bytes: float, target: dict) -> dict:
    """`target`'s estimate with the allocator's share read off one measured step (`at`, the
    estimate of the configuration that was measured, with `measured_bytes` its peak).

    What a CPU allocator holds beyond the live tensors grows with the step's own memory (the
    holes between activations and short-lived buffers in glibc's heap: bench/README.md), not
    with the weights, the optimizer state or the framework. So the step's part of the estimate
    is scaled by what the measurement showed of it: fixed + step(target) × (measured − fixed) /
    step(at), where fixed is the same for both (the same model and method)."""
    fixed = sum(at["components"][k] for k in ("framework", "weights", "optimizer_state"))
    step_at = at["peak_bytes"] - fixed
    factor = (measured_bytes - fixed) / step_at if step_at > 0 else 1.0
    factor = max(factor, 1.0)  # the tensors are counted exactly: never below them
    peak = fixed + (target["peak_bytes"] - fixed) * factor
    return {"peak_bytes": peak, "factor": round(factor, 3)}
