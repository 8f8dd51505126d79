"""A verdict that turns since the last comparison on the same data version says so, and why."""

from __future__ import annotations

import io

from compare_labs import add_run, make_lab, predictions
from rich.console import Console
from test_arms import RAILS, seeded

from tunelab.stages.compare.changes import verdict_changes
from tunelab.stages.compare.verdicts import compare
from tunelab.views.compare import compare as show

RULES = {
    "hypothesis": {"metric": "accuracy"},
    "guardrails": [],
    "noise": [],
    "arms": {},
    "verdict_rule": "v2",
    "guardrail_rule": "g",
    "seed_rule": "s",
}


def test_another_seed_that_swallows_the_gain_is_said_beside_the_new_word(tmp_path):
    lab = make_lab(tmp_path, RAILS)
    add_run(lab, "probe", "baseline", predictions(dict.fromkeys("abc", 0.6)))
    lora = add_run(lab, "lora", "variant", predictions(dict.fromkeys("abc", 0.95)))
    first = next(r for r in compare(lab)["runs"] if r["id"] == lora)
    assert first["verdict"] == "improved on one seed"
    add_run(lab, "lora", "variant", predictions(dict.fromkeys("abc", 0.5)), spec=seeded(lab, 1))
    result = compare(lab)
    (changed,) = result["verdicts_changed"]
    assert changed["run"] == lora and changed["was"] == "improved on one seed"
    assert changed["comparison"] == "c001" and changed["now"] != changed["was"]
    assert "its arm has 2 seed(s) (had 1)" in changed["why"]
    out = io.StringIO()
    show(result, Console(file=out, width=300))
    assert f"note {lora}: {changed['now']}, where c001 read improved on one seed" in out.getvalue()


def test_the_same_runs_judged_otherwise_name_the_rule_texts_or_the_code():
    earlier = {
        "id": "c001",
        "data_version": "v1",
        "reference": "r001",
        "runs": [{"id": "r002", "verdict": "improved"}, {"id": "r003", "verdict": "worse"}],
        "rules": RULES | {"verdict_rule": "v1"},
    }
    now = {
        "data_version": "v1",
        "reference": "r001",
        "runs": [
            {"id": "r002", "verdict": "guardrail unresolved"},
            {"id": "r003", "verdict": "worse"},
        ],
    }
    (changed,) = verdict_changes([earlier], now, RULES)
    assert changed["why"] == "the rule texts differ (another tunelab's)"
    same = verdict_changes([earlier | {"rules": RULES}], now, RULES)
    assert "the same runs under the same rule texts" in same[0]["why"]
    assert verdict_changes([earlier | {"data_version": "v0"}], now, RULES) == []


def test_the_noise_named_is_the_rows_own_not_every_record_of_the_comparison():
    """A mixture run, outside the noise record's family, was told its verdict changed for
    "noise records counted: n001 (were none)", a record its interval never counted."""
    counted = {"vs_reference": {"bootstrap": {"seeds": {"sources": ["noise n001"]}}}}
    earlier = {"id": "c001", "data_version": "v1", "reference": "r001", "rules": RULES}
    earlier["runs"] = [{"id": "r002", "verdict": "no evidence"}, {"id": "r003", "verdict": "worse"}]
    now = {"data_version": "v1", "reference": "r001"}
    now["runs"] = [
        {"id": "r002", "verdict": "improved", **counted},
        {"id": "r003", "verdict": "worse on one seed"},
    ]
    rules = RULES | {"noise": ["n001"]}  # the comparison used n001, for r002 only
    first, second = verdict_changes([earlier], now, rules)
    assert first["why"] == "the seeds' noise its interval counts: noise n001 (was none)"
    assert "n001" not in second["why"]
