"""Scratch models from `model.arch`: each option builds with transformers' own config, trains a
few steps and changes the parameter counts as its definition says; GQA with as many key/value
heads as query heads is MHA exactly; the same seed draws the same weights."""

from __future__ import annotations

import warnings

import pytest
import torch

from tunelab.core.scratch import Arch, Bpe
from tunelab.core.spec import FullMethod, SpecError, TrainingSpec, validate_spec
from tunelab.modeling.bpe import train_bpe
from tunelab.modeling.model import apply_method
from tunelab.modeling.packing import pack
from tunelab.modeling.scratch import build_scratch, describe, flops_per_token, scratch_config
from tunelab.training.loop import train
from tunelab.training.step import make_batch, summed_loss, summed_losses

TEXTS = [
    "the cat sat on the mat and looked at the dog",
    "def add(a, b): return a + b",
    "rain fell on the quiet town all night long",
    "for i in range(3): print(i * i)",
] * 6
TINY = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4}
SPECIAL_KEYS = ("pad_token_id", "bos_token_id", "eos_token_id")


@pytest.fixture(scope="module")
def tokenizer():
    return train_bpe(TEXTS, Bpe(vocab_size=300))


def model_for(tokenizer, seed: int = 0, **arch):
    config = scratch_config(Arch(**(TINY | arch)), len(tokenizer), 64, special(tokenizer))
    return build_scratch(config, seed, torch.float32), config


def special(tokenizer) -> dict:
    return {k: getattr(tokenizer, k) for k in SPECIAL_KEYS}


def logits_of(model, ids: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=ids).logits


OPTIONS = {
    "mha": ({}, "LlamaConfig"),
    "gqa": ({"num_key_value_heads": 2}, "LlamaConfig"),
    "mqa": ({"num_key_value_heads": 1}, "LlamaConfig"),
    "rope_theta": ({"rope": {"theta": 500.0}}, "LlamaConfig"),
    "nope": ({"rope": {"nope_layers": [1]}}, "SmolLM3Config"),
    "moe": ({"moe": {"num_experts": 4, "experts_per_token": 2}}, "Qwen2MoeConfig"),
    "moe_shared": (
        {"moe": {"num_experts": 4, "shared_expert_size": 32, "dense_layers": [0]}},
        "Qwen2MoeConfig",
    ),
}


@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_each_option_builds_with_its_config_and_trains_a_few_steps(tokenizer, name):
    arch, config_class = OPTIONS[name]
    model, config = model_for(tokenizer, **arch)
    assert type(config).__name__ == config_class
    counted = describe(config, 64)["params"]
    assert counted["total"] == sum(p.numel() for p in model.parameters())
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    packed = pack(
        tokenizer, [{"id": str(i), "text": t} for i, t in enumerate(TEXTS)], 32, "mask", 1
    )
    cfg = TrainingSpec(lr=1e-2, global_batch=4, microbatch=2, budget={"steps": 3})
    out = train(model, packed, cfg, torch.device("cpu"), tokenizer.pad_token_id)
    assert out["steps"] == 3 and all(
        torch.isfinite(torch.tensor(h["loss"])) for h in out["history"]
    )
    moved = [n for n, p in model.named_parameters() if not torch.equal(p, before[n])]
    assert "model.embed_tokens.weight" in moved and any("layers.1" in n for n in moved)


