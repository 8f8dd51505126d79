"""What `size` advises when nothing fits: the fixed part named where it alone is over."""

from tunelab.stages.size.advice import advice
from tunelab.stages.size.one_process import _over_at_any_microbatch

MIB = 1024 * 1024


def estimate(**mb: float) -> dict:
    parts = {"framework": 0, "weights": 0, "gradients": 0, "optimizer_state": 0} | mb
    return {"components": {k: v * MIB for k, v in parts.items()} | {"activations": 50 * MIB}}


def test_a_budget_below_the_fixed_part_says_no_setting_fits():
    """Under --memory-limit 300 with a 408.6 MiB framework it advised activation
    checkpointing, whose own measured row showed it saving nothing."""
    told = advice(8, 0, 1, 1000.0, 32)
    assert "activation_checkpointing: true" in told["reason"]  # what it says in general
    over = _over_at_any_microbatch(estimate(framework=408.6, weights=15.4), {"budget_mb": 276.0})
    assert over.startswith("the fixed part alone, 424.0 MiB (the framework, the weights,")
    assert "over the budget of 276 MiB: no microbatch, length or activation checkpointing" in over
    assert _over_at_any_microbatch(estimate(framework=200.0), {"budget_mb": 276.0}) is None
    assert _over_at_any_microbatch(estimate(framework=900.0), {}) is None  # no budget: not said
