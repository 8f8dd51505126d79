"""Label sets (task multilabel) through `tunelab data`: JSONL lists, CSV strings split on the
separator, the quarantine with file and line, conflicts and duplicates of sets, spellings, the
per-label counts and the split."""

from __future__ import annotations

import csv
import io
import json
import random

import pytest

from tunelab.core.spec import validate_spec
from tunelab.core.store import Store
from tunelab.data.label_sets import parse_label_set
from tunelab.data.pinned import example_of
from tunelab.data.pipeline import build_data
from tunelab.data.raw import DataError

TOPICS = {
    "business": "market shares profits bank interest rates economy forecasts grew",
    "sport": "team match goal fans striker scored club cup final won",
    "tech": "phone chip screen software update security browser network faster",
}
SETS = [["business"], ["sport"], ["tech"], ["business", "tech"], ["sport", "tech"], []]


def tagged_rows(n: int = 36) -> list[dict]:
    """Short texts whose words give away their topics (none: about the weather), distinct
    enough that none is a near duplicate of another."""
    rng = random.Random(0)
    rows = []
    for i in range(n):
        labels = SETS[i % len(SETS)]
        vocab = " ".join(TOPICS[t] for t in labels).split() or ["weather", "rain", "sun", "cloud"]
        text = " ".join(rng.choice(vocab) for _ in range(8)) + f" story {i}"
        rows.append({"text": text, "labels": labels})
    return rows


