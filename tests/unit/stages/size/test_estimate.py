"""`tunelab size`'s estimate: its parts by hand, the activation count against autograd (also
under bf16 autocast and activation checkpointing), and the estimate against an H200's
measurements."""

from __future__ import annotations

import weakref

import pytest
import torch
from peft import TaskType

from tunelab.core.spec import FullMethod, LoraMethod, ModelSpec
from tunelab.modeling.model import apply_method, enable_checkpointing, load_causal, load_classifier
from tunelab.stages.size import estimate as est
from tunelab.stages.size import measure as sizing
from tunelab.stages.size.shape import Shape, Trainables, describe
from tunelab.stages.size.synthetic import synthetic_examples

CPU = torch.device("cpu")
LORA_BERT = LoraMethod(r=4, alpha=8, target_modules=["query", "value"])
LORA_LLAMA = LoraMethod(r=4, alpha=8, target_modules=["q_proj", "v_proj"])


def shape(**kw) -> Shape:
    base = dict(
        family="llama",
        kind="causal",
        layers=2,
        hidden=32,
        heads=4,
        kv_heads=2,
        head_dim=8,
        intermediate=64,
        vocab=100,
    )
    return Shape(**(base | kw))


def trainables(params: int, trainable: int, width: int = 4, **kw) -> Trainables:
    return Trainables(
        params=params,
        weight_bytes=params * width,
        trainable=trainable,
        trainable_bytes=trainable * width,
        largest_trainable_bytes=trainable * width // 4,
        **kw,
    )


def test_weights_gradients_and_adamw_state_by_hand():
    full = est.estimate(shape(), trainables(1_000_000, 1_000_000), b=2, s=16)["components"]
    assert full["weights"] == 4_000_000  # params x 4 bytes (float32)
    assert full["gradients"] == 4_000_000
    assert full["optimizer_state"] == 8_000_000  # AdamW: 2 float32 tensors per parameter
    lora = est.estimate(shape(), trainables(1_000_000, 1_000), b=2, s=16)["components"]
    assert lora["weights"] == 4_000_000 and lora["gradients"] == 4_000
    assert lora["optimizer_state"] == 8_000
    bf16 = est.estimate(shape(dtype_bytes=2), trainables(1_000, 1_000, width=2), 1, 8)
    assert bf16["components"]["weights"] == 2_000  # torch's AdamW keeps state in param dtype
    assert bf16["components"]["optimizer_state"] == 4_000


def test_lora_and_full_trainables_counted_on_the_meta_device(tiny_bert):
    labels = ["a", "b", "c"]
    _, lora = sizing.model_facts(tiny_bert, "encoder", "float32", LORA_BERT, labels)
    # 2 layers x (query, value) x (A: 4x32 + B: 32x4), plus the new head (32x3 + 3)
    assert lora.trainable == 2 * 2 * (4 * 32 + 32 * 4) + 32 * 3 + 3
    assert lora.trainable_bytes == 4 * lora.trainable and lora.lora == {"q": 4, "v": 4}
    _, full = sizing.model_facts(tiny_bert, "encoder", "float32", FullMethod(), labels)
    assert full.trainable == full.params and full.weight_bytes == 4 * full.params
    assert full.params == lora.params - lora.trainable  # adapters + PEFT's copy of the head


def test_a_shape_outside_the_known_families_is_approximated_not_refused(tmp_path):
    """GPT-2's config has no intermediate_size (`n_inner`, None meaning 4 × the hidden size):
    `size` stopped on an AttributeError before it measured anything."""
    from make_tiny import build_tiny_gpt2

    gpt2 = build_tiny_gpt2(tmp_path / "gpt2")
    shape, tr = sizing.model_facts(gpt2, "encoder", "float32", LoraMethod(r=2), ["a", "b"])
    assert (shape.family, shape.approximate) == ("llama", True)
    assert (shape.hidden, shape.intermediate, shape.layers) == (32, 128, 2)
    assert tr.head and tr.trainable < tr.params
    from transformers import DistilBertConfig

    from tunelab.stages.size.shape import _intermediate

    assert _intermediate(DistilBertConfig(dim=32, n_heads=2, hidden_dim=64)) == 64


def test_causal_logits_are_kept_on_the_targets_and_upcast():
    sh = shape(vocab=100)
    two = est.loss_bytes(sh, b=2, s=10)  # the probe's sequences: 5 target positions each
    assert two["forward"] == 2 * 5 * 100 * 4 + 2 * 5 * 100 * 4  # logits, log-softmax
    half = est.loss_bytes(shape(vocab=100, dtype_bytes=2), b=1, s=10)
    assert half["forward"] == 5 * 100 * 2 + 2 * (5 * 100 * 4)  # bf16 logits, fp32 upcast