def test_experts_without_a_shared_one_build_without_torchs_empty_layer_warning(tokenizer):
    """Qwen2MoE's shared expert of width 0 is two empty linear layers; torch's warning about
    them said nothing to the user and landed in the middle of the ablation demo's report."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any warning fails the build
        model, config = model_for(tokenizer, moe={"num_experts": 4, "experts_per_token": 2})
        describe(config, 64)
    assert config.shared_expert_intermediate_size == 0
    assert model.model.layers[0].mlp.shared_expert.up_proj.weight.numel() == 0


@pytest.mark.parametrize("shared", [0, 32])
def test_full_fine_tuning_freezes_only_what_no_gradient_can_reach(tokenizer, shared):
    """Without a shared expert (width 0) its empty projections and its gate get no gradient:
    frozen and named, so that every tensor left trainable moves in a step. With one, none."""
    moe = {"num_experts": 4, "experts_per_token": 2, "shared_expert_size": shared}
    model, report = apply_method(model_for(tokenizer, moe=moe)[0], FullMethod(), None)
    frozen = {n for n, p in model.named_parameters() if not p.requires_grad}
    if shared:
        assert not frozen and "untrainable" not in report
        return
    kinds = {n.split(".mlp.")[1] for n in frozen}
    assert kinds == {
        "shared_expert.gate_proj.weight",
        "shared_expert.up_proj.weight",
        "shared_expert.down_proj.weight",
        "shared_expert_gate.weight",
    }
    assert len(frozen) == 4 * TINY["num_hidden_layers"]
    assert report["untrainable"]["tensors"] == sorted(frozen)
    assert report["trainable_params"] == report["total_params"] - 32 * TINY["num_hidden_layers"]
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    packed = pack(
        tokenizer, [{"id": str(i), "text": t} for i, t in enumerate(TEXTS)], 32, "mask", 1
    )
    cfg = TrainingSpec(lr=1e-2, global_batch=4, microbatch=2, budget={"steps": 2})
    train(model, packed, cfg, torch.device("cpu"), tokenizer.pad_token_id)
    still = {n for n, p in model.named_parameters() if torch.equal(p, before[n])}
    assert still == frozen  # every trainable tensor moved; the frozen ones did not


def test_key_value_heads_shrink_the_key_and_value_projections_only(tokenizer):
    counts = {
        kv: describe(model_for(tokenizer, num_key_value_heads=kv)[1], 64)["params"]["total"]
        for kv in (4, 2, 1)
    }
    head_dim, layers, hidden = 32 // 4, 2, 32
    # k_proj and v_proj: hidden -> kv * head_dim each, per layer
    for kv in (2, 1):
        assert counts[4] - counts[kv] == layers * 2 * hidden * (4 - kv) * head_dim


def test_gqa_with_every_head_is_mha_exactly(tokenizer):
    mha, _ = model_for(tokenizer, seed=3)
    gqa, _ = model_for(tokenizer, seed=3, num_key_value_heads=4)
    assert mha.state_dict().keys() == gqa.state_dict().keys()
    assert all(torch.equal(v, gqa.state_dict()[k]) for k, v in mha.state_dict().items())
    ids = torch.tensor([tokenizer("the cat sat on the mat")["input_ids"]])
    assert torch.equal(logits_of(mha, ids), logits_of(gqa, ids))


def test_the_same_seed_draws_the_same_weights_and_another_seed_others(tokenizer):
    a, b, c = (model_for(tokenizer, seed=s)[0] for s in (7, 7, 8))
    assert all(torch.equal(p, b.state_dict()[k]) for k, p in a.state_dict().items())
    assert not torch.equal(a.state_dict()["lm_head.weight"], c.state_dict()["lm_head.weight"])
    state = torch.random.get_rng_state()
    model_for(tokenizer, seed=9)
    assert torch.equal(state, torch.random.get_rng_state())  # the caller's RNG is left alone


def test_nope_layers_change_the_outputs_not_the_parameters(tokenizer):
    rope, rope_config = model_for(tokenizer, seed=1)
    nope, nope_config = model_for(tokenizer, seed=1, rope={"nope_layers": [0, 1]})
    assert nope_config.no_rope_layers == [0, 0]
    assert describe(rope_config, 64)["params"] == describe(nope_config, 64)["params"]
    ids = torch.tensor([tokenizer("the cat sat on the mat")["input_ids"]])
    assert not torch.allclose(logits_of(rope, ids), logits_of(nope, ids))
    # one attention layer without positions is blind to the order of its context: the last
    # token's logits after "a b" and after "b a" are the same; with RoPE they are not
    one_rope, _ = model_for(tokenizer, seed=1, num_hidden_layers=1)
    one_nope, _ = model_for(tokenizer, seed=1, num_hidden_layers=1, rope={"nope_layers": [0]})
    a, b, c = (tokenizer(w)["input_ids"][0] for w in ("cat", "dog", "mat"))
    ab, ba = torch.tensor([[a, b, c]]), torch.tensor([[b, a, c]])

    def last(model, ids):
        return logits_of(model, ids)[0, -1]

    assert torch.allclose(last(one_nope, ab), last(one_nope, ba), atol=1e-5)
    assert not torch.allclose(last(one_rope, ab), last(one_rope, ba), atol=1e-5)


def test_experts_count_total_and_active_parameters(tokenizer):
    dense = describe(model_for(tokenizer)[1], 64)["params"]
    moe_config = model_for(tokenizer, moe={"num_experts": 4, "experts_per_token": 2})[1]
    moe = describe(moe_config, 64)["params"]
    expert = 3 * 32 * moe_config.moe_intermediate_size  # gate, up, down of one expert
    assert moe_config.moe_intermediate_size == 256 // 2  # the dense width split over k experts
    assert moe["total"] - moe["active"] == 2 * (4 - 2) * expert  # 2 sparse layers skip 2 each
    router = 2 * 4 * 32  # a router per sparse layer: hidden -> experts
    gate = 2 * 32  # Qwen2-MoE's shared-expert gate (hidden -> 1), there even with no shared one
    # active per token: k experts of half width = the dense MLP, plus the routers and gates
    assert moe["active"] == dense["total"] + router + gate
    one_dense = describe(model_for(tokenizer, moe={"num_experts": 4, "dense_layers": [0]})[1], 64)[
        "params"
    ]
    assert one_dense["total"] - one_dense["active"] == 1 * (4 - 2) * expert


def test_flops_per_token_follow_the_stated_formula(tokenizer):
    _, config = model_for(tokenizer)
    counts = describe(config, 64)["params"]
    # tied embeddings: the head's matmul counts, the input lookup does not
    n = counts["active"] - counts["embedding"] + len(tokenizer) * 32
    assert flops_per_token(config, counts, 64) == 6 * n + 12 * 2 * 64 * 32
    assert describe(config, 128)["flops_per_token"] - describe(config, 64)["flops_per_token"] == (
        12 * 2 * 64 * 32
    )


def scratch_spec(**arch) -> dict:
    return {
        "task": {"type": "pretrain"},
        "data": {"sources": [{"type": "jsonl", "path": "t.jsonl"}]},
        "model": {"init": "scratch", "arch": TINY | arch},
        "method": {"type": "full"},
    }


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        ({"num_key_value_heads": 3}, "model.arch.num_key_value_heads", "multiple of"),
        ({"hidden_size": 30}, "model.arch.num_attention_heads", "multiple of"),
        ({"rope": {"nope_layers": [2]}}, "model.arch.rope.nope_layers", "do not exist"),
        (
            {"moe": {"num_experts": 2, "experts_per_token": 3}},
            "model.arch.moe.experts_per_token",
            "more than",
        ),
        (
            {"moe": {"num_experts": 2}, "rope": {"nope_layers": [0]}},
            "model.arch.rope.nope_layers",
            "one at a time",
        ),
        (  # every layer dense: it had crashed in training, an internal error
            {"moe": {"num_experts": 4, "dense_layers": [0, 1]}},
            "model.arch.moe.dense_layers",
            "no token reaches an expert",
        ),
    ],
)
def test_bad_architectures_name_the_field(change, field, words):
    with pytest.raises(SpecError) as err:
        validate_spec(scratch_spec(**change))
    assert f"field `{field}`" in str(err.value) and words in str(err.value)


def test_nope_without_smollm3_in_transformers_is_a_spec_error(monkeypatch):
    from tunelab.core import scratch

    assert scratch.transformers_has("smollm3") and not scratch.transformers_has("no-such-model")
    monkeypatch.setattr(scratch, "transformers_has", lambda model_type: False)
    with pytest.raises(SpecError, match=r"field `model.arch.rope.nope_layers`.*SmolLM3Config"):
        validate_spec(scratch_spec(rope={"nope_layers": [0]}))
    assert validate_spec(scratch_spec())  # without NoPE layers it is not needed


def test_a_scratch_model_needs_full_training_and_the_pretrain_task():
    spec = scratch_spec()
    assert validate_spec(spec).model.bpe == Bpe()  # a BPE is trained unless a tokenizer is named
    with pytest.raises(SpecError, match=r"field `method.type`.*type: full"):
        validate_spec(spec | {"method": {"type": "lora"}})
    with pytest.raises(SpecError, match=r"field `task.type`.*pretrain"):
        validate_spec(spec | {"task": {"type": "classification"}})
    with pytest.raises(SpecError, match=r"field `model.path`.*remove model.path"):
        validate_spec(spec | {"model": {"init": "scratch", "path": "somewhere"}})
    with pytest.raises(SpecError, match=r"field `model.init`"):
        validate_spec(spec | {"model": {"path": "somewhere"}})
    with pytest.raises(SpecError, match=r"field `training.budget.tokens`"):
        validate_spec(
            scratch_spec()
            | {"model": {"path": "m"}, "task": {"type": "classification"}, "method": {"r": 4}}
            | {"training": {"budget": {"tokens": 1000}}}
        )


def test_the_router_balancing_loss_is_trained_on_per_layer_and_logged_apart(tokenizer):
    """Per target token, the step trains on cross-entropy plus the coefficient times each
    sparse layer's Switch loss averaged over the layers (transformers' own pools the layers
    first); the history logs the task's loss and the balancing term apart."""
    from transformers.models.qwen2_moe.modeling_qwen2_moe import load_balancing_loss_func

    model, config = model_for(tokenizer, moe={"num_experts": 4, "router_aux_loss": 0.5})
    assert config.output_router_logits and config.router_aux_loss_coef == 0.5
    rows = [{"id": str(i), "text": t} for i, t in enumerate(TEXTS[:4])]
    packed = pack(tokenizer, rows, 24, "none", tokenizer.pad_token_id)[:2]
    batch = make_batch(packed, tokenizer.pad_token_id, torch.device("cpu"))
    targets = int((batch["labels"][:, 1:] != -100).sum())
    with torch.no_grad():
        task, balance = summed_losses(model, batch)
        total = summed_loss(model, batch)
        theirs = model(
            input_ids=batch["input_ids"],
            attention_mask=batch["attention_mask"],
            labels=batch["labels"],
        )
    mask = batch["attention_mask"]
    layers = [float(load_balancing_loss_func((g,), 4, 2, mask)) for g in theirs.router_logits]
    assert len(layers) == 2 and float(theirs.aux_loss) > 0
    cross_entropy = float(theirs.loss) - 0.5 * float(theirs.aux_loss)
    assert float(task) / targets == pytest.approx(cross_entropy, rel=1e-5)
    assert float(balance) / targets == pytest.approx(0.5 * sum(layers) / 2, rel=1e-5)
    assert float(total) == pytest.approx(float(task + balance), rel=1e-6)
    cfg = TrainingSpec(lr=1e-2, global_batch=2, microbatch=1, budget={"steps": 2})
    history = train(model, packed, cfg, torch.device("cpu"), tokenizer.pad_token_id)["history"]
    assert all(h["balance_loss"] >= 0.5 * 2 - 1e-6 for h in history)  # balanced: k per layer
    assert history[0]["loss"] == pytest.approx(cross_entropy, rel=1e-4)  # the task's alone


def test_layers_that_split_the_experts_between_them_are_not_balanced():
    """Layer 0 sends every token to experts 0 and 1, layer 1 to 2 and 3: pooled, that reads as
    balanced (2.0, the experts per token); each layer's own loss is 4.0, twice balanced."""
    from types import SimpleNamespace

    from tunelab.training.step import balance_sum

    n = 100
    one, other = torch.full((n, 4), -10.0), torch.full((n, 4), -10.0)
    one[:, :2], other[:, 2:] = 10.0, 10.0
    even = torch.zeros(n, 4)
    config = SimpleNamespace(num_experts=4, num_experts_per_tok=2, router_aux_loss_coef=1.0)
    model = SimpleNamespace(config=config)
    targets = torch.tensor(10)
    split = balance_sum(model, (one, other), {}, targets)
    assert float(split) == pytest.approx(4.0 * 10, rel=1e-4)
    assert float(balance_sum(model, (even, even), {}, targets)) == pytest.approx(2.0 * 10)
    assert balance_sum(model, None, {}, targets) is None  # no router logits: a dense model
