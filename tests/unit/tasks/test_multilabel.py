"""Task multilabel: its metrics against scikit-learn's, the threshold chosen on validation only,
the majority label set, and the spec section's checks."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import f1_score, precision_recall_fscore_support

from tunelab.core.errors import TunelabError
from tunelab.core.spec import SpecError, validate_spec
from tunelab.tasks import get_task, multilabel
from tunelab.tasks.multilabel import (
    THRESHOLD_GRID,
    choose_threshold,
    majority_set,
    metrics,
    multi_hot,
    predicted_sets,
    recorded_threshold,
    score_probabilities,
    set_key,
)

LABELS = ["business", "sport", "tech"]


def random_sets(rng, n: int) -> np.ndarray:
    return rng.random((n, len(LABELS))) < 0.4


def test_the_metrics_are_scikit_learns_on_random_sets() -> None:
    rng = np.random.default_rng(0)
    gold, pred = random_sets(rng, 50), random_sets(rng, 50)
    gold[0], pred[1] = False, False  # an empty gold set and an empty prediction
    as_sets = [[LABELS[j] for j in np.flatnonzero(row)] for row in gold]
    predicted = [[LABELS[j] for j in np.flatnonzero(row)] for row in pred]
    m = metrics(as_sets, predicted, LABELS)
    assert m["micro_f1"] == pytest.approx(f1_score(gold, pred, average="micro"))
    assert m["macro_f1"] == pytest.approx(f1_score(gold, pred, average="macro", zero_division=0))
    assert m["subset_accuracy"] == pytest.approx((gold == pred).all(1).mean())
    p, r, f, support = precision_recall_fscore_support(gold, pred, zero_division=0)
    for i, label in enumerate(LABELS):
        assert m["per_class"][label] == pytest.approx(
            {"precision": p[i], "recall": r[i], "f1": f[i], "support": support[i]}
        )
    assert m["n"] == 50 and m["empty"]["gold"] == int((~gold.any(1)).sum())


def test_a_label_never_given_nor_predicted_counts_zero_in_macro_f1() -> None:
    m = metrics([["sport"], ["sport"]], [["sport"], ["sport"]], LABELS)
    assert m["micro_f1"] == 1.0 and m["subset_accuracy"] == 1.0
    assert m["macro_f1"] == pytest.approx(1 / 3)  # as scikit-learn's zero_division=0


def test_the_registry_knows_its_metrics_and_guardrail_scope() -> None:
    task = get_task("multilabel")
    assert task is multilabel and task.default_metric == "micro_f1"
    assert task.overall_metrics == {"micro_f1", "macro_f1", "subset_accuracy"}
    assert (task.group_scope, task.group_key) == ("every_class", "per_class")


def test_an_unknown_label_in_a_prediction_is_an_error_naming_it() -> None:
    with pytest.raises(TunelabError, match="'politics' is not one of"):
        multi_hot([["politics"]], LABELS)


def test_the_threshold_maximises_the_primary_metric_on_the_grid() -> None:
    gold = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 0, 1]], bool)
    probs = np.array([[0.3, 0.1, 0.2], [0.1, 0.35, 0.0], [0.2, 0.1, 0.32], [0.33, 0.0, 0.31]])
    chosen = choose_threshold(probs, gold, "micro_f1")
    assert chosen["value"] == 0.3  # every gold label >= 0.3, every other one < 0.25
    assert chosen["chosen_on"] == "validation" and chosen["metric"] == "micro_f1"
    assert chosen["tried"]["0.30"] == 1.0 and len(chosen["tried"]) == len(THRESHOLD_GRID)
    assert predicted_sets(probs, LABELS, 0.3) == [
        ["business"],
        ["sport"],
        ["tech"],
        ["business", "tech"],
    ]


def test_ties_go_to_the_threshold_nearest_one_half() -> None:
    gold = np.array([[1, 0, 0], [0, 1, 0]], bool)
    probs = np.array([[0.99, 0.01, 0.01], [0.01, 0.99, 0.01]])
    assert choose_threshold(probs, gold)["value"] == 0.5  # every grid value from 0.05 is perfect


def test_the_threshold_follows_the_metric_it_is_chosen_for() -> None:
    gold = np.array([[1, 1, 1], [1, 1, 1], [1, 0, 0], [0, 0, 1]], bool)
    probs = np.array([[0.9, 0.4, 0.02], [0.9, 0.4, 0.02], [0.9, 0.4, 0.02], [0.02, 0.02, 0.9]])
    # at 0.4 `sport` is taken: two more right labels and one wrong, so micro F1 rises (0.67 ->
    # 0.80), but the wrong one costs an exact set and the right ones make none exact
    assert choose_threshold(probs, gold, "micro_f1")["value"] == 0.4
    assert choose_threshold(probs, gold, "subset_accuracy")["value"] == 0.5


def test_a_recorded_threshold_is_applied_and_never_chosen_again(monkeypatch) -> None:
    probs = np.array([[0.9, 0.2, 0.6], [0.1, 0.7, 0.2]])
    gold = [["business"], ["sport"]]

    def chosen_again(*_args, **_kw):
        raise AssertionError("a threshold was chosen outside validation")

    monkeypatch.setattr(multilabel, "choose_threshold", chosen_again)
    predictions, m = score_probabilities(["a", "b"], gold, probs, LABELS, 0.65)
    assert m["threshold"]["value"] == 0.65 and "applied" in m["threshold"]["rule"]
    assert [p["predicted"] for p in predictions] == [["business"], ["sport"]]
    assert predictions[0]["probs"] == {"business": 0.9, "sport": 0.2, "tech": 0.6}
    assert predictions[0]["threshold"] == 0.65


def test_without_a_threshold_the_rows_choose_one_and_record_it() -> None:
    probs = np.array([[0.9, 0.2, 0.6], [0.1, 0.7, 0.2]])
    predictions, m = score_probabilities(["a", "b"], [["business"], ["sport"]], probs, LABELS, None)
    assert m["threshold"]["chosen_on"] == "validation" and 0.6 < m["threshold"]["value"] <= 0.7
    assert m["subset_accuracy"] == 1.0
    assert {p["threshold"] for p in predictions} == {m["threshold"]["value"]}


def test_a_run_without_a_recorded_threshold_is_refused_by_name() -> None:
    assert recorded_threshold({"id": "r1", "metrics": {"threshold": {"value": 0.4}}}) == 0.4
    with pytest.raises(TunelabError, match="r2: its record holds no decision threshold"):
        recorded_threshold({"id": "r2", "metrics": {"micro_f1": 0.5}})


def test_the_majority_is_the_most_frequent_set_which_may_be_empty() -> None:
    assert majority_set([["sport"], ["tech", "sport"], ["sport", "tech"], []]) == ["sport", "tech"]
    assert majority_set([[], [], ["sport"]]) == []
    assert set_key(["tech", "sport"]) == '["sport", "tech"]'


def spec_with(task: dict, **more) -> dict:
    spec = {
        "task": task,
        "data": {"sources": [{"type": "jsonl", "path": "d.jsonl"}]},
        "model": {"path": "m"},
    }
    spec.update(more)
    return spec


def test_the_spec_takes_a_multilabel_task_and_its_metrics() -> None:
    spec = validate_spec(
        spec_with(
            {"type": "multilabel", "labels": ["a", "b"], "separator": "|"},
            hypothesis={"behaviour": "tags", "metric": "micro_f1", "min_effect": 0.01},
            guardrails=[{"metric": "f1", "scope": "every_class", "max_drop": 0.05}],
        )
    )
    assert spec.task.type == "multilabel" and spec.model_kind == "encoder"


@pytest.mark.parametrize(
    ("task", "more", "words"),
    [
        ({"type": "multilabel"}, {"model": {"path": "m", "kind": "causal"}}, "model.kind"),
        (
            {"type": "multilabel"},
            {"data": {"sources": [{"type": "folder", "path": "f"}]}},
            "data.sources.0.type",
        ),
        (
            {"type": "multilabel", "labels": ["a|b", "c"], "separator": "|"},
            {},
            "contain the separator",
        ),
        ({"type": "multilabel", "labels": ["a", "a"]}, {}, "more than once"),
        ({"type": "multilabel", "separator": " "}, {}, "only whitespace"),
        (
            {"type": "multilabel"},
            {"hypothesis": {"behaviour": "b", "metric": "accuracy", "min_effect": 0}},
            "'accuracy' is not a metric of task multilabel",
        ),
    ],
)
def test_what_a_multilabel_lab_cannot_do_is_refused_at_its_field(task, more, words) -> None:
    with pytest.raises(SpecError, match=words):
        validate_spec(spec_with(task, **more))


def test_init_writes_a_valid_multilabel_template(tmp_path) -> None:
    from pathlib import Path

    from tunelab.core.spec import load_spec
    from tunelab.stages.init import init_lab

    spec = load_spec(Path(init_lab(tmp_path, "multilabel")["spec"]))
    assert spec.task.type == "multilabel" and spec.hypothesis.metric == "micro_f1"
    assert spec.data.fields.label == "labels" and spec.model_kind == "encoder"