def test_the_probe_and_the_estimate_take_the_labs_target_tokens():
    sh = shape(vocab=100)
    short = est.loss_bytes(sh, b=2, s=10, targets=2)  # a long prompt, a short answer
    assert short["forward"] == 2 * (2 * 2 * 100 * 4)
    assert est.loss_bytes(sh, b=2, s=10, targets=50) == est.loss_bytes(sh, b=2, s=10, targets=10)
    args = {"seq_len": 10, "kind": "causal", "targets": 3}
    examples = synthetic_examples(args, vocab=100, n=2)
    assert [e.loss_mask for e in examples] == [[0] * 7 + [1] * 3] * 2
    default = synthetic_examples(args | {"targets": None}, vocab=100, n=1)
    assert default[0].loss_mask == [0] * 5 + [1] * 5  # the second half, as loss_bytes counts


def test_checkpointing_keeps_one_tensor_per_layer_and_accumulation_keeps_gradients():
    sh, tr = shape(layers=4), trainables(10_000, 10_000)
    acts = est.activation_bytes(sh, tr, b=2, s=16, checkpointing=True)
    assert acts["layers"] == 4 * 2 * 16 * 32 * 4
    plain = est.estimate(sh, tr, 2, 16)["phases"]["forward_and_loss"]
    accumulated = est.estimate(sh, tr, 2, 16, accumulation=2)["phases"]["forward_and_loss"]
    assert accumulated - plain == tr.trainable_bytes


def saved_bytes(model, batch: dict) -> int:
    """What autograd saves for backward in one forward pass (parameters excluded)."""
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen: dict[int, int] = {}

    def pack(t):
        st = t.untyped_storage()
        if st.data_ptr() not in params:
            seen.setdefault(st.data_ptr(), st.nbytes())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
    return sum(seen.values())


def counted_and_saved(model, kind: str, checkpointing: bool, precision: str = "fp32"):
    """The estimate's activation count for 3 sequences of 24 tokens, and what autograd saves
    for them in training mode (under bf16 autocast when `precision` is bf16)."""
    if checkpointing:
        enable_checkpointing(model)
    model.train()
    sh, tr = describe(model, kind, 3)
    b, s = 3, 24
    ids = torch.randint(5, sh.vocab, (b, s))
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
        saved = saved_bytes(model, {"input_ids": ids, "attention_mask": torch.ones_like(ids)})
    counted = est.activation_bytes(est.under_autocast(sh, precision), tr, b, s, checkpointing)
    return counted["total"], saved, (sh, tr, b, s)


@pytest.mark.parametrize("kind", ["encoder", "causal"])
@pytest.mark.parametrize("method", ["lora", "full"])
@pytest.mark.parametrize("checkpointing", [False, True])
def test_activation_count_matches_autograd(tiny_bert, tiny_llama, kind, method, checkpointing):
    torch.manual_seed(0)
    if kind == "encoder":
        spec = ModelSpec(path=str(tiny_bert))
        model = load_classifier(spec, tiny_bert, ["a", "b", "c"], CPU)
        lora, task = LORA_BERT, TaskType.SEQ_CLS
    else:
        model, lora, task = (
            load_causal(ModelSpec(path=str(tiny_llama)), tiny_llama, CPU),
            LORA_LLAMA,
            TaskType.CAUSAL_LM,
        )
    model, _ = apply_method(model, lora if method == "lora" else FullMethod(), task)
    estimated, measured, _ = counted_and_saved(model, kind, checkpointing)
    assert abs(estimated - measured) <= max(0.02 * measured, 8 * 1024), (estimated, measured)


@pytest.mark.parametrize(
    "method",
    [
        LORA_LLAMA,  # q and v, dropout 0.05
        LoraMethod(r=4, alpha=8, dropout=0.0, target_modules=["q_proj", "v_proj"]),
        LoraMethod(r=4, alpha=8),  # every linear layer: the products' outputs adapted too
        FullMethod(),
    ],
    ids=["lora-qv", "lora-qv-no-dropout", "lora-all", "full"],
)
@pytest.mark.parametrize("checkpointing", [False, True])
@pytest.mark.parametrize("kind", ["causal", "encoder"])  # encoder: Llama's sequence classifier
def test_activation_count_under_bf16_autocast_matches_autograd(
    tiny_llama, method, checkpointing, kind
):
    """bf16 autocast over float32 weights: the products' outputs in bf16, each product's own
    copies of its input and weight, RMSNorm and the residual stream in float32."""
    torch.manual_seed(0)
    spec = ModelSpec(path=str(tiny_llama))
    if kind == "causal":
        model, task = load_causal(spec, tiny_llama, CPU), TaskType.CAUSAL_LM
    else:
        model, task = load_classifier(spec, tiny_llama, ["a", "b", "c"], CPU), TaskType.SEQ_CLS
    model, _ = apply_method(model, method, task)
    estimated, measured, (sh, tr, b, s) = counted_and_saved(model, kind, checkpointing, "bf16")
    assert abs(estimated - measured) <= max(0.02 * measured, 8 * 1024), (estimated, measured)
    counted_in_fp32 = est.activation_bytes(sh, tr, b, s, checkpointing)["total"]
    assert checkpointing or counted_in_fp32 > 1.1 * measured  # what the estimate said before
    assert not est.estimate(sh, tr, b, s, precision="bf16")["approximate"]


