"""compare warns when two scratch models differ in parameters or FLOPs per token by more than
the stated fraction, and says the fraction."""

from __future__ import annotations

from tunelab.stages.compare.compute import TOLERANCE, compute_differences, text_differences


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


def test_experts_at_matched_active_compute_are_called_capacity_not_compute():
    """4 experts at matched active parameters read "does not match the compute ... match
    parameters or FLOPs per token", when active parameters and FLOPs per token matched."""
    dense, moe = record("a", 115_008, 115_008, 788_352), record("b", 164_800, 115_648, 792_192)
    (warning,) = compute_differences(dense, moe)
    assert warning.startswith("b spends the compute per token of a (active parameters and FLOPs")
    assert "with more weights in all: total parameters 115,008 -> 164,800 (+43.3%)" in warning
    assert "does not match the compute" not in warning


def test_pretrained_runs_are_not_judged_on_compute():
    pretrained = {"id": "p", "base_model": {"name": "tiny-llama"}}
    assert compute_differences(pretrained, record("b", 1, 1, 1)) == []


def trained(run_id: str, tokens: int, split_tokens: int, split_bytes: int) -> dict:
    packing = {"tokens": split_tokens, "bytes": split_bytes}
    return {"id": run_id, "training": {"tokens": tokens}, "packing": packing}


def test_equal_tokens_over_other_tokenizers_read_other_amounts_of_text():
    """vocab 512, 1024 and 4096 at 65k tokens read 145, 196 and 281 kB of text: 4096 read
    "improved", and nothing said it had seen the train split twice over."""
    ref = trained("r003-ref", 64_864, 47_679, 144_000)  # 3.02 bytes a token
    big = trained("r013-vocab-4096", 64_709, 32_000, 138_900)  # 4.34 bytes a token
    (warning,) = text_differences(ref, big)
    assert "r013-vocab-4096 read 0.28 MB of train text where r003-ref read 0.20 MB" in warning
    assert "(+43%; 2.02 passes over its train split)" in warning
    tiny = text_differences(trained("a", 400, 300, 900), trained("b", 400, 200, 900))
    assert "b read 1.8 kB of train text where a read 1.2 kB" in tiny[0]  # not 0.00 MB
    assert text_differences(ref, trained("same", 64_864, 47_679, 146_000)) == []
    assert text_differences(ref, {"id": "zero-shot", "training": None}) == []
