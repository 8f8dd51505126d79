"""Usability: data no lab can use is refused with its cause and fix, at `data` and again
from the stored manifest before a model is loaded."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tunelab.core.spec import Spec, validate_spec
from tunelab.core.store import Store
from tunelab.data import DataError, build_data
from tunelab.data.usable import check_usable, require_usable

ROWS = {"rows_read": 10, "kept": 9, "quarantined": 1, "duplicates_removed": 0}


def spec_of(sources: list[dict] | None = None, task: dict | None = None, **data: object) -> Spec:
    sources = sources or [{"type": "jsonl", "path": "rows.jsonl"}]
    raw: dict = {"data": {"sources": sources, **data}, "model": {"path": "x"}}
    if task:
        raw["task"] = task
    return validate_spec(raw)


def summary(counts: dict[str, dict[str, int]], presplit: bool = False, **extra: object) -> dict:
    labels = sorted({label for per in counts.values() for label in per})
    return {
        "labels": labels,
        "counts": {
            split: {
                "n": sum(counts.get(split, {}).values()),
                "labels": {label: counts.get(split, {}).get(label, 0) for label in labels},
            }
            for split in ("train", "validation", "test")
        },
        "rows": ROWS,
        "presplit": presplit,
        **extra,
    }


GOOD = {"train": {"a": 4, "b": 3}, "validation": {"a": 1, "b": 1}, "test": {"a": 1, "b": 1}}
GENERATIVE = {"type": "format", "regex": "x+"}


def test_usable_data_passes_without_warnings() -> None:
    assert check_usable(summary(GOOD), spec_of()) == []


def test_an_empty_validation_split_is_refused_with_the_accounting() -> None:
    with pytest.raises(DataError) as err:
        check_usable(summary({**GOOD, "validation": {}}), spec_of())
    assert str(err.value) == (
        "the validation split is empty (rows read 10 = kept 9 + quarantined 1 + removed as "
        "duplicates 0); add rows: data.split (0.7 / 0.15 / 0.15) needs at least one row in each "
        "split"
    )


def test_an_empty_split_says_what_the_quarantine_took() -> None:
    """Splits emptied by the quarantine said how many rows it took, not why."""
    took = {"reasons": {"label_type": 8, "empty_text": 1}}
    first = {"label_type": {"at": "d.jsonl:2", "reason": "label 3 is a number"}}
    sources = [took | {"first": first}, {"reasons": {"label_type": 1}, "first": {}}]
    with pytest.raises(DataError) as err:
        check_usable(summary({**GOOD, "validation": {}}, sources=sources), spec_of())
    assert str(err.value).splitlines()[-1] == (
        "also: the quarantine (10 rows): most as label_type (9), e.g. d.jsonl:2: label 3 is a "
        "number; also empty_text 1. a label written as a number among string labels: quote it, "
        "or fix the slip"
    )


def test_an_empty_split_of_the_users_split_names_the_fix() -> None:
    by_source = spec_of([{"type": "jsonl", "path": "t.jsonl", "split": "train"}])
    with pytest.raises(DataError, match=r"the validation split is empty.*give a source `split: "):
        check_usable(summary({**GOOD, "validation": {}}, presplit=True), by_source)
    column = spec_of(fields={"split": "part"})
    with pytest.raises(DataError, match=r"give some rows 'train' in the split column \('part'\)"):
        check_usable(summary({**GOOD, "train": {}}, presplit=True), column)


def test_an_empty_test_split_is_refused_only_when_the_spec_asks_for_one() -> None:
    no_test = summary({**GOOD, "test": {}}, presplit=True)
    sources = [
        {"type": "jsonl", "path": "t.jsonl", "split": "train"},
        {"type": "jsonl", "path": "v.jsonl", "split": "validation"},
    ]
    (warning,) = check_usable(no_test, spec_of(sources))
    assert warning.startswith("the test split is empty: `tunelab final` will have nothing")
    (warning,) = check_usable(no_test, spec_of(fields={"split": "part"}))
    assert "nothing to score" in warning
    with_test = [*sources, {"type": "jsonl", "path": "x.jsonl", "split": "test"}]
    with pytest.raises(DataError, match="the test split is empty"):
        check_usable(no_test, spec_of(with_test))
    with pytest.raises(DataError, match="the test split is empty"):
        check_usable(summary({**GOOD, "test": {}}), spec_of())  # a ratio split makes one


def test_one_label_left_is_refused_for_a_classifier_not_for_a_generative_task() -> None:
    one = {split: {"a": n} for split, n in (("train", 5), ("validation", 1), ("test", 1))}
    with pytest.raises(DataError) as err:
        check_usable(summary(one), spec_of())
    assert str(err.value).startswith(
        "only 1 label(s) remain in the train split (['a']): a classifier needs two or more. "
        "Does data.fields.label ('label') name the label field?"
    )
    assert check_usable(summary(one), spec_of(task=GENERATIVE)) == []
    # the quarantine took the others: its main reason and a row of it, not a question
    first = {"bad_label_set": {"at": "d.csv:2", "reason": "\"['b']\" is not a JSON list"}}
    took = [{"reasons": {"bad_label_set": 105}, "first": first}]
    with pytest.raises(DataError) as err:
        check_usable(summary(one, sources=took), spec_of())
    assert "The quarantine took 105 rows, most as bad_label_set (105), e.g. d.csv:2: " in str(
        err.value
    )


def test_a_label_missing_from_validation_warns_or_refuses_by_policy() -> None:
    counts = {**GOOD, "validation": {"a": 2}}
    assert check_usable(summary(counts), spec_of()) == [
        "label(s) ['b'] have train examples but none in the validation split: their "
        "validation scores cannot be measured (its validation F1 reads 0 for every run, which "
        "lowers macro-F1 alike for all, and an every_class guardrail leaves it not checked); "
        "give it more rows, or other data.split ratios"
    ]
    with pytest.raises(
        DataError,
        match=r"\['b'\] .* none in the validation split \(data\."
        r"missing_label: error\); add validation examples",
    ):
        check_usable(summary(counts), spec_of(missing_label="error"))
    generative = check_usable(summary(counts), spec_of(task=GENERATIVE, missing_label="error"))
    assert len(generative) == 1  # a generative task's categories only warn


def test_a_label_only_in_validation_is_a_warning() -> None:
    counts = {**GOOD, "validation": {"a": 1, "b": 1, "c": 1}}
    assert check_usable(summary(counts), spec_of()) == [
        "label(s) ['c'] are in the validation split but not in train: the model cannot learn them"
    ]


def source(**entry: object) -> dict:
    return {
        "name": "rows",
        "type": "jsonl",
        "path": "rows.jsonl",
        "rows": 5,
        "quarantined": 0,
        "reasons": {},
        "first": {},
        **entry,
    }


def test_a_source_with_no_rows_or_only_quarantined_rows_is_refused() -> None:
    empty = summary(GOOD, sources=[source(), source(path="more.jsonl", rows=0)])
    with pytest.raises(DataError) as err:
        check_usable(empty, spec_of())
    assert str(err.value) == (
        "data.sources[1].path: more.jsonl has no rows (an empty file, or blank lines only); "
        "give it rows or remove the source"
    )
    first = {"at": "r.csv:2", "reason": "missing field(s): text"}
    lost = source(
        type="csv",
        path="r.csv",
        quarantined=5,
        reasons={"missing_field": 4, "malformed_row": 1},
        first={"missing_field": first},
    )
    with pytest.raises(DataError) as err:
        check_usable(summary({}, sources=[lost]), spec_of())  # the empty splits are not listed
    assert str(err.value) == (
        "data.sources[0].path: r.csv: every row was quarantined (5 of 5), most as missing_field "
        "(4), e.g. r.csv:2: missing field(s): text; also malformed_row 1. does data.fields name "
        "the header's columns? A file without a header row has its first row read as one (as "
        "does one that is not comma-separated)"
    )


def test_several_problems_are_all_listed() -> None:
    with pytest.raises(DataError) as err:
        check_usable(summary({"train": {"a": 3}}), spec_of())
    lines = str(err.value).split("\n")
    assert [line.split(" (")[0] for line in lines] == [
        "the validation split is empty",
        "also: the test split is empty",
    ]


def test_a_manifest_from_before_the_source_counts_skips_only_those_checks() -> None:
    old = summary(GOOD, sources=[{"type": "jsonl", "path": "rows.jsonl", "sha256": "0" * 64}])
    assert check_usable(old, spec_of()) == []
    with pytest.raises(DataError, match="validation split is empty"):
        check_usable({**old, **summary({**GOOD, "validation": {}})}, spec_of())


def write_rows(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def note_rows(labels: str, n: int = 12) -> list[dict]:
    return [
        {"text": f"note {i} about item {i * 7}", "label": labels[i % len(labels)]} for i in range(n)
    ]


def test_a_single_class_lab_is_refused_at_data_and_nothing_is_written(tmp_path: Path) -> None:
    write_rows(tmp_path / "rows.jsonl", note_rows("a"))
    with pytest.raises(DataError, match=r"only 1 label\(s\) remain in the train split"):
        build_data(spec_of(), tmp_path, Store(tmp_path))
    assert not (tmp_path / ".tunelab").exists()


def test_an_empty_validation_split_is_refused_at_data(tmp_path: Path) -> None:
    write_rows(tmp_path / "t.jsonl", note_rows("ab"))
    write_rows(tmp_path / "x.jsonl", note_rows("ab", 2))
    sources = [
        {"type": "jsonl", "path": "t.jsonl", "split": "train"},
        {"type": "jsonl", "path": "x.jsonl", "split": "test"},
    ]
    with pytest.raises(DataError, match=r"^the validation split is empty \(rows read 14 = kept "):
        build_data(spec_of(sources), tmp_path, Store(tmp_path))
    assert not (tmp_path / ".tunelab").exists()


def test_a_wholly_quarantined_source_among_good_ones_is_named(tmp_path: Path) -> None:
    write_rows(tmp_path / "rows.jsonl", note_rows("ab"))
    (tmp_path / "more.csv").write_text("first note,a\nsecond note,b\n")  # no header
    sources = [{"type": "jsonl", "path": "rows.jsonl"}, {"type": "csv", "path": "more.csv"}]
    with pytest.raises(
        DataError,
        match=r"^data\.sources\[1\]\.path: more\.csv: every row was "
        r"quarantined \(1 of 1\).*more\.csv:2.*without a header row",
    ):
        build_data(spec_of(sources), tmp_path, Store(tmp_path))


def test_the_manifest_accounts_for_each_source(tmp_path: Path) -> None:
    write_rows(tmp_path / "rows.jsonl", note_rows("ab"))
    more = [{"text": f"another {w} note", "label": "ab"[i % 2]} for i, w in enumerate("wxyz")]
    more += [{"text": 1, "label": "a"}, {"label": "b"}, {"text": "note 3 about item 21"}]
    write_rows(tmp_path / "more.jsonl", [*more, {"text": "NOTE 5 about item 35", "label": "a"}])
    sources = [{"type": "jsonl", "path": "rows.jsonl"}, {"type": "jsonl", "path": "more.jsonl"}]
    report = build_data(spec_of(sources), tmp_path, Store(tmp_path))
    entries = Store(tmp_path).data_manifest(report["version"])["sources"]
    # more.jsonl:8 gives rows.jsonl:6's text another label: both copies are quarantined
    assert [(e["name"], e["rows"], e["quarantined"], e["reasons"]) for e in entries] == [
        ("rows", 12, 1, {"label_conflict": 1}),
        ("more", 8, 4, {"bad_text_type": 1, "label_conflict": 1, "missing_field": 2}),
    ]
    assert entries[1]["first"]["bad_text_type"] == {
        "at": "more.jsonl:5",
        "reason": "text must be a string, got int",
    }
    assert sum(e["rows"] for e in entries) == report["rows_read"] == 20
    assert sum(e["quarantined"] for e in entries) == report["quarantined"] == 5
    assert report["kept"] + report["quarantined"] + report["duplicates_removed"] == 20


@pytest.fixture
def built(tmp_path: Path) -> tuple[Store, str]:
    rows = [*note_rows("ab", 20), {"text": "the one note about c", "label": "c"}]
    write_rows(tmp_path / "rows.jsonl", rows)
    report = build_data(spec_of(), tmp_path, Store(tmp_path))
    return Store(tmp_path), report["version"]


def test_require_usable_rechecks_a_stored_version_from_its_manifest(built) -> None:
    store, version = built
    for split in ("train", "validation", "test"):
        (store.data_dir(version) / f"{split}.jsonl").unlink()  # the manifest alone is read
    warnings = require_usable(store, version, spec_of())
    assert any("['c'] have train examples but none in the validation" in w for w in warnings)
    with pytest.raises(DataError) as err:
        require_usable(store, version, spec_of(missing_label="error"))
    message = str(err.value)
    assert message.startswith(f"data version {version} cannot be used: label(s) ['c'] have")
    assert message.endswith("fix the data or the spec, then run `tunelab data` again")


def test_require_usable_refuses_a_version_with_an_empty_split(built, monkeypatch) -> None:
    store, version = built
    manifest = store.data_manifest(version)
    manifest["counts"]["validation"] = {"n": 0, "labels": dict.fromkeys(manifest["labels"], 0)}
    # as read (a file edited so would be refused as not the one the log vouches for)
    monkeypatch.setattr(store, "data_manifest", lambda v: manifest)
    with pytest.raises(
        DataError,
        match=rf"^data version {version} cannot be used: the "
        "validation split is empty",
    ):
        require_usable(store, version, spec_of())


def test_the_check_before_a_model_loads_imports_nothing_heavy() -> None:
    code = (
        "import sys, tunelab.data.usable, tunelab.data.loaders; "
        "print(sorted(m for m in ('torch', 'transformers', 'datasketch', 'scipy', 'pyarrow', "
        "'datasets') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_every_warning_of_a_build_is_printed_in_the_human_output(tmp_path: Path, capsys) -> None:
    from tunelab.views.data import data as data_view
    from tunelab.views.style import console

    rows = [*note_rows("aab", 30), {"text": "the one note about c", "label": "c"}]
    rows.append({"text": "long " * 30, "label": "a"})
    write_rows(tmp_path / "rows.jsonl", rows)
    task = {"type": "classification", "labels": ["a", "b", "c", "d"]}
    report = build_data(spec_of(task=task, max_chars=100), tmp_path, Store(tmp_path))
    assert len(report["warnings"]) >= 4  # missing from validation and test, long, unseen
    data_view(report, console())
    shown = " ".join(capsys.readouterr().out.split())
    for warning in report["warnings"]:
        assert f"warning {' '.join(warning.split())}" in shown


@pytest.mark.parametrize("categories", ["none", "some"])
def test_the_split_table_has_a_column_per_category_and_none_without_categories(
    tmp_path: Path, capsys, categories: str
) -> None:
    """A generative lab's rows may carry no category: its split table counts rows, with no
    empty-titled column of every row at 100%; rows without one beside rows with one are
    '(none)'."""
    from tunelab.views.data import data as data_view
    from tunelab.views.style import console

    rows = [{"text": f"question {i}?", "target": f"x{'x' * (i % 3)}"} for i in range(40)]
    if categories == "some":
        rows = [{**r, "label": "short"} if i % 2 else r for i, r in enumerate(rows)]
    write_rows(tmp_path / "rows.jsonl", rows)
    report = build_data(
        spec_of(task=GENERATIVE, fields={"text": "text", "target": "target", "label": "label"}),
        tmp_path,
        Store(tmp_path),
    )
    data_view(report, console())
    out = capsys.readouterr().out
    header = next(line.split() for line in out.splitlines() if "split" in line)
    if categories == "none":
        assert "(100%)" not in out  # no column counting every row
    assert header == (
        ["split", "rows"] if categories == "none" else ["split", "rows", "(none)", "short"]
    )


def test_the_split_table_of_many_labels_summarises_them(tmp_path: Path, capsys) -> None:
    """With 77 labels the table's columns were squeezed to nothing: four blank lines where the
    splits were. Past WIDE labels each split says how many labels it holds and their spread,
    then the rarest in train."""
    from tunelab.views.data import WIDE
    from tunelab.views.data import data as data_view
    from tunelab.views.style import console

    labels = [f"intent_{i:02d}" for i in range(WIDE + 12)]
    rows = [
        {"text": f"note {i} on {label}", "label": label}
        for label in labels
        for i in range(3 if label == "intent_07" else 8)
    ]
    write_rows(tmp_path / "rows.jsonl", rows)
    report = build_data(spec_of(), tmp_path, Store(tmp_path))
    data_view(report, console())
    out = capsys.readouterr().out
    lines = {line.split()[0]: line.split() for line in out.splitlines() if line.strip()}
    assert lines["split"] == ["split", "rows", "labels", "rows", "per", "label"]
    assert lines["train"][2:5] == [f"{len(labels)}", "of", f"{len(labels)}"]
    assert "rarest in train: intent_07 " in " ".join(out.split())
    assert f".tunelab/data/{report['version']}/report.json" in out
