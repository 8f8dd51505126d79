"""What the data step says of labels a model cannot learn or a metric cannot measure, and of
rows it lost to their encoding: refusals and warnings read from the manifest."""

from __future__ import annotations

import pytest
from test_usable import GOOD, spec_of, summary

from tunelab.data import DataError
from tunelab.data.label_spelling import missing_mark_warnings, number_warnings
from tunelab.data.usable import check_usable


def test_train_and_validation_with_no_label_in_common_are_refused() -> None:
    """ids in train, names in validation: both baselines scored 0% and nothing was said."""
    apart = {"train": {"0": 4, "1": 3}, "validation": {"a": 1, "b": 1}, "test": {"a": 1, "b": 1}}
    with pytest.raises(DataError, match=r"train and validation share no label \(train \['0'"):
        check_usable(summary(apart), spec_of())


def test_a_source_partly_not_utf8_is_warned_of_with_the_conversion() -> None:
    """A Windows-1252 CSV lost its accented rows one by one, said as a count alone."""
    source = {"path": "data/docs.csv", "rows": 90, "reasons": {"bad_encoding": 30}}
    (warning,) = check_usable(summary(GOOD, sources=[source]), spec_of())
    assert warning.startswith("data/docs.csv: 30 of its 90 rows are not UTF-8 text")
    assert "`iconv -f cp1252 -t utf-8 data/docs.csv > converted`" in warning


def test_labels_macro_f1_counts_as_zero_on_validation_are_said_so() -> None:
    """A label only in the sealed test file, or listed in task.labels with no row, read F1 0 in
    every validation macro-F1 (a perfect probe read 41.7%) with no word of it."""
    counts = {**GOOD, "test": {"a": 1, "b": 1, "weather": 1}, "extra": {"listed": 0}}
    warnings = check_usable(summary(counts), spec_of())
    assert (
        "['weather'] are in the test split but not in train: the model cannot learn them "
        in (warnings[0])
    )
    assert "with no validation example its validation F1 reads 0 for every run" in warnings[0]
    assert warnings[1].startswith("label(s) ['listed'] (task.labels) have no row in any split")


def test_labels_that_are_an_empty_cell_s_mark_are_warned_of() -> None:
    (warning,) = missing_mark_warnings(["a", "b", "NaN", "N/A"])
    assert warning.startswith("label(s) ['N/A', 'NaN'] look like a spreadsheet's or pandas' mark")


def test_one_number_written_two_ways_is_warned_of() -> None:
    """A CSV whose labels were `2` in one export and `2.0` in another made six classes of three."""
    (warning,) = number_warnings(["a", "b", "2", "2.0"])
    assert warning.startswith("labels ['2', '2.0'] are one number written 2 ways")
