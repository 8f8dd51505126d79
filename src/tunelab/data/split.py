"""Train/validation/test split: seeded, stratified by label, grouped by a key.

The split is a function of the rows and the seed only: rows are put in id order before a
private `random.Random(seed)` shuffles them, so reordering a source file does not move an
example to another split. Rows that share a group form one unit and move together (e.g.
every paragraph of one document), so a group never straddles two splits. When the data
comes already split, the user's split is kept exactly.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass

from tunelab.core.spec import SplitSpec
from tunelab.core.store import SPLITS
from tunelab.data.loaders import Example
from tunelab.data.raw import DataError

Splits = dict[str, list[Example]]


@dataclass(slots=True)
class _Unit:
    """Rows that must land in one split: one example, or every example of a group, by their
    places in the id-ordered rows (so each split is put back in id order by sorting ints)."""

    places: list[int]
    examples: list[Example]

    @property
    def label(self) -> str:
        """The majority label (ties go to the first label in sorted order)."""
        return self.stratum(_label)

    def stratum(self, of: Callable[[Example], str]) -> str:
        """The majority stratum of the unit's examples (ties: the first in sorted order)."""
        if len(self.examples) == 1:
            return of(self.examples[0])
        counts = Counter(of(ex) for ex in self.examples)
        return min(counts, key=lambda s: (-counts[s], s))


def _label(ex: Example) -> str:
    return ex.label


def in_id_order(rows: list[Example]) -> list[Example]:
    """The rows in natural id order: as they are when they already are (one file read in
    order, the usual case, costs one pass, each row's sort key made once, and no list of
    them), else sorted."""
    key = Example.sort_key
    keys = map(key, rows)
    previous = next(keys, None)
    for current in keys:
        if current < previous:
            return sorted(rows, key=key)
        previous = current
    return rows


def split_examples(
    examples: list[Example],
    spec: SplitSpec,
    grouped: bool,
    stratum: Callable[[Example], str] | None = None,
) -> Splits:
    """Seeded split by the ratios in `spec`, stratified by (majority) label if asked, or by
    `stratum` of each example when given (a multilabel row's rarest label, `label_sets`)."""
    ratios = {"train": spec.train, "validation": spec.validation, "test": spec.test}
    return _split_by(examples, ratios, spec, grouped, stratum)


def carve_validation(
    splits: Splits,
    spec: SplitSpec,
    grouped: bool,
    stratum: Callable[[Example], str] | None = None,
) -> Splits:
    """A user's split without validation rows, with `spec.validation_from_train` of its train
    split held out as validation (seeded, stratified and grouped as `split_examples` is)."""
    share = spec.validation_from_train
    if splits["validation"]:
        raise DataError(
            f"data.split.validation_from_train: the data comes with its own validation split "
            f"({len(splits['validation']):,} rows); keep it and remove the setting, or leave "
            "those rows out"
        )
    carved = _split_by(
        splits["train"], {"train": 1 - share, "validation": share}, spec, grouped, stratum
    )
    return {**splits, "train": carved["train"], "validation": carved["validation"]}


def _split_by(
    examples: list[Example],
    ratios: dict[str, float],
    spec: SplitSpec,
    grouped: bool,
    stratum: Callable[[Example], str] | None,
) -> Splits:
    rng = random.Random(spec.seed)
    ordered = in_id_order(examples)
    units = _units(ordered, grouped)
    buckets: dict[str, list[_Unit]] = defaultdict(list)
    for unit in units:
        buckets[unit.stratum(stratum or _label) if spec.stratify else ""].append(unit)
    places: dict[str, list[int]] = {s: [] for s in SPLITS}
    for name in sorted(buckets):
        bucket = buckets[name]
        rng.shuffle(bucket)
        for split, chosen in _allocate(bucket, ratios).items():
            for unit in chosen:
                places[split].extend(unit.places)
    return {s: [ordered[i] for i in sorted(at)] for s, at in places.items()}


def _units(ordered: list[Example], grouped: bool) -> list[_Unit]:
    """The units of rows in id order: each row, or each group (in group name order)."""
    if not grouped:
        return [_Unit([i], [ex]) for i, ex in enumerate(ordered)]
    groups: dict[str, list[int]] = defaultdict(list)
    for i, ex in enumerate(ordered):
        groups[str(ex.group)].append(i)
    return [_Unit(at, [ordered[i] for i in at]) for _, at in sorted(groups.items())]


def _allocate(units: list[_Unit], ratios: dict[str, float]) -> dict[str, list[_Unit]]:
    """Give each unit to the split furthest below its target row count.

    With one-row units this ends within one row of every target. Larger units go first
    (stable, so the shuffle still decides among equals) and the smallest ones fill the
    gaps. When only as many units are left as splits still empty, each goes to an empty
    split, so every split gets at least one unit whenever there are three or more.
    """
    total = sum(len(u.examples) for u in units)
    target = {s: r * total for s, r in ratios.items()}
    got = {s: 0 for s in ratios}
    chosen: dict[str, list[_Unit]] = {s: [] for s in ratios}
    ordered = sorted(units, key=lambda u: -len(u.examples))
    for i, unit in enumerate(ordered):
        empty = [s for s in ratios if not chosen[s]]
        pool = empty if len(ordered) - i <= len(empty) else list(ratios)
        split = max(pool, key=lambda s: target[s] - got[s])
        chosen[split].append(unit)
        got[split] += len(unit.examples)
    return chosen


def presplit_examples(examples: list[Example]) -> Splits:
    """Keep the split each row came with (a source's `split:` or the split column)."""
    out: Splits = {s: [] for s in SPLITS}
    for ex in examples:
        out[str(ex.split)].append(ex)
    return {s: in_id_order(rows) for s, rows in out.items()}


def straddling_groups(splits: Splits) -> list[str]:
    """A warning when a user's split puts one group in more than one split (a leak)."""
    where: dict[str, set[str]] = defaultdict(set)
    for split, rows in splits.items():
        for ex in rows:
            where[str(ex.group)].add(split)
    straddling = sorted(g for g, s in where.items() if len(s) > 1)
    if not straddling:
        return []
    return [f"{len(straddling)} group(s) appear in more than one split, e.g. {straddling[:5]}"]


UNEVEN = 0.05
"""How far (in shares of the rows) a grouped split may fall from the asked share unsaid."""


def uneven_groups(splits: Splits, spec: SplitSpec) -> list[str]:
    """A warning when splitting whole groups left a split's share of the rows more than UNEVEN
    from what `data.split` asks (9 groups for 60/20/20 gave 44/33/22, unsaid)."""
    total = sum(len(rows) for rows in splits.values())
    if not total:
        return []
    asked = {"train": spec.train, "validation": spec.validation, "test": spec.test}
    got = {s: len(splits[s]) / total for s in SPLITS}
    if all(abs(got[s] - asked[s]) <= UNEVEN for s in SPLITS):
        return []
    groups = len({str(ex.group) for rows in splits.values() for ex in rows})
    shares = "/".join(f"{100 * got[s]:.0f}" for s in SPLITS)
    wanted = "/".join(f"{100 * asked[s]:.0f}" for s in SPLITS)
    return [
        f"the split by data.fields.group gives {shares}% of the rows to train/validation/test "
        f"where data.split asks {wanted}%: each of the {groups} groups goes whole to one split, "
        "so the shares cannot come closer; more, smaller groups (or another data.split.seed) "
        "can"
    ]
