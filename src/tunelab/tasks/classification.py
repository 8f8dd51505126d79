"""Document classification: accuracy, macro-F1, per-class precision/recall/F1, confusion."""

from __future__ import annotations

from tunelab.core.errors import TunelabError

name = "classification"
overall_metrics = frozenset({"accuracy", "macro_f1"})
class_metrics = frozenset({"f1", "precision", "recall"})
default_metric = "macro_f1"
group_scope = "every_class"
group_key = "per_class"
lower_is_better: frozenset[str] = frozenset()
evaluation_imports = ("sklearn.metrics",)


def metrics(gold: list[str], predicted: list[str], labels: list[str]) -> dict:
    """All classification metrics for one set of predictions, keyed as guardrails name them."""
    from sklearn.metrics import confusion_matrix, precision_recall_fscore_support  # 3 s to import

    if len(gold) != len(predicted):
        raise TunelabError(f"{len(gold)} gold labels but {len(predicted)} predictions")
    if not gold:
        raise TunelabError("no examples to score")
    p, r, f, support = precision_recall_fscore_support(
        gold, predicted, labels=labels, zero_division=0
    )
    correct = sum(g == y for g, y in zip(gold, predicted, strict=True))
    return {
        "accuracy": correct / len(gold),
        "macro_f1": float(f.mean()),
        "per_class": {
            label: {
                "precision": float(p[i]),
                "recall": float(r[i]),
                "f1": float(f[i]),
                "support": int(support[i]),
            }
            for i, label in enumerate(labels)
        },
        "confusion": {
            "labels": labels,
            "matrix": confusion_matrix(gold, predicted, labels=labels).tolist(),
        },
        "n": len(gold),
    }
