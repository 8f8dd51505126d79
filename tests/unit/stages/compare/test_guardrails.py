"""A guardrail on the share of examples right is judged monotonically in the examples made
worse: one worse never holds where none worse was unresolved (the percentile bootstrap's low
end sat above the exact bound on none)."""

from __future__ import annotations

import numpy as np
import pytest

from tunelab.core.spec import Guardrail
from tunelab.stages.compare.guardrails import describe, judge
from tunelab.stages.compare.pairs import make_arms
from tunelab.tasks.resampled import unseen_share, worse_share

LABELS = ["a", "b"]


def arm(right: np.ndarray) -> dict:
    return {
        str(i): {"id": str(i), "gold": "a", "predicted": "a" if r else "b"}
        for i, r in enumerate(right)
    }


def judged(n: int, worse: int, limit: float) -> dict:
    """The reference wrong on its last 10 of `n`; the variant also wrong on its first `worse`."""
    ref = np.ones(n, bool)
    ref[-10:] = False
    var = ref.copy()
    var[:worse] = False
    pair = make_arms([arm(ref)], [arm(var)], LABELS, ("r", "v"))
    return judge(Guardrail(metric="accuracy", scope="overall", max_drop=limit), pair, None)


@pytest.mark.parametrize(("n", "limit"), [(89, 0.04), (200, 0.016)])
def test_one_example_worse_is_never_judged_better_than_none(n, limit):
    lows = [judged(n, worse, limit)["checks"]["overall"]["low"] for worse in (0, 1, 2)]
    assert lows == sorted(lows, reverse=True)
    assert [judged(n, w, limit)["status"] for w in (0, 1, 2)] == ["unresolved"] * 3
    one = judged(n, 1, limit)
    assert one["checks"]["overall"]["low"] == pytest.approx(-worse_share(1, n), abs=1e-4)
    assert "1 of its" in describe(one) and "exact binomial bound" in describe(one)


def test_the_exact_bound_on_the_share_worse_starts_where_none_worse_does():
    assert worse_share(0, 89) == unseen_share(89)
    assert worse_share(1, 89) == pytest.approx(0.0610, abs=1e-4)  # scipy's beta quantile
    assert worse_share(5, 5) == 1.0


def test_a_wide_margin_still_holds_and_a_metric_that_is_no_share_keeps_its_bootstrap():
    assert judged(400, 1, 0.05)["status"] == "holds"  # 1 of 400: the bound is 1.4 points
    ref, var = np.ones(89, bool), np.ones(89, bool)
    var[:3] = False
    pair = make_arms([arm(ref)], [arm(var)], LABELS, ("r", "v"))
    assert pair.changed("accuracy", None) == (0, 3, 89)
    assert pair.changed("f1", "a") is None  # a class's F1 is not a share of its examples


def test_a_no_drop_rule_that_holds_says_it_is_about_these_examples():
    ref = np.ones(4, bool)
    pair = make_arms([arm(ref)], [arm(ref)], LABELS, ("r", "v"))
    held = judge(Guardrail(metric="accuracy", scope="overall", max_drop=0.0), pair, None)
    assert held["status"] == "holds"
    assert "(no example worse: said of these examples, not of those to come)" in describe(held)


def test_the_examples_that_would_resolve_the_exact_bound_are_counted_at_the_rates_seen():
    """Scaled from the widened interval's width it read 918 where 178 do."""
    from tunelab.stages.compare.guardrails import _needed_share

    one = judged(89, 1, 0.04)["checks"]["overall"]
    assert one["needed_n"] == 178  # 2 worse of 178: the bound 3.95 points, inside the limit
    assert worse_share(2, 178) <= 0.04 < worse_share(2, 177)
    assert _needed_share(0, 5, 89, 0.04) is None  # 5.6 points worse: no n resolves it


def test_a_drop_of_exactly_the_limit_holds_however_the_floats_round():
    """1 of 100 examples worse is a drop of 0.010000000000000009 as two shares' difference in
    floats: against max_drop 0.01 it read unresolved where the rule says holds."""
    from tunelab.stages.compare.guardrails import status_of

    low = 0.79 - 0.8  # -0.010000000000000009
    assert low < -0.01 and status_of({"low": low, "high": 0.02}, 0.01) == "holds"
    assert status_of({"low": -0.0101, "high": 0.02}, 0.01) == "unresolved"
    assert status_of({"low": -0.05, "high": 0.82 - 0.83}, 0.01) == "unresolved"  # high at -limit
    assert status_of({"low": -0.05, "high": -0.0101}, 0.01) == "broken"


def test_a_class_recall_counts_the_changes_among_that_class_gold_examples_alone():
    """The exact bound of an `every_class` recall guardrail rests on the class's own examples:
    those whose gold is the class, fixed and made worse among them."""

    def rows(predicted: str) -> dict:
        gold = ["a"] * 6 + ["b"] * 4
        return {
            str(i): {"id": str(i), "gold": g, "predicted": p}
            for i, (g, p) in enumerate(zip(gold, predicted, strict=True))
        }

    pair = make_arms([rows("aaaaaabbbb")], [rows("baaaaabbaa")], LABELS, ("r", "v"))
    assert pair.changed("recall", "a") == (0, 1, 6)  # one of class a's six made worse
    assert pair.changed("recall", "b") == (0, 2, 4)  # two of b's four
    fixed = make_arms([rows("bbaaaaaaaa")], [rows("aaaaaabbbb")], LABELS, ("r", "v"))
    assert fixed.changed("recall", "a") == (2, 0, 6) and fixed.changed("recall", "b") == (4, 0, 4)
