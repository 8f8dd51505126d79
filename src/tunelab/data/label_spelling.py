"""Labels that print alike but are spelt differently: `café` as one code point (U+00E9) and as
`e` followed by a combining accent (U+0301) look the same everywhere they are shown, yet are two
strings, so they would become two classes that a confusion matrix prints twice.

Two labels are spelt alike when their NFC forms (Unicode's canonical composition) are equal.
When the data's cleaning rules normalise the texts (`unicode_nfkc`), the labels get the same
rule, and such spellings become one label. Without that rule nothing is changed silently: the
data step is refused, naming both spellings by their code points and a row of each.

Labels that differ only in case or spacing (`Tech` and `tech`) print differently, and a label
set may mean both (`US` and `us`), so they are not refused: `tunelab data` warns, naming them
(`case_warnings`), since they are more often one class typed two ways. So for one number written
as two labels (`2`, `2.0`: `number_warnings`) and for labels that are an empty cell's mark
(`NaN`, `N/A`: `missing_mark_warnings`).
"""

from __future__ import annotations

import unicodedata
from collections import defaultdict
from dataclasses import replace

from tunelab.data.loaders import Example
from tunelab.data.raw import DataError

RULE = "unicode_nfkc"
"""The cleaning rule whose normalisation the labels share."""


def unify_label_spellings(examples: list[Example], rules: list[str]) -> list[Example]:
    """The examples with their labels normalised as the texts are (`RULE` among the cleaning
    `rules`), else as they are; DataError when two labels differ only in their spelling and
    no rule says which to keep."""
    if RULE in rules:
        return [_nfkc(ex) for ex in examples]
    first: dict[str, dict[str, Example]] = defaultdict(dict)
    for ex in examples:
        first[unicodedata.normalize("NFC", ex.label)].setdefault(ex.label, ex)
    clashes = [spellings for spellings in first.values() if len(spellings) > 1]
    if not clashes:
        return examples
    shown = "; ".join(
        " and ".join(
            f"{label!r} ({_code_points(label)}, e.g. {ex.origin})" for label, ex in s.items()
        )
        for s in clashes
    )
    raise DataError(
        f"labels that print alike are spelt differently: {shown}. They would be separate "
        f"classes. Add {{rule: {RULE}}} to data.cleaning to normalise texts and labels alike, "
        "or correct the labels at the source."
    )


def case_warnings(labels: set[str] | list[str]) -> list[str]:
    """A warning per group of labels equal but for case and spacing."""
    return [
        f"labels {spellings} differ only in case or spacing: they are {len(spellings)} "
        "separate classes; if they are one, correct the labels at the source"
        for spellings in _alike(labels, lambda label: " ".join(label.casefold().split()))
    ]


def number_warnings(labels: set[str] | list[str]) -> list[str]:
    """A warning per number written as labels two ways (`2` and `2.0`: two exports joined)."""
    return [
        f"labels {spellings} are one number written {len(spellings)} ways (two exports "
        "joined?): they are as many classes; write them alike"
        for spellings in _alike(labels, _number)
    ]


MISSING_MARKS = frozenset({"NaN", "nan", "NAN", "N/A", "n/a", "NA", "null", "NULL", "None", "#N/A"})
"""Labels that are how spreadsheets and pandas write an empty cell."""


def missing_mark_warnings(labels: set[str] | list[str]) -> list[str]:
    """A warning for labels that are an empty cell's mark (`NaN`, `N/A`): a class of their own."""
    missing = sorted(label for label in labels if label in MISSING_MARKS)
    return [
        f"label(s) {missing} look like a spreadsheet's or pandas' mark for an empty cell: "
        "their rows are a class of their own; if they have no label, leave those rows out "
        "(an empty cell is quarantined as empty_label)"
    ] * bool(missing)


def _alike(labels: set[str] | list[str], key) -> list[list[str]]:
    """The groups of two or more labels that `key` makes one (None: no group), sorted."""
    groups: dict = defaultdict(list)
    for label in sorted(labels):
        if (k := key(label)) is not None:
            groups[k].append(label)
    return [spellings for spellings in groups.values() if len(spellings) > 1]


def _number(label: str) -> float | None:
    """A label's value where it is a number written as text (`2`, `2.0`), else None."""
    try:
        value = float(label)
    except ValueError:
        return None
    return value if value == value else None  # not NaN (a missing mark, said apart)


def _nfkc(ex: Example) -> Example:
    label = unicodedata.normalize("NFKC", ex.label)
    return ex if label == ex.label else replace(ex, label=label)


def _code_points(text: str) -> str:
    return " ".join(f"U+{ord(ch):04X}" for ch in text)
