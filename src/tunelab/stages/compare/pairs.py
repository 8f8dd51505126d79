"""Two arms' per-example results on the same validation examples, ready to resample together.

An arm is one run or the seeds of one (runs that differ only in `training.seed`); its metric is
the mean over its seeds. Per-example values: classification resamples (gold, predicted) label
indices and recomputes the metric (macro-F1 is not a sum over examples); multilabel resamples
examples and recomputes its metrics from multi-hot label sets (`set_stats.py`); generative
tasks use each example's value of the metric (`per_example`), whose mean is the metric; pretrain
resamples documents and recomputes each ratio (summed NLL over summed bytes or tokens,
`tasks.pretrain.ratio_rows`), negated because less is better, so that for every task a
positive difference is a gain.

Every interval is the example-level paired bootstrap (`stats.arm_bootstrap`) and, when the
seeds' variance is known (an arm with two or more seeds, or the `noise` runs of the family),
the seed-aware interval beside it (`two_level.py`); `rules.combine` says which is judged. Seeds
that all tie (a spread of 0) leave it unknown: the interval is judged as on one seed, marked
`seeds_tied`.
Flips, McNemar and the concentration check pair the arms' first seeds (`right`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial

import numpy as np

from tunelab.core.errors import TunelabError
from tunelab.stages.compare.set_stats import set_bootstrap, set_metric
from tunelab.stages.compare.stats import MetricFn, arm_bootstrap, mean_rows, swap_test
from tunelab.stages.compare.two_level import (
    arm_weight,
    combine,
    pooled,
    sample_variance,
    seed_aware,
)
from tunelab.tasks import pretrain
from tunelab.tasks.multilabel import multi_hot
from tunelab.tasks.resampled import accuracy_rows, class_metric_rows, macro_f1_rows


def share_bounds(values_a: list[float], trained: bool) -> tuple[float, float]:
    """What a change of a share (a metric in [0, 1]) can be: against a reference that trains,
    [-1, 1]; against an untrained one (its one value a), [-a, 1 - a]."""
    if trained or not values_a:
        return (-1.0, 1.0)
    a = float(values_a[0])
    return (0.0 - a, 1.0 - a)  # 0.0 - a: no "-0.0" against a reference at 0


@dataclass(frozen=True)
class Pair:
    """Two arms' per-example results on the same ids, in the form the bootstrap resamples.

    Classification: `gold` holds label indices and each seed of `a` and `b` an array of
    predicted indices. Generative: each seed of `a` (the reference's arm) and `b` (the run's)
    is a list of prediction dicts, `per_example` gives their values. `noise` holds further arms
    (`tunelab noise` records of the family) whose seeds' variance is pooled in, by source."""

    ids: list[str]
    labels: list[str]
    classification: bool
    gold: np.ndarray | None
    a: list
    b: list
    documents: bool = False
    """Pretrain: each seed is a list of scored documents (`nll`, `bytes`, `tokens`, `source`)."""
    names: tuple[str, str] = ("reference", "run")
    trained: tuple[bool, bool] = (True, True)
    """Whether each arm trains (draws seeds); a baseline's arm carries no seed noise."""
    noise: tuple[tuple[str, list], ...] = field(default=())
    multilabel: bool = False
    """Task multilabel: `gold` and each seed are multi-hot arrays (examples, labels), resampled
    by `set_stats.set_bootstrap`."""

    def interval(self, metric: str, group: str | None = None) -> dict:
        """metric(run's arm) - metric(reference's arm), overall or for one group: the
        example-level interval, the seed-aware one when the seeds' variance is known, and
        which of them is judged (`rules.combine`)."""
        fn, gold, prepare = self._metric(metric, group)
        bootstrap = set_bootstrap if self.multilabel else arm_bootstrap
        a, b = [prepare(s) for s in self.a], [prepare(s) for s in self.b]
        example = bootstrap(fn, gold, a, b)
        arms = [
            (example["values_a"], _arm_label(self.names[0], len(a))),
            (example["values_b"], _arm_label(self.names[1], len(b))),
        ]
        for source, seeds in self.noise:
            arms.append(([float(fn(gold[None], prepare(s)[None])[0]) for s in seeds], source))
        variance = pooled([sample_variance(values, source) for values, source in arms])
        # seeds that tie (every arm of two or more scored alike: likely on a share of few
        # examples, k/n) have not measured the seeds' noise, they missed it: judged on them,
        # two seeds that fixed 4 examples each read "improved" where one read "no evidence"
        # (McNemar p = 0.125). Alike by their range, not a variance of 0: three values of
        # 18/50 have a variance of 4.6e-33 in floating point
        tied = variance is not None and all(alike(v) for v, _ in arms if len(v) > 1)
        weights = (arm_weight(len(a), self.trained[0]), arm_weight(len(b), self.trained[1]))
        bounds = None if self.documents else share_bounds(example["values_a"], self.trained[0])
        measured = variance is not None and not tied
        seeds = seed_aware(example, weights, variance, bounds=bounds) if measured else None
        combined = combine(example, seeds)
        if tied:
            combined["seeds_tied"] = {"sources": list(variance.sources), "df": variance.df}
        return combined

    def swap_test(self, metric: str) -> dict:
        """The paired randomisation test (`stats.swap_test`) of the metric between the arms'
        first seeds, each example's two predictions swapped."""
        fn, gold, prepare = self._metric(metric, None)
        return swap_test(fn, gold, prepare(self.a[0]), prepare(self.b[0]))

    def _metric(self, metric: str, group: str | None) -> tuple:
        """The metric's function of resampled rows, what it takes as gold, and how a seed's
        predictions become its rows."""
        if self.multilabel:
            return set_metric(metric, group, self.labels), self.gold, np.asarray
        if self.classification:
            return self._class_metric(metric, group), self.gold, np.asarray
        if self.documents:
            return self._documents(metric, group)

        def prepare(seed):
            return np.array([per_example(p, metric, group) for p in seed])

        return mean_rows, np.zeros(len(self.ids)), prepare

    def changed(self, metric: str, group: str | None) -> tuple[int, int, int] | None:
        """(fixed, worse, examples) of a group whose metric is the share of its examples right,
        between the arms' first seeds; None for any other metric (F1, precision, a ratio over
        documents, a mean of partial credits)."""
        if self.documents:
            return None
        if self.multilabel:
            if metric != "subset_accuracy" or group is not None:
                return None
            a, b = right(self, metric)
        elif self.classification:
            if (metric, group is None) not in (("accuracy", True), ("recall", False)):
                return None
            keep = slice(None) if group is None else self.gold == self.labels.index(group)
            a = (self.a[0] == self.gold)[keep].astype(float)
            b = (self.b[0] == self.gold)[keep].astype(float)
        else:
            a = np.array([per_example(p, metric, group) for p in self.a[0]])
            b = np.array([per_example(p, metric, group) for p in self.b[0]])
        if not set(np.unique(np.concatenate([a, b]))) <= {0.0, 1.0}:
            return None
        return int(((a == 0) & (b == 1)).sum()), int(((a == 1) & (b == 0)).sum()), len(a)

    def group_size(self, group: str | None) -> int:
        """The examples a group's metric rests on: a class's gold examples, or every example
        (overall, and each field of a generative task, which every example has)."""
        if group is None or self.gold is None:
            return len(self.ids)
        k = self.labels.index(group)
        return int(self.gold[:, k].sum() if self.multilabel else (self.gold == k).sum())

    def _documents(self, metric: str, source: str | None):
        """The ratio metric over documents (of one source when given): the function, its
        weights (bytes or tokens) and how a seed's scored documents become NLLs."""
        first = self.a[0]
        keep = [i for i, p in enumerate(first) if source is None or p["source"] == source]
        if not keep:
            raise TunelabError(f"no validation document of source {source!r} to compare on")
        key = pretrain.weight_key(metric)
        weights = np.array([first[i][key] for i in keep], dtype=float)

        def nll(seed):
            return np.array([seed[i]["nll"] for i in keep])

        return partial(pretrain.ratio_rows, metric), weights, nll

    def _class_metric(self, metric: str, group: str | None) -> MetricFn:
        if group is not None:
            return partial(class_metric_rows, k=self.labels.index(group), metric=metric)
        if metric == "accuracy":
            return accuracy_rows
        return partial(macro_f1_rows, n_labels=len(self.labels))


