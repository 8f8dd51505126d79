"""Two runs' per-example results on the same validation examples, ready to resample together.

Per-example values: classification resamples (gold, predicted) label indices and recomputes
the metric (macro-F1 is not a sum over examples); generative tasks use each example's value
of the metric (`per_example`), whose mean is the metric; pretrain resamples documents and
recomputes each ratio (summed NLL over summed bytes or tokens, `tasks.pretrain.ratio_rows`),
negated because less is better, so that for every task a positive difference is a gain.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np

from tunelab.core.errors import TunelabError
from tunelab.stages.compare.stats import (
    MetricFn,
    accuracy_rows,
    class_metric_rows,
    macro_f1_rows,
    paired_bootstrap,
)
from tunelab.tasks import pretrain


@dataclass(frozen=True)
class Pair:
    """Two runs' per-example results on the same ids, in the form the bootstrap resamples.

    Classification: `gold`, `a`, `b` are label indices. Generative: `values(pred_of, metric)`
    gives per-example values; `a` and `b` hold the reference's and the run's predictions."""

    ids: list[str]
    labels: list[str]
    classification: bool
    gold: np.ndarray | None
    a: np.ndarray | list[dict]
    b: np.ndarray | list[dict]
    documents: bool = False
    """Pretrain: `a` and `b` are scored documents (`nll`, `bytes`, `tokens`, `source`)."""

    def interval(self, metric: str, group: str | None = None) -> dict:
        """Paired bootstrap of metric(run) - metric(reference), overall or for one group."""
        if self.classification:
            return paired_bootstrap(self._class_metric(metric, group), self.gold, self.a, self.b)
        if self.documents:
            return self._document_interval(metric, group)
        a = np.array([per_example(p, metric, group) for p in self.a])
        b = np.array([per_example(p, metric, group) for p in self.b])
        return paired_bootstrap(mean_rows, np.zeros(len(a)), a, b)

    def _document_interval(self, metric: str, source: str | None) -> dict:
        """The ratio metric's paired bootstrap over documents (of one source when given)."""
        keep = [i for i, p in enumerate(self.a) if source is None or p["source"] == source]
        if not keep:
            raise TunelabError(f"no validation document of source {source!r} to compare on")
        key = pretrain.weight_key(metric)
        weights = np.array([self.a[i][key] for i in keep], dtype=float)
        nll_a = np.array([self.a[i]["nll"] for i in keep])
        nll_b = np.array([self.b[i]["nll"] for i in keep])
        return paired_bootstrap(partial(pretrain.ratio_rows, metric), weights, nll_a, nll_b)

    def _class_metric(self, metric: str, group: str | None) -> MetricFn:
        if group is not None:
            return partial(class_metric_rows, k=self.labels.index(group), metric=metric)
        if metric == "accuracy":
            return accuracy_rows
        return partial(macro_f1_rows, n_labels=len(self.labels))


def mean_rows(_: np.ndarray, values: np.ndarray) -> np.ndarray:
    return values.mean(axis=-1)


def per_example(pred: dict, metric: str, field: str | None = None) -> float:
    """One example's contribution to a mean-type metric of a generative task, overall or for
    one field (`presence` or `exact` of that field)."""
    score = pred["score"]
    fields = score.get("fields", {})
    if field is not None:
        return float(fields[field]["present" if metric == "presence" else "exact"])
    if metric == "field_presence":
        return float(np.mean([f["present"] for f in fields.values()])) if fields else 1.0
    if metric == "field_accuracy":
        return float(np.mean([f["exact"] for f in fields.values()])) if fields else 1.0
    return float(score[metric])


def make_pair(ref_preds: dict, preds: dict, labels: list[str], names: tuple[str, str]) -> Pair:
    """The pair of `names` (reference id, run id) from their predictions by example id."""
    if set(ref_preds) != set(preds):
        raise TunelabError(
            f"{names[1]} and {names[0]} were scored on different examples; "
            "they cannot be compared pairwise."
        )
    ids = sorted(ref_preds)
    if "nll" in ref_preds[ids[0]]:  # scored documents (task pretrain)
        a, b = [ref_preds[i] for i in ids], [preds[i] for i in ids]
        return Pair(ids, labels, False, None, a, b, documents=True)
    if "gold" in ref_preds[ids[0]]:
        index = {label: i for i, label in enumerate(labels)}
        gold = np.array([index[ref_preds[i]["gold"]] for i in ids])
        a = np.array([index[ref_preds[i]["predicted"]] for i in ids])
        b = np.array([index[preds[i]["predicted"]] for i in ids])
        return Pair(ids, labels, True, gold, a, b)
    return Pair(ids, labels, False, None, [ref_preds[i] for i in ids], [preds[i] for i in ids])


def right(pair: Pair, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """Per-example values of (reference, run) for flips and McNemar: correctness for a
    classifier, the metric's per-example value otherwise."""
    if pair.classification:
        return (pair.a == pair.gold).astype(float), (pair.b == pair.gold).astype(float)
    if pair.documents:  # each document's own metric, negated: larger is better
        a = np.array([pretrain.document_value(p, metric) for p in pair.a])
        b = np.array([pretrain.document_value(p, metric) for p in pair.b])
        return a, b
    a = np.array([per_example(p, metric) for p in pair.a])
    b = np.array([per_example(p, metric) for p in pair.b])
    return a, b
