"""Where a mixture of experts sends its tokens, counted on the validation pass."""

import torch
from transformers import AutoModelForCausalLM, LlamaConfig, Qwen2MoeConfig

from tunelab.stages.compare.notes import pair_warnings
from tunelab.training.evaluate_lm import document_nll
from tunelab.training.routing import RouteCounts


def moe(aux: float = 0.001) -> torch.nn.Module:
    torch.manual_seed(0)
    config = Qwen2MoeConfig(
        vocab_size=64,
        hidden_size=16,
        intermediate_size=32,
        moe_intermediate_size=16,
        shared_expert_intermediate_size=0,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        num_experts=4,
        num_experts_per_tok=2,
        decoder_sparse_step=1,
        router_aux_loss_coef=aux,
        output_router_logits=aux > 0,
    )
    return AutoModelForCausalLM.from_config(config).eval()


def test_each_real_token_s_top_k_experts_are_counted_per_layer():
    model = moe()
    routes = RouteCounts.of(model)
    segs = [[1, *range(2, 30)], [1, 5, 6, 7]]  # the second pads its batch: padding not counted
    document_nll(
        model, segs, sequence_length=64, batch_size=2, device="cpu", pad_id=0, routes=routes
    )
    assert [int(c.sum()) for c in routes.counts] == [2 * (28 + 3)] * 2  # k × real inputs a layer
    summary = routes.summary()
    assert summary["experts"] == 4 and summary["per_token"] == 2
    assert all(abs(sum(layer) - 1) < 1e-3 for layer in summary["shares"])


def test_an_uneven_router_is_warned_of_and_a_dense_model_counts_nothing():
    routes = RouteCounts(experts=4, per_token=1, aux_weight=0.001)
    logits = torch.tensor([[5.0, 0, 0, 0]] * 9 + [[0, 5.0, 0, 0]])  # 90% to expert 0
    routes.add((logits,), torch.ones(10, dtype=torch.bool))
    summary = routes.summary()
    assert summary["shares"] == [[0.9, 0.1, 0.0, 0.0]]
    assert summary["warning"].startswith(
        "routing is uneven in 1 of 1 expert layers: expert layer 0's busiest expert takes 90.0%"
    )
    assert "balancing loss weighs 0.001" in summary["warning"]
    dense = LlamaConfig(vocab_size=64, hidden_size=16, num_hidden_layers=1, num_attention_heads=2)
    assert RouteCounts.of(AutoModelForCausalLM.from_config(dense)) is None
    # compare says it beside the variant's verdict
    run = {"id": "r006-experts", "metrics": {"routing": summary}}
    versus = {"concentration": {"concentrated": False}, "flips": {}, "metric": "bits_per_byte"}
    assert f"r006-experts: {summary['warning']}" in pair_warnings({"id": "r003"}, run, versus)
