"""Rows of a test split `final` opened, found in a new data version's train or validation split
(`data/opened.py`): by the version's kept digests, or, for a version written before they were
kept, by digests computed from its sealed split."""

from __future__ import annotations

from final_labs import FOR_REPORT, lab_with_baselines  # noqa: F401 (pytest finds the fixture here)

from tunelab.core.lab import open_lab
from tunelab.core.store import Store
from tunelab.data import build_data
from tunelab.data.opened import TEST_KEYS
from tunelab.stages.final.sealed import run_final


def _warned(report: dict) -> list[str]:
    return [w for w in report["warnings"] if "`final` scored on data version" in w]


def test_a_new_split_that_moves_rows_final_scored_into_train_is_warned_of(lab_with_baselines):
    """A new data.split.seed after a final moved 20 of its 36 opened test rows into train and
    7 into validation, without a word."""
    lab_dir, _ = lab_with_baselines
    run_final(open_lab(lab_dir), "r001-majority", FOR_REPORT)
    again = open_lab(lab_dir, {"data.split.seed": 7})
    report = build_data(again.spec, again.path, again.store)
    (warned,) = [w for w in report["warnings"] if "`final` scored on data version" in w]
    moved = int(warned.split(" of the ")[0])
    assert moved > 0 and "in this version's splits:" in warned and "in train" in warned
    same = build_data(open_lab(lab_dir).spec, lab_dir, Store(lab_dir))  # the opened one again
    assert not [w for w in same["warnings"] if "`final` scored" in w]


def test_a_version_that_kept_no_test_digests_is_matched_through_its_seal(lab_with_baselines):
    """A version written before versions kept their test rows' digests: the step said "not
    checked", and 9 of the 12 rows an old final had scored were in the new train split."""
    lab_dir, _ = lab_with_baselines
    run_final(open_lab(lab_dir), "r001-majority", FOR_REPORT)
    opened = Store(lab_dir).current_data()
    kept = open_lab(lab_dir, {"data.split.seed": 7})
    (with_keys,) = _warned(build_data(kept.spec, kept.path, kept.store))
    (Store(lab_dir).data_dir(opened) / TEST_KEYS).unlink()  # as an older tunelab wrote it
    again = open_lab(lab_dir, {"data.split.seed": 7})
    (computed,) = _warned(build_data(again.spec, again.path, again.store))
    assert computed == with_keys  # the same rows found, from the split itself
    test = Store(lab_dir).data_dir(opened) / "test.jsonl"
    test.write_text(test.read_text().replace('"label"', '"label" ', 1))  # its seal broken
    third = open_lab(lab_dir, {"data.split.seed": 7})
    warned = [w for w in build_data(third.spec, third.path, third.store)["warnings"]]
    assert any("cannot be matched" in w and "not checked" in w for w in warned)