def alike(values) -> bool:
    """Whether `values` (one arm's seeds' metric) are all the same, to rounding."""
    values = np.asarray(values, float)
    return bool(values.max() - values.min() <= 1e-12 * max(1.0, float(np.abs(values).max())))


def _arm_label(name: str, seeds: int) -> str:
    return f"{name} ({seeds} seeds)"


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


def make_arms(
    ref_arm: list[dict],
    arm: list[dict],
    labels: list[str],
    names: tuple[str, str],
    trained: tuple[bool, bool] = (True, True),
    noise: tuple[tuple[str, list[dict]], ...] = (),
) -> Pair:
    """The pair of two arms, each a list of its seeds' predictions by example id (the first
    seed first), and the noise arms of their family; every run must be scored on the same
    examples."""
    ids = sorted(ref_arm[0])
    for name, seeds in ((names[0], ref_arm), (names[1], arm), *noise):
        for preds in seeds:
            if set(preds) != set(ids):
                raise TunelabError(
                    f"{name} and {names[0]} were scored on different examples; "
                    "they cannot be compared pairwise."
                )
    first = ref_arm[0][ids[0]]
    gold = None
    multilabel = isinstance(first.get("gold"), list)
    if multilabel:  # label sets: multi-hot arrays (examples, labels)
        gold = multi_hot([ref_arm[0][i]["gold"] for i in ids], labels)

        def seed(preds: dict):
            return multi_hot([preds[i]["predicted"] for i in ids], labels)

    elif "gold" in first:  # a classifier: label indices
        index = {label: i for i, label in enumerate(labels)}
        gold = np.array([index[ref_arm[0][i]["gold"]] for i in ids])

        def seed(preds: dict):
            return np.array([index[preds[i]["predicted"]] for i in ids])

    else:  # prediction dicts, or scored documents (task pretrain)

        def seed(preds: dict):
            return [preds[i] for i in ids]

    return Pair(
        ids,
        labels,
        classification=gold is not None and not multilabel,
        gold=gold,
        a=[seed(p) for p in ref_arm],
        b=[seed(p) for p in arm],
        documents="nll" in first,
        names=names,
        trained=trained,
        noise=tuple((name, [seed(p) for p in seeds]) for name, seeds in noise),
        multilabel=multilabel,
    )


def right(pair: Pair, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """Per-example values of the arms' first seeds (reference, run) for flips and McNemar:
    correctness for a classifier (a multilabel one: the whole set right), the metric's
    per-example value otherwise."""
    first_a, first_b = pair.a[0], pair.b[0]
    if pair.multilabel:  # each example's set exactly right (subset correctness)
        return (
            (first_a == pair.gold).all(-1).astype(float),
            (first_b == pair.gold).all(-1).astype(float),
        )
    if pair.classification:
        return (first_a == pair.gold).astype(float), (first_b == pair.gold).astype(float)
    if pair.documents:  # each document's own metric, negated: larger is better
        a = np.array([pretrain.document_value(p, metric) for p in first_a])
        b = np.array([pretrain.document_value(p, metric) for p in first_b])
        return a, b
    a = np.array([per_example(p, metric) for p in first_a])
    b = np.array([per_example(p, metric) for p in first_b])
    return a, b
