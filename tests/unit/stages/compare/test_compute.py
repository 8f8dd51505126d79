"""compare warns when two scratch models differ in parameters or FLOPs per token by more than
the stated fraction, and says the fraction."""

from __future__ import annotations

from tunelab.stages.compare.compute import TOLERANCE, compute_differences


def record(run_id: str, total: int, active: int, flops: int) -> dict:
    base = {"init": "scratch", "params": {"total": total, "active": active}}
    return {"id": run_id, "base_model": base | {"flops_per_token": flops}}


def test_matched_compute_gives_no_warning():
    a = record("a", 1000, 1000, 6000)
    assert compute_differences(a, record("b", 1000 + 40, 1000, 6000 + 290)) == []


def test_more_than_the_fraction_apart_is_named_with_the_fraction():
    (warning,) = compute_differences(record("a", 1000, 1000, 6000), record("b", 4000, 1000, 6900))
    assert f"more than {TOLERANCE:.0%} apart" in warning
    assert "total parameters 1,000 -> 4,000 (+300.0%)" in warning
    assert "FLOPs per token 6,000 -> 6,900 (+15.0%)" in warning
    assert "active parameters" not in warning  # matched: not named


def test_pretrained_runs_are_not_judged_on_compute():
    pretrained = {"id": "p", "base_model": {"name": "tiny-llama"}}
    assert compute_differences(pretrained, record("b", 1, 1, 1)) == []
