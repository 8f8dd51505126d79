"""Scored documents (task pretrain) in compare: the paired bootstrap recomputes the ratio
metric on resampled documents, reported as a reduction (less is better), per source too."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tunelab.stages.compare.pairs import make_arms, right
from tunelab.tasks import get_task


def docs(nll: list[float], source: list[str]) -> dict[str, dict]:
    return {
        f"d{i}": {"id": f"d{i}", "source": s, "nll": n, "bytes": 20, "tokens": 8}
        for i, (n, s) in enumerate(zip(nll, source, strict=True))
    }


def test_the_paired_interval_is_a_reduction_of_the_ratio():
    sources = ["x", "y"] * 10
    ref = docs([14.0 + (i % 3) for i in range(20)], sources)
    run = docs([13.0 + (i % 3) for i in range(20)], sources)  # 1 nat less on every document
    pair = make_arms([ref], [run], [], ("ref", "run"))
    boot = pair.interval("bits_per_byte")
    reduction = 20 / (math.log(2) * 20 * 20)  # 20 nats over 400 bytes
    assert boot["delta"] == pytest.approx(reduction) and boot["low"] > 0
    assert pair.interval("bits_per_byte", "x")["delta"] == pytest.approx(reduction)
    a, b = right(pair, "bits_per_byte")
    assert np.all(b > a)  # every document better: each one is a flip the run fixed
    assert get_task("pretrain").lower_is_better >= {"bits_per_byte", "loss", "perplexity"}


def test_unknown_source_in_a_guardrail_is_named():
    pair = make_arms([docs([1.0], ["x"])], [docs([1.0], ["x"])], [], ("a", "b"))
    with pytest.raises(Exception, match="source 'code'"):
        pair.interval("bits_per_byte", "code")


def test_a_source_without_validation_rows_leaves_every_source_unresolved():
    """A source the reference has no score for (no validation rows) is not checked: the
    guardrail cannot hold on it, and is unresolved unless a scored source is broken."""
    from tunelab.core.spec import Guardrail
    from tunelab.stages.compare.guardrails import describe, judge

    sources = ["prose"] * 20
    ref = docs([14.0 + (i % 3) for i in range(20)], sources)
    better = make_arms([ref], [docs([13.0 + (i % 3) for i in range(20)], sources)], [], ("a", "b"))
    worse = make_arms([ref], [docs([16.0 + (i % 3) for i in range(20)], sources)], [], ("a", "c"))
    rail = Guardrail(metric="bits_per_byte", scope="every_source", max_drop=0.02)
    unscored = {"code": "code: no validation rows in data version 65052606"}
    assert judge(rail, better, ["prose"])["status"] == "holds"
    judged = judge(rail, better, ["prose"], unscored)
    assert (judged["status"], judged["worst"], judged["passed"]) == ("unresolved", "code", False)
    assert judged["checks"]["code"] == {"status": "unresolved", "not_checked": unscored["code"]}
    assert judged["checks"]["prose"]["status"] == "holds"
    assert describe(judged).startswith(
        "bits_per_byte (every_source) unresolved: not checked (code: no validation rows"
    )
    broken = judge(rail, worse, ["prose"], unscored)
    assert (broken["status"], broken["worst"]) == ("broken", "prose")
    assert "; not checked: code: no validation rows" in describe(broken)


def test_the_unscored_groups_are_sources_without_a_score_and_classes_without_an_example():
    from tunelab.stages.compare.rows import unscored_groups

    class Store:
        def data_manifest(self, version):
            assert version == "65052606dfa4"
            return {"sources": [{"name": "prose"}, {"name": "code"}]}

    record = {
        "data_version": "65052606dfa4",
        "spec": {"evaluation": {"split": "validation"}},
        "metrics": {"per_source": {"prose": {"bits_per_byte": 2.5}}},
    }
    assert unscored_groups(Store(), record, get_task("pretrain")) == {
        "code": "code: no validation rows in data version 65052606"
    }
    assert unscored_groups(Store(), record, get_task("classification")) == {}
    # a class with no validation example: its F1 is 0 whatever the model does
    record["metrics"]["per_class"] = {"sport": {"f1": 0.9, "support": 12}, "tech": {"support": 0}}
    expected = {"tech": "tech: no validation example in data version 65052606"}
    assert unscored_groups(Store(), record, get_task("multilabel")) == expected
    assert unscored_groups(Store(), record, get_task("classification")) == expected


def test_a_broken_guardrail_names_the_broken_class_not_a_tied_unresolved_one():
    """Intervals cut at -100 points tie on their low end: the guardrail read "broken: most at
    risk business +15.8 (-100, +100)" where tech was the class broken (-66.1)."""
    from types import SimpleNamespace

    from tunelab.core.spec import Guardrail
    from tunelab.stages.compare.guardrails import judge

    boots = {
        "business": {"delta": 0.158, "low": -1.0, "high": 1.0},
        "tech": {"delta": -0.661, "low": -1.0, "high": -0.2},
        "sport": {"delta": 0.01, "low": -0.02, "high": 0.05},
    }
    pair = SimpleNamespace(
        interval=lambda metric, name: boots[name],
        ids=list(range(6)),
        documents=False,
        group_size=lambda name: 2,
        changed=lambda metric, name: None,  # F1: no share of examples right
    )
    rail = Guardrail(metric="f1", scope="every_class", max_drop=0.05)
    judged = judge(rail, pair, list(boots))
    assert (judged["status"], judged["worst"]) == ("broken", "tech")
