"""Label sets (task multilabel): each row's labels read, checked and counted.

A row's label field holds a JSON list of strings (`["sport", "politics"]`, also when a CSV cell
holds that text), or, with `task.separator`, a string split on it (`sport|politics`). An empty
list or an empty string is the empty set: no label applies, which is data too (a document about
none of the topics). What is quarantined, with its file and line:

- `bad_label_set`: a string that is no JSON list while the task has no separator (the fix is
  named: write a list, or set `task.separator`), a label listed twice in one row, a value that
  is not JSON;
- `label_type`: a number among the labels of a list (labels are strings: write `"3"`);
- `bad_label_type`: a label field that is neither a list nor a string (an object, a float);
- `empty_label`: an empty label inside the list, or between two separators (`a||b`);
- `unknown_label`: a label not among `task.labels`, when they are given.

Every example keeps its set sorted (`Example.label_set`) and, as its `label`, the set's key
(`tasks.multilabel.set_key`: the sorted JSON list). So the conflicts of `conflicts.py` (the
same text with two different sets), the exact duplicates and the version id work on sets as
they do on single labels. A label's spelling is checked per label (`label_spelling.py`).
The split is stratified by each row's rarest label (`stratum`): the label sets themselves are
too many and too small to stratify by (a set seen once would always land in train).
"""

from __future__ import annotations

import json
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from tunelab.core.data_sections import Fields
from tunelab.core.multilabel import MultilabelTask
from tunelab.core.store import SPLITS
from tunelab.data.balance import describe, imbalance
from tunelab.data.label_spelling import RULE, unify_label_spellings
from tunelab.data.loaders import LONE_SURROGATE, Example, Rejection, _encodable, check_record
from tunelab.data.raw import Record
from tunelab.tasks.multilabel import set_key

PLACEHOLDER = "-"
"""Stands for the label set while `check_record` checks the rest of the row."""


def label_set_check(fields: Fields, task: MultilabelTask):
    """The row check (`loaders.RowCheck`) of a multilabel source."""

    def check(rec: Record, split: str | None) -> Example | Rejection:
        return check_label_set_row(rec, fields, task, split)

    return check


def check_label_set_row(
    rec: Record, fields: Fields, task: MultilabelTask, split: str | None
) -> Example | Rejection:
    """One row as a multilabel example, or the reason it is quarantined: the text, id, group
    and split as for every row (`loaders.check_record`), then the label set."""
    raw = rec.values.get(fields.label)
    stand_in = rec
    if raw is not None:  # a missing or null field is check_record's to report
        stand_in = replace(rec, values={**rec.values, fields.label: PLACEHOLDER})
    checked = check_record(stand_in, fields, None, split)
    if isinstance(checked, Rejection):
        return checked
    parsed = parse_label_set(raw, task.separator, task.labels)
    if isinstance(parsed, tuple):
        return Rejection(rec.file, rec.line, *parsed)
    if not _encodable(parsed):
        return Rejection(rec.file, rec.line, "bad_encoding", LONE_SURROGATE)
    return replace(checked, label=set_key(parsed), label_set=parsed)


