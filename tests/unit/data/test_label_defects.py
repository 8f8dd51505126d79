"""Two label slips found from outside: a label spelt two ways that print alike (café composed
and decomposed), and a number among string labels; each is refused or quarantined, named."""

from __future__ import annotations

import json

import pytest

from tunelab.core.spec import validate_spec
from tunelab.core.store import Store
from tunelab.data.loaders import load_sources
from tunelab.data.pipeline import build_data
from tunelab.data.raw import DataError

COMPOSED, DECOMPOSED = "caf\u00e9", "cafe\u0301"


def lab_with(tmp_path, rows: list[dict], cleaning: list[dict] | None = None):
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    spec = validate_spec(
        {
            "data": {
                "sources": [{"type": "jsonl", "path": "rows.jsonl"}],
                "cleaning": cleaning or [],
                "split": {"train": 0.5, "validation": 0.25, "test": 0.25, "seed": 0},
            },
            "model": {"path": "x"},
        }
    )
    return spec


def rows(labels: list) -> list[dict]:
    return [{"text": f"row number {i} says {i * 7}", "label": lab} for i, lab in enumerate(labels)]


def test_labels_spelt_two_ways_are_refused_naming_both_spellings(tmp_path) -> None:
    spec = lab_with(tmp_path, rows([COMPOSED, DECOMPOSED, "tea"] * 4))
    with pytest.raises(DataError) as err:
        build_data(spec, tmp_path, Store(tmp_path))
    words = str(err.value)
    assert "U+00E9" in words and "U+0065 U+0301" in words
    assert "rows.jsonl:1" in words and "rows.jsonl:2" in words
    assert "unicode_nfkc" in words


def test_the_texts_unicode_rule_makes_them_one_label(tmp_path) -> None:
    spec = lab_with(tmp_path, rows([COMPOSED, DECOMPOSED, "tea"] * 4), [{"rule": "unicode_nfkc"}])
    built = build_data(spec, tmp_path, Store(tmp_path))
    assert built["labels"] == ["caf\u00e9", "tea"]


def test_a_number_among_string_labels_is_quarantined_with_its_line(tmp_path) -> None:
    spec = lab_with(tmp_path, rows(["sport", "tech", 3, "sport", "tech", "sport"]))
    loaded = load_sources(spec.data, None, tmp_path)
    assert sorted({ex.label for ex in loaded.examples}) == ["sport", "tech"]
    (bad,) = loaded.rejections
    assert (bad.kind, bad.line) == ("label_type", 3)
    assert 'write it as the string "3"' in bad.reason


def test_labels_that_are_all_numbers_stay(tmp_path) -> None:
    spec = lab_with(tmp_path, rows([1, 2, 3, 1, 2, 3]))
    loaded = load_sources(spec.data, None, tmp_path)
    assert not loaded.rejections and {ex.label for ex in loaded.examples} == {"1", "2", "3"}


def test_a_word_or_a_quoted_number_among_number_labels_leaves_the_numbers_be(tmp_path) -> None:
    """Labels 0 and 1 with one `"1"` among them: every number was quarantined as a slip (297
    of 300 rows), and the data step refused for empty splits. The numbers are the labels."""
    spec = lab_with(tmp_path, rows([0, 1, "1", 0, 1, 0, "sport"]))
    loaded = load_sources(spec.data, None, tmp_path)
    assert not loaded.rejections
    assert sorted(ex.label for ex in loaded.examples) == ["0", "0", "0", "1", "1", "1", "sport"]


def test_ids_of_a_source_outside_the_lab_do_not_depend_on_where_it_lies(tmp_path) -> None:
    """The same folder installed in two places gives the same ids: its name, not its path."""
    ids = []
    for place in ("venv-a/site-packages/corpus", "venv-b/lib/corpus"):
        folder = tmp_path / place
        for label in ("sport", "tech"):
            (folder / label).mkdir(parents=True)
            for i in range(3):
                (folder / label / f"{i}.txt").write_text(f"{label} story {i}")
        lab = tmp_path / f"lab-{len(ids)}"
        lab.mkdir()
        spec = validate_spec(
            {
                "data": {
                    "sources": [{"type": "folder", "path": str(folder), "name": "news"}],
                    "allow_outside_lab": True,
                },
                "model": {"path": "x"},
            }
        )
        loaded = load_sources(spec.data, None, lab)
        ids.append(sorted(ex.id for ex in loaded.examples))
        assert loaded.sources[0]["resolved"] == str(folder.resolve())
    assert ids[0] == ids[1] and ids[0][0] == "news/sport/0.txt"


def test_two_sources_shown_alike_are_refused(tmp_path) -> None:
    """A folder `data.v1` in the lab, and another of that name outside it, given by an absolute
    path: distinct source names, one way of showing them."""
    lab = tmp_path / "lab"
    for where in (lab / "data.v1", tmp_path / "elsewhere" / "data.v1"):
        (where / "x").mkdir(parents=True)
        (where / "x" / "0.txt").write_text("some text")
    spec = validate_spec(
        {
            "data": {
                "sources": [
                    {"type": "folder", "path": "data.v1", "name": "mine"},
                    {"type": "folder", "path": str(tmp_path / "elsewhere" / "data.v1")},
                ],
                "allow_outside_lab": True,
            },
            "model": {"path": "x"},
        }
    )
    with pytest.raises(DataError, match=r"data.sources\[0\] and data.sources\[1\] are both"):
        load_sources(spec.data, None, lab)