def weight_copies_alive(model, ids) -> tuple[int, int]:
    """Bytes of the layers' bf16 copies of their float32 weights alive at the end of a forward
    under CPU autocast, and after that autocast region ends."""
    from torch.utils._python_dispatch import TorchDispatchMode

    params = {id(p) for n, p in model.named_parameters() if ".layers." in n}
    copies: list = []

    class Copies(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if func is torch.ops.aten._to_copy.default and id(args[0]) in params:
                copies.append(weakref.ref(out))
            return out

    def alive() -> int:
        return sum(t.nbytes for t in (r() for r in copies) if t is not None)

    with torch.autocast("cpu", dtype=torch.bfloat16), Copies():
        model(input_ids=ids, attention_mask=torch.ones_like(ids))
        during = alive()
    return during, alive()


@pytest.mark.parametrize("method", [FullMethod(), LORA_LLAMA], ids=["full", "lora"])
def test_checkpointing_under_autocast_keeps_the_weight_copies_to_the_forwards_end(
    tiny_llama, method
):
    """torch caches autocast's copy of each trained float32 weight until the autocast region
    ends; checkpointing saves none of them, yet they are all alive at the end of the forward
    (what an H200 measured of a full fine-tune that accumulates with checkpointing)."""
    model = load_causal(ModelSpec(path=str(tiny_llama)), tiny_llama, CPU)
    model, _ = apply_method(model, method, TaskType.CAUSAL_LM)
    enable_checkpointing(model)
    model.train()
    sh, tr = describe(model, "causal", 0)
    during, after = weight_copies_alive(model, torch.randint(5, sh.vocab, (2, 16)))
    assert during == est.autocast_cache(est.under_autocast(sh, "bf16"), tr) > 0
    assert after == 0
    assert est.autocast_cache(sh, tr) == 0  # no autocast over float32: no copies


def test_the_estimate_gives_what_an_h200_measured_under_bf16_autocast():
    """bench/gpu_check.sh on one H200 (bench/README.md): a 1.1B Llama (hidden 2048, 16 layers,
    vocabulary 32,000), LoRA r=16 on q/k/v/o and full fine-tuning, 2,048 tokens ending in 37
    target tokens, bf16 autocast over float32 weights; `torch.cuda.max_memory_allocated` of a
    step."""
    from transformers import AutoModelForCausalLM, LlamaConfig

    config = LlamaConfig(
        hidden_size=2048,
        intermediate_size=8192,
        num_hidden_layers=16,
        num_attention_heads=32,
        num_key_value_heads=8,
        vocab_size=32000,
        tie_word_embeddings=False,
    )
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    lora = LoraMethod(
        r=16, alpha=32, dropout=0.0, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"]
    )
    model, _ = apply_method(model, lora, TaskType.CAUSAL_LM)
    sh, tr = describe(model, "causal", 0)
    measured_mb = {(2, False): 12234.8, (2, True): 5465.9, (43, False): 135528.8}
    for (b, checkpointing), mb in measured_mb.items():
        e = est.estimate(
            sh, tr, b, 2048, checkpointing, device="cuda", precision="bf16", targets=37
        )
        assert abs(e["peak_bytes"] / 2**20 / mb - 1) < 0.03, (b, checkpointing, e["peak_bytes"])
    with torch.device("meta"):
        full, _ = apply_method(AutoModelForCausalLM.from_config(config), FullMethod(), None)
    sh, tr = describe(full, "causal", 0)
    # the full fine-tune, microbatch 2: (accumulation, checkpointing) -> MiB measured
    measured_mb = {
        (1, False): 23104.5,
        (2, False): 27283.4,
        (1, True): 17244.7,  # the optimizer step: fused AdamW, no temporaries
        (2, True): 19509.7,  # the second forward's end: autocast's weight copies (-6.5% before)
    }
    for (k, checkpointing), mb in measured_mb.items():
        e = est.estimate(
            sh, tr, 2, 2048, checkpointing, k, device="cuda", precision="bf16", targets=37
        )
        assert abs(e["peak_bytes"] / 2**20 / mb - 1) < 0.03, (k, checkpointing, e["peak_bytes"])


def test_checkpointing_with_lora_still_trains_every_adapter(tiny_llama):
    model = load_causal(ModelSpec(path=str(tiny_llama)), tiny_llama, CPU)
    model, _ = apply_method(model, LORA_LLAMA, TaskType.CAUSAL_LM)
    call = enable_checkpointing(model)
    assert "use_reentrant=False" in call
    model.train()
    ids = torch.randint(5, 300, (2, 16))
    model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits.sum().backward()
    lora = {n: p for n, p in model.named_parameters() if p.requires_grad}
    assert lora and all(p.grad is not None for p in lora.values())
    # B starts at zero (so A's first gradient is zero too): every B must move
    assert all(p.grad.abs().sum() > 0 for n, p in lora.items() if "lora_B" in n)
