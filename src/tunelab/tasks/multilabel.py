"""Multi-label classification: each example has a set of labels (none, one or several).

The model gives one probability per label (a sigmoid each); a label is predicted when its
probability reaches the decision threshold. Metrics, keyed as guardrails name them:

- `micro_f1` (the default primary): F1 over every (example, label) decision pooled,
  2·TP / (2·TP + FP + FN); frequent labels weigh more, as they do for the user.
- `macro_f1`: the mean of the labels' own F1 (a label with no gold and no prediction counts
  0, as scikit-learn's `zero_division=0` does), so a rare label counts as much as a common one.
- `subset_accuracy`: the share of examples whose predicted set is exactly the gold set.
- per label (`per_class`, guardrail scope `every_class`): precision, recall, f1, support.

**The decision threshold** is one number for every label, chosen on the validation split from
the fixed grid `THRESHOLD_GRID` (0.05 to 0.95 by 0.05) as the one that maximises the primary
metric there (ties go to the value nearest 0.5, then the lower). It is recorded with the run's
metrics and predictions, and `tunelab final` applies the recorded value to the test split; it
never chooses one there. One global threshold rather than one per label: per-label thresholds
fit each label to its own few validation positives (a rare label with three of them gets a
threshold chosen by three examples), which overfits validation and makes the paired
comparisons on that same split look better than they are; a single value costs one degree of
freedom for the whole head. The validation metrics are still measured where the threshold was
chosen, which is why the sealed test split is the number to report.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence

import numpy as np

from tunelab.core.errors import TunelabError

name = "multilabel"
overall_metrics = frozenset({"micro_f1", "macro_f1", "subset_accuracy"})
class_metrics = frozenset({"f1", "precision", "recall"})
default_metric = "micro_f1"
group_scope = "every_class"
group_key = "per_class"
lower_is_better: frozenset[str] = frozenset()
evaluation_imports: tuple[str, ...] = ()

THRESHOLD_GRID = tuple(round(0.05 * i, 2) for i in range(1, 20))
"""The thresholds tried on validation: 0.05, 0.10, ..., 0.95."""
THRESHOLD_RULE = (
    "one threshold for every label: the value of the grid 0.05..0.95 (step 0.05) that "
    "maximises the primary metric on the validation split (ties: nearest 0.5, then lower); "
    "a label is predicted when its probability >= the threshold"
)
APPLIED_RULE = "the run's threshold, chosen on validation and recorded there, applied as it is"


def set_key(labels: Sequence[str]) -> str:
    """A label set as one string (a JSON list, sorted): what conflicts, the split's strata and
    the version id compare. `[]` is the empty set."""
    return json.dumps(sorted(labels), ensure_ascii=False)


def multi_hot(sets: Sequence[Sequence[str]], labels: Sequence[str]) -> np.ndarray:
    """Label sets as a 0/1 matrix (examples, labels), columns in `labels` order; a label not
    among `labels` is an error naming it."""
    index = {label: i for i, label in enumerate(labels)}
    out = np.zeros((len(sets), len(labels)), dtype=bool)
    for row, labels_of in enumerate(sets):
        for label in labels_of:
            if label not in index:
                raise TunelabError(f"label {label!r} is not one of the lab's labels {list(labels)}")
            out[row, index[label]] = True
    return out


def target_vector(labels_of: Sequence[str], index: dict[str, int]) -> tuple[float, ...]:
    """One row's training target: 1.0 for each of its labels, 0.0 for the others, in the
    lab's label order (`index`: label -> column), one sigmoid's target each."""
    hot = [0.0] * len(index)
    for label in labels_of:
        hot[index[label]] = 1.0
    return tuple(hot)


def label_counts(gold: np.ndarray, pred: np.ndarray) -> tuple[np.ndarray, ...]:
    """True positives, false positives and false negatives of each label (summed over the
    examples, the second-to-last axis)."""
    gold, pred = np.asarray(gold, bool), np.asarray(pred, bool)
    return (
        (gold & pred).sum(-2),
        (~gold & pred).sum(-2),
        (gold & ~pred).sum(-2),
    )


def ratio(num: np.ndarray, denom: np.ndarray) -> np.ndarray:
    """num / denom, 0 where denom is 0 (scikit-learn's zero_division=0)."""
    num, denom = np.asarray(num, float), np.asarray(denom, float)
    return np.where(denom > 0, num / np.maximum(denom, 1e-300), 0.0)


def scores_from_counts(tp, fp, fn) -> dict[str, np.ndarray]:
    """Per-label precision, recall and f1, and micro and macro F1, from the counts (labels on
    the last axis)."""
    tp, fp, fn = (np.asarray(x, float) for x in (tp, fp, fn))
    f1 = ratio(2 * tp, 2 * tp + fp + fn)
    return {
        "precision": ratio(tp, tp + fp),
        "recall": ratio(tp, tp + fn),
        "f1": f1,
        "macro_f1": f1.mean(-1),
        "micro_f1": ratio(2 * tp.sum(-1), (2 * tp + fp + fn).sum(-1)),
    }


def metrics_arrays(gold: np.ndarray, pred: np.ndarray, labels: Sequence[str]) -> dict:
    """Every multilabel metric of multi-hot gold and predictions (examples, labels)."""
    gold, pred = np.asarray(gold, bool), np.asarray(pred, bool)
    if gold.shape != pred.shape:
        raise TunelabError(f"gold {gold.shape} and predictions {pred.shape} differ in shape")
    if not len(gold):
        raise TunelabError("no examples to score")
    tp, fp, fn = label_counts(gold, pred)
    s = scores_from_counts(tp, fp, fn)
    support = gold.sum(0)
    return {
        "micro_f1": float(s["micro_f1"]),
        "macro_f1": float(s["macro_f1"]),
        "subset_accuracy": float((gold == pred).all(-1).mean()),
        "per_class": {
            label: {
                "precision": float(s["precision"][i]),
                "recall": float(s["recall"][i]),
                "f1": float(s["f1"][i]),
                "support": int(support[i]),
            }
            for i, label in enumerate(labels)
        },
        "labels_per_example": {
            "gold": round(float(gold.sum(-1).mean()), 4),
            "predicted": round(float(pred.sum(-1).mean()), 4),
        },
        "empty": {"gold": int((~gold.any(-1)).sum()), "predicted": int((~pred.any(-1)).sum())},
        "n": len(gold),
    }


def metrics(gold: list[list[str]], predicted: list[list[str]], labels: list[str]) -> dict:
    """All multilabel metrics of per-example label sets (the `score` of every task)."""
    if len(gold) != len(predicted):
        raise TunelabError(f"{len(gold)} gold label sets but {len(predicted)} predictions")
    return metrics_arrays(multi_hot(gold, labels), multi_hot(predicted, labels), labels)


def primary_value(gold: np.ndarray, pred: np.ndarray, metric: str) -> float:
    """One overall metric of multi-hot arrays (what the threshold is chosen to maximise)."""
    if metric == "subset_accuracy":
        return float((gold == pred).all(-1).mean())
    if metric not in ("micro_f1", "macro_f1"):
        raise TunelabError(
            f"{metric!r} is not a multilabel metric; one of {sorted(overall_metrics)}"
        )
    return float(scores_from_counts(*label_counts(gold, pred))[metric])


def choose_threshold(probs: np.ndarray, gold: np.ndarray, metric: str = default_metric) -> dict:
    """The decision threshold chosen on these (validation) probabilities: the grid value that
    maximises `metric` (see the module's docstring), with the metric at every grid value."""
    probs, gold = np.asarray(probs, float), np.asarray(gold, bool)
    tried = {t: primary_value(gold, probs >= t, metric) for t in THRESHOLD_GRID}
    best = max(tried.values())
    chosen = min((t for t, v in tried.items() if v == best), key=lambda t: (abs(t - 0.5), t))
    return {
        "value": chosen,
        "chosen_on": "validation",
        "metric": metric,
        "rule": THRESHOLD_RULE,
        "tried": {f"{t:.2f}": round(v, 4) for t, v in tried.items()},
    }


def applied_threshold(value: float) -> dict:
    """How a recorded threshold is described where it is applied (the test split)."""
    return {"value": value, "chosen_on": "validation", "rule": APPLIED_RULE}


def predicted_sets(probs: np.ndarray, labels: Sequence[str], threshold: float) -> list[list[str]]:
    """Each example's predicted labels (probability >= threshold), in `labels` order."""
    probs = np.asarray(probs, float)
    return [[labels[j] for j in np.flatnonzero(row >= threshold)] for row in probs]


def majority_set(sets: Sequence[Sequence[str]]) -> list[str]:
    """The most frequent label set of the train split (ties: the first set in sorted key
    order): the constant answer most often exactly right, as the majority class is for one
    label. It may be the empty set."""
    counts = Counter(set_key(s) for s in sets)
    if not counts:
        raise TunelabError("no train example to take the majority label set from")
    best = max(counts.values())
    return json.loads(min(k for k, n in counts.items() if n == best))


def predictions_of(
    ids: Sequence[str],
    gold: Sequence[Sequence[str]],
    probs: np.ndarray,
    labels: Sequence[str],
    threshold: float,
) -> list[dict]:
    """Per-example predictions as every multilabel run stores them: the gold and predicted
    sets, each label's probability and the threshold that made the set. The probabilities are
    not rounded: a rounded one can land on the other side of the threshold from the value that
    decided the set (0.34996 shown as 0.35 against a threshold of 0.35)."""
    sets = predicted_sets(probs, labels, threshold)
    return [
        {
            "id": i,
            "gold": sorted(g),
            "predicted": sorted(p),
            "probs": {label: float(x) for label, x in zip(labels, row, strict=True)},
            "threshold": threshold,
        }
        for i, g, p, row in zip(ids, gold, sets, np.asarray(probs, float), strict=True)
    ]


def score_probabilities(
    ids: Sequence[str],
    gold: Sequence[Sequence[str]],
    probs: np.ndarray,
    labels: Sequence[str],
    threshold: float | None,
    metric: str | None = None,
) -> tuple[list[dict], dict]:
    """Predictions and metrics of one split's probabilities. `threshold` None: choose it here
    (the validation split only, by `metric`, default micro_f1); else apply the recorded one."""
    gold_hot = multi_hot(gold, labels)
    if threshold is None:
        chosen = choose_threshold(probs, gold_hot, metric or default_metric)
    else:
        chosen = applied_threshold(float(threshold))
    predictions = predictions_of(ids, gold, probs, labels, chosen["value"])
    pred_hot = multi_hot([p["predicted"] for p in predictions], labels)
    return predictions, {**metrics_arrays(gold_hot, pred_hot, labels), "threshold": chosen}


def recorded_threshold(record: dict) -> float:
    """The threshold a run chose on validation (its record's metrics); an error naming the run
    when it has none, so that no other split ever chooses one."""
    found = ((record.get("metrics") or {}).get("threshold") or {}).get("value")
    if found is None:
        raise TunelabError(
            f"{record.get('id')}: its record holds no decision threshold chosen on validation "
            "(metrics.threshold); a multilabel run cannot be scored elsewhere without one"
        )
    return float(found)