def make_spec(tmp_path, rows: list[dict] | str, task: dict | None = None, **data) -> object:
    if isinstance(rows, str):
        (tmp_path / "rows.csv").write_text(rows)
        source = {"type": "csv", "path": "rows.csv"}
    else:
        (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        source = {"type": "jsonl", "path": "rows.jsonl"}
    return validate_spec(
        {
            "task": {"type": "multilabel", **(task or {})},
            "data": {
                "sources": [source],
                "fields": {"label": "labels"},
                "split": {"train": 0.6, "validation": 0.2, "test": 0.2, "seed": 0},
                **data,
            },
            "model": {"path": "x"},
        }
    )


def quarantine(tmp_path, report: dict) -> list[dict]:
    text = (tmp_path / report["quarantine"]["file"]).read_text()
    return [json.loads(line) for line in text.splitlines()]


@pytest.mark.parametrize(
    ("value", "separator", "expected"),
    [
        (["tech", "sport"], None, ["sport", "tech"]),
        ([], None, []),
        ("sport|tech", "|", ["sport", "tech"]),
        (" sport | tech ", "|", ["sport", "tech"]),
        ("", "|", []),
        ('["tech", "sport"]', None, ["sport", "tech"]),  # a CSV cell holding a JSON list
        ("[]", "|", []),
        ("sport", None, ("bad_label_set", "set task.separator")),
        ("['sport']", None, ("bad_label_set", "not a JSON list")),
        ("sport||tech", "|", ("empty_label", "between separators")),
        (["sport", 3], None, ("label_type", 'write it as "3"')),
        (["sport", ""], None, ("empty_label", "empty label in the list")),
        (["sport", "sport"], None, ("bad_label_set", "listed twice")),
        ({"sport": 1}, None, ("bad_label_type", "got dict")),
        (["sport", None], None, ("bad_label_type", "got NoneType")),
        ("1", None, ("one_hot_label", "one of several 0/1 columns (one-hot)?")),  # a CSV cell
        (0, None, ("one_hot_label", "build that column from the 0/1 ones")),  # a Parquet one
    ],
)
def test_a_label_field_becomes_a_sorted_set_or_a_named_reason(value, separator, expected) -> None:
    got = parse_label_set(value, separator)
    if isinstance(expected, tuple):
        assert got[0] == expected[0] and expected[1] in got[1]
    else:
        assert got == expected


def test_a_label_outside_task_labels_is_unknown() -> None:
    kind, reason = parse_label_set(["sport", "politics"], None, ["sport", "tech"])
    assert kind == "unknown_label" and "'politics'" in reason


def test_jsonl_lists_make_a_version_with_per_label_counts(tmp_path) -> None:
    rows = tagged_rows()
    rows[4]["labels"] = ["sport", "politics"]  # line 5: not among task.labels
    rows[7]["labels"] = "sport"  # line 8: a string, and no separator
    spec = make_spec(tmp_path, rows, {"labels": ["business", "sport", "tech"]})
    report = build_data(spec, tmp_path, Store(tmp_path))
    assert report["rows_read"] == 36 and report["kept"] == 34 and report["quarantined"] == 2
    bad = {q["line"]: q for q in quarantine(tmp_path, report)}
    assert bad[5]["kind"] == "unknown_label" and "'politics'" in bad[5]["reason"]
    assert bad[8]["kind"] == "bad_label_set" and "task.separator" in bad[8]["reason"]
    assert report["labels"] == ["business", "sport", "tech"]
    for split, counts in report["splits"].items():
        assert counts["no_label"] == report["label_sets"][split]["no_label"]
        assert sum(counts["labels"].values()) >= counts["n"] - counts["no_label"]
    train = Store(tmp_path).read_split(report["version"], "train")
    assert all(r["labels"] == sorted(r["labels"]) for r in train)
    assert all(r["label"] == json.dumps(r["labels"]) for r in train)
    row = next(r for r in train if len(r["labels"]) == 2)
    assert example_of(row).label_set == row["labels"]  # as a pinned version reads it back


def test_every_label_reaches_validation_and_test(tmp_path) -> None:
    report = build_data(make_spec(tmp_path, tagged_rows(60)), tmp_path, Store(tmp_path))
    for split in ("validation", "test"):
        assert all(report["splits"][split]["labels"].values()), report["splits"][split]
        assert report["splits"][split]["no_label"] > 0


def csv_text(rows: list[list[str]]) -> str:
    out = io.StringIO()
    csv.writer(out).writerows([["text", "labels"], *rows])
    return out.getvalue()


def test_a_csv_column_is_split_on_the_separator(tmp_path) -> None:
    rows = [
        [r["text"], "|".join(r["labels"])] for r in tagged_rows(30)
    ]  # the empty set: an empty cell
    rows[3][1] = '["business", "tech"]'  # a JSON list in a cell is read as one
    rows[5][1] = "tech||sport"  # CSV line 7 (the header is line 1)
    spec = make_spec(tmp_path, csv_text(rows), {"separator": "|"})
    report = build_data(spec, tmp_path, Store(tmp_path))
    (bad,) = quarantine(tmp_path, report)
    assert (bad["kind"], bad["line"]) == ("empty_label", 7)
    assert report["labels"] == ["business", "sport", "tech"] and report["kept"] == 29
    # five empty cells, one of them replaced by the slip on line 7
    assert sum(s["no_label"] for s in report["label_sets"].values()) == 4


def test_without_a_separator_every_string_row_is_refused_with_the_fix(tmp_path) -> None:
    rows = [[r["text"], "|".join(r["labels"]) or "none"] for r in tagged_rows(12)]
    with pytest.raises(DataError) as err:
        build_data(make_spec(tmp_path, csv_text(rows)), tmp_path, Store(tmp_path))
    assert "bad_label_set" in str(err.value) and "task.separator" in str(err.value)


def test_the_same_text_with_two_sets_is_a_conflict_and_one_set_twice_a_duplicate(tmp_path):
    rows = tagged_rows()
    rows.append({"text": rows[3]["text"], "labels": ["sport"]})  # rows[3] is business+tech
    rows.append({"text": rows[4]["text"], "labels": list(reversed(rows[4]["labels"]))})
    spec = make_spec(tmp_path, rows)
    report = build_data(spec, tmp_path, Store(tmp_path))
    assert report["conflicts"]["groups"] == 1 and report["conflicts"]["rows"] == 2
    (group,) = report["conflicts"]["examples"]
    assert group["answers"] == ['["business", "tech"]', '["sport"]']
    assert {q["kind"] for q in quarantine(tmp_path, report)} == {"label_conflict"}
    reasons = {q["reason"] for q in quarantine(tmp_path, report)}
    assert all('2 different answers ["business", "tech"], ["sport"] (' in r for r in reasons)
    assert report["kept"] + report["duplicates_removed"] == 36  # the same set in other order
    assert report["duplicates"]["counts"]


def test_labels_spelt_two_ways_inside_sets_are_refused_or_made_one(tmp_path) -> None:
    rows = tagged_rows()
    rows[0]["labels"] = ["caf\u00e9", "sport"]
    rows[6]["labels"] = ["cafe\u0301"]
    with pytest.raises(DataError, match="U\\+0065 U\\+0301"):
        build_data(make_spec(tmp_path, rows), tmp_path, Store(tmp_path))
    spec = make_spec(tmp_path, rows, cleaning=[{"rule": "unicode_nfkc"}])
    report = build_data(spec, tmp_path, Store(tmp_path))
    assert report["labels"] == ["business", "caf\u00e9", "sport", "tech"]


def test_a_label_on_every_train_row_is_warned_about(tmp_path) -> None:
    rows = tagged_rows()
    for r in rows:
        r["labels"] = sorted({*r["labels"], "news"})
    report = build_data(make_spec(tmp_path, rows), tmp_path, Store(tmp_path))
    assert any("['news'] are on every train row" in w for w in report["warnings"])


def test_a_listed_label_no_row_has_is_warned_about_as_for_one_label_a_row(tmp_path) -> None:
    """`weather` listed and on no row: its F1 counted 0 in every macro score, unsaid."""
    task = {"labels": ["business", "sport", "tech", "weather"]}
    report = build_data(make_spec(tmp_path, tagged_rows(), task), tmp_path, Store(tmp_path))
    (said,) = [w for w in report["warnings"] if "['weather']" in w]  # once, not twice
    assert said.startswith("label(s) ['weather'] (task.labels) have no row in any split")


@pytest.mark.parametrize("labels", [[], ["tech"]])
def test_fewer_than_two_listed_labels_are_refused_at_the_field(tmp_path, labels) -> None:
    from tunelab.core.spec import SpecError

    with pytest.raises(SpecError, match=r"task\.labels.*a multilabel head needs two or more"):
        make_spec(tmp_path, tagged_rows(), {"labels": labels})
