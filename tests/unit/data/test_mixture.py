"""Data mixtures: spec validation, the seeded sampler, stages, and the record of what was drawn."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from tunelab.core.spec import DataSpec, Mixture
from tunelab.data.mixture import MixtureSampler, plan_stages


def _mixture(weights, stages=()):
    return Mixture(weights=weights, stages=list(stages))


def _sources(news=300, forum=100, manual=0):
    return ["news"] * news + ["forum"] * forum + ["manual"] * manual


def test_source_names_default_to_the_file_stem_and_must_be_unique():
    data = DataSpec(sources=[{"type": "jsonl", "path": "a/news.jsonl"}])
    assert data.sources[0].source_name == "news"
    with pytest.raises(ValidationError, match="unique"):
        DataSpec(
            sources=[{"type": "jsonl", "path": "a/x.jsonl"}, {"type": "csv", "path": "b/x.csv"}]
        )


def test_mixture_weights_must_name_known_sources():
    with pytest.raises(
        ValidationError, match=r"data.mixture.weights: unknown source\(s\) \['blog'\]"
    ):
        DataSpec(
            sources=[{"type": "jsonl", "path": "news.jsonl"}],
            mixture={"weights": {"news": 1, "blog": 1}},
        )
    with pytest.raises(ValidationError, match=r"stages.0\n.*from_step or from_fraction"):
        DataSpec(
            sources=[{"type": "jsonl", "path": "news.jsonl"}],
            mixture={"weights": {"news": 1}, "stages": [{"weights": {"news": 1}}]},
        )


@pytest.mark.parametrize("odd", [float("nan"), float("inf")])
def test_mixture_weights_must_be_finite(odd):
    """A weight of .nan or .inf passed ">= 0 with a positive sum" and stopped training with an
    internal error (invalid multinomial distribution)."""
    two = [{"type": "jsonl", "path": "news.jsonl"}, {"type": "jsonl", "path": "forum.jsonl"}]
    with pytest.raises(ValidationError, match=r"weights must be finite numbers; \['forum'\]"):
        DataSpec(sources=two, mixture={"weights": {"news": 1, "forum": odd}})


def test_every_source_with_training_rows_needs_a_weight():
    with pytest.raises(ValueError, match=r"\['forum'\] have training rows but no weight"):
        MixtureSampler(_sources(), _mixture({"news": 1}))
    MixtureSampler(_sources(), _mixture({"news": 1, "forum": 0}))  # left out on purpose


def test_the_order_is_seeded_and_follows_the_weights():
    sources = _sources()
    a = MixtureSampler(sources, _mixture({"news": 1, "forum": 3}))
    b = MixtureSampler(sources, _mixture({"news": 1, "forum": 3}))
    first = list(a.order(50, 16, seed=7))
    assert first == list(b.order(50, 16, seed=7))
    assert first != list(b.order(50, 16, seed=8))
    forum = sum(sources[i] == "forum" for batch in first for i in batch)
    assert abs(forum / (50 * 16) - 0.75) < 0.05  # 3:1 although news has 3x the rows
    rec = a.record(50)["stages"][0]["sampled"]
    assert rec["forum"]["rows"] == forum and rec["news"]["rows"] == 800 - forum
    assert rec["forum"]["distinct"] == 100 and rec["forum"]["epochs_started"] >= 6


def test_a_source_without_weight_is_never_drawn_and_each_epoch_covers_a_source():
    sources = _sources()
    batches = list(MixtureSampler(sources, _mixture({"news": 1, "forum": 0})).order(10, 30, 0))
    drawn = [i for b in batches for i in b]
    assert all(sources[i] == "news" for i in drawn)
    assert sorted(drawn) == list(range(300))  # 300 draws = exactly one epoch of news


def test_stages_switch_at_their_step():
    sources = _sources(manual=50)
    mix = _mixture(
        {"news": 1, "forum": 1, "manual": 0},
        [
            {"from_fraction": 0.5, "weights": {"manual": 1}},
            {"from_step": 8, "weights": {"news": 1}},
        ],
    )
    sampler = MixtureSampler(sources, mix)
    batches = list(sampler.order(10, 8, seed=0))
    kinds = [{sources[i] for i in b} for b in batches]
    assert all("manual" not in k for k in kinds[:5])
    assert all(k == {"manual"} for k in kinds[5:8])
    assert all(k == {"news"} for k in kinds[8:])
    stages = sampler.record(10)["stages"]
    assert [s["steps"] for s in stages] == [[0, 5], [5, 8], [8, 10]]
    assert stages[1]["sampled"] == {
        "manual": {"rows": 24, "share": 1.0, "distinct": 24, "available": 50, "epochs_started": 1}
    }


def test_stages_out_of_order_or_past_the_end_are_refused():
    mix = _mixture({"news": 1}, [{"from_step": 6, "weights": {"news": 1}}])
    with pytest.raises(ValueError, match="only 5 steps"):
        plan_stages(mix, 5)
    mix = _mixture(
        {"news": 1},
        [{"from_step": 6, "weights": {"news": 1}}, {"from_fraction": 0.1, "weights": {"news": 1}}],
    )
    with pytest.raises(ValueError, match=r"stages\[1\].*not after the previous stage"):
        plan_stages(mix, 20)


def test_a_weighted_source_without_training_rows_is_refused():
    sampler = MixtureSampler(_sources(forum=0), _mixture({"news": 1, "forum": 1}))
    with pytest.raises(ValueError, match=r"\['forum'\] have a weight but no training rows"):
        sampler.check(10)


def test_a_source_missing_from_validation_or_test_is_warned_of():
    from tunelab.data.example import Example
    from tunelab.data.source_summary import sources_missing

    def rows(*sources):
        return [Example(f"{s}{i}", "t", "", "f", i, source=s) for i, s in enumerate(sources)]

    splits = {
        "train": rows("prose", "prose", "code"),
        "validation": rows(*["prose"] * 20),
        "test": rows("prose", "code"),
    }
    from tunelab.core.spec import validate_spec
    from tunelab.data.usable import more_rows

    spec = validate_spec(
        {"data": {"sources": [{"type": "jsonl", "path": "d"}]}, "model": {"path": "m"}}
    )

    def by_ratio(split):
        return more_rows(split, {"presplit": False}, spec)

    assert sources_missing(splits, by_ratio) == [
        "source(s) ['code'] have train documents but none in the validation split: their "
        "validation scores cannot be measured (an every_source guardrail leaves them not "
        "checked); give them more rows, or other data.split ratios"
    ]
    # data split already: a ratio changes nothing, rows marked for the split do
    (given,) = sources_missing(splits, lambda split: more_rows(split, {"presplit": True}, spec))
    assert given.endswith("checked); mark some of them for validation in a source's `split`")
    splits["validation"] += rows(*["code"] * 20)
    assert sources_missing(splits, by_ratio) == []
    # 4 validation documents of a source: its guardrail "held" on a bootstrap over 4
    splits["validation"] = rows(*["prose"] * 20, *["code"] * 4)
    (few,) = sources_missing(splits, by_ratio)
    assert few.startswith("source(s) with fewer than 20 validation documents (code 4)")


def test_copies_across_two_sources_are_one_count_whichever_side_each_row_is_on():
    """`a <-> b 14, b <-> a 26` read as two things."""
    from tunelab.data.source_summary import across_sources

    pairs = [{"a": {"source": "a"}, "b": {"source": "b"}}] * 2
    pairs += [{"a": {"source": "b"}, "b": {"source": "a"}}] * 3 + [{"a": {}, "b": {}}]
    assert across_sources(pairs) == {"a <-> b": 5}