def parse_label_set(
    value: Any, separator: str | None, labels: list[str] | None = None
) -> list[str] | tuple[str, str]:
    """The sorted label set of one row's label field, or (kind, reason) for the quarantine."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("[") and text.endswith("]"):  # a list written as text (a CSV cell)
            try:
                value = json.loads(text)
            except json.JSONDecodeError:
                return (
                    "bad_label_set",
                    f"{_short(value)} is not a JSON list (labels in double quotes: "
                    '["sport", "tech"])',
                )
        elif separator is not None:
            if not text:
                return []
            value = text.split(separator)
            if any(not piece.strip() for piece in value):
                return "empty_label", f"an empty label between separators in {_short(text)}"
        elif text in ONE_HOT:
            return "one_hot_label", ONE_HOT_REASON.format(value=_short(value))
        else:
            return (
                "bad_label_set",
                f"the label field is the string {_short(value)}, and task multilabel reads a "
                'list of labels: write it as a JSON list (["sport", "tech"]; [] for none), or '
                "set task.separator (e.g. '|') to split strings",
            )
    if isinstance(value, int | float) and not isinstance(value, bool) and str(value) in ONE_HOT:
        return "one_hot_label", ONE_HOT_REASON.format(value=value)
    if not isinstance(value, list):
        return (
            "bad_label_type",
            f"the label field must be a list of labels (or a string, with task.separator), "
            f"got {type(value).__name__}",
        )
    return _checked_items(value, labels)


ONE_HOT = {"0", "1", "0.0", "1.0"}
ONE_HOT_REASON = (
    "the label field holds {value}, one of several 0/1 columns (one-hot)? task multilabel reads "
    'one field with the row\'s labels, as a JSON list (["sport", "tech"]; [] for none) or a '
    "string split on task.separator: build that column from the 0/1 ones (in pandas, "
    "`df[cols].apply(lambda r: [c for c in cols if r[c]], axis=1)`)"
)
"""A multilabel row's label field that reads as one cell of one-hot columns: said as that, not
as a string to split (a separator made labels '0' and '1', one a row, without a word)."""


def _checked_items(items: list, labels: list[str] | None) -> list[str] | tuple[str, str]:
    out: list[str] = []
    for item in items:
        if isinstance(item, int | float) and not isinstance(item, bool):
            return (
                "label_type",
                f"label {item!r} in the list is a number; labels are strings: write it as "
                f'"{item}" if it is one',
            )
        if not isinstance(item, str):
            return "bad_label_type", f"a label must be a string, got {type(item).__name__}"
        label = item.strip()
        if not label:
            return "empty_label", "an empty label in the list"
        if label in out:
            return "bad_label_set", f"label {label!r} is listed twice"
        if labels is not None and label not in labels:
            return "unknown_label", f"label {label!r} is not one of task.labels {labels}"
        out.append(label)
    return sorted(out)


def _short(text: str, limit: int = 60) -> str:
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


def unify_set_spellings(examples: list[Example], rules: list[str]) -> list[Example]:
    """`label_spelling.unify_label_spellings` for label sets: with the `unicode_nfkc` cleaning
    rule each label is normalised as the texts are; without it, two labels that print alike
    but are spelt differently (in any rows) are refused, naming both and a row of each."""
    if RULE in rules:
        return [_nfkc(ex) for ex in examples]
    unify_label_spellings(
        [replace(ex, label=label) for ex in examples for label in ex.label_set], []
    )
    return examples


def _nfkc(ex: Example) -> Example:
    labels = sorted({unicodedata.normalize("NFKC", label) for label in ex.label_set})
    return ex if labels == ex.label_set else replace(ex, label=set_key(labels), label_set=labels)


def stratum(examples: Iterable[Example]) -> Callable[[Example], str]:
    """The split's stratum of an example: its rarest label over `examples` (ties: the first
    label in sorted order); the empty set is a stratum of its own."""
    counts = Counter(label for ex in examples for label in ex.label_set)

    def of(ex: Example) -> str:
        if not ex.label_set:
            return ""
        return min(ex.label_set, key=lambda label: (counts[label], label))

    return of


def seen_labels(splits: dict[str, list[Example]]) -> set[str]:
    """Every label of every kept row."""
    return {label for rows in splits.values() for ex in rows for label in ex.label_set}


def set_counts(splits: dict[str, list[Example]], labels: list[str]) -> dict[str, dict]:
    """Per split: rows, rows holding each label (a row counts once under each of its labels,
    so the label counts add up to more than the rows), and rows with no label."""
    out = {}
    for split in SPLITS:
        rows = splits.get(split, [])
        per_label = Counter(label for ex in rows for label in ex.label_set)
        out[split] = {
            "n": len(rows),
            "labels": {label: per_label.get(label, 0) for label in labels},
            "no_label": sum(1 for ex in rows if not ex.label_set),
        }
    return out


def set_summary(splits: dict[str, list[Example]]) -> dict[str, dict]:
    """Per split: rows with no label, the mean labels per row, and distinct label sets."""
    out = {}
    for split in SPLITS:
        rows = splits.get(split, [])
        out[split] = {
            "no_label": sum(1 for ex in rows if not ex.label_set),
            "labels_per_row": round(sum(len(ex.label_set) for ex in rows) / len(rows), 2)
            if rows
            else 0.0,
            "distinct_sets": len({ex.label for ex in rows}),
        }
    return out


def set_warnings(train: list[Example]) -> list[str]:
    """Label imbalance in train (rows per label, largest over smallest), and a label that every
    train row has (its sigmoid learns a constant)."""
    warnings = []
    found = imbalance(label for ex in train for label in ex.label_set)
    if found:
        warnings.append(f"label imbalance in train: {describe(found)}")
    everywhere = sorted(set.intersection(*(set(ex.label_set) for ex in train))) if train else []
    if everywhere:
        warnings.append(
            f"label(s) {everywhere} are on every train row: their sigmoid learns a constant "
            "and their validation scores say nothing about the model"
        )
    return warnings
