"""The data step tells the truth: label conflicts, strict CSV, overlong texts, versions that
cover their sources, warnings and class balance in the report."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_pipeline import JSONL, animal_rows, build, make_spec, write_rows

from tunelab.core.store import read_jsonl
from tunelab.data.raw import DataError
from tunelab.views.data import data as data_view
from tunelab.views.style import console


def test_same_text_with_different_labels_is_a_conflict_and_every_copy_is_quarantined(tmp_path):
    rows = animal_rows()
    rows.insert(0, {"text": "A note about CAT number 3", "label": "dog"})  # mislabelled copy
    write_rows(tmp_path / "data" / "rows.jsonl", rows)
    report = build(tmp_path, make_spec(JSONL))
    conflicts = report["conflicts"]
    assert (conflicts["groups"], conflicts["rows"]) == (1, 2)
    assert conflicts["examples"][0]["answers"] == ["cat", "dog"]
    assert report["quarantine"]["reasons"] == {"label_conflict": 2}
    assert report["duplicates"]["pairs"] == []  # a conflict is not a duplicate
    quarantined = read_jsonl(tmp_path / report["quarantine"]["file"])
    assert {q["line"] for q in quarantined} == {1, 5}
    assert all("different answers ['cat', 'dog']" in q["reason"] for q in quarantined)
    kept = {r["text"] for s in ("train", "validation") for r in _rows(tmp_path, report, s)}
    assert "a note about cat number 3" not in kept  # neither copy survives


def test_conflicts_can_be_kept_and_reported(tmp_path):
    rows = [*animal_rows(), {"text": "a note about cat number 3", "label": "dog"}]
    write_rows(tmp_path / "data" / "rows.jsonl", rows)
    report = build(tmp_path, make_spec(JSONL, dedup={"conflicts": "report"}))
    assert report["conflicts"]["groups"] == 1 and report["quarantined"] == 0
    assert any("different labels in different copies" in w for w in report["warnings"])


def test_a_csv_quote_that_is_not_doubled_is_quarantined_with_its_line(tmp_path):
    path = tmp_path / "data" / "rows.csv"
    path.parent.mkdir(parents=True)
    body = "".join(f'"a note about cat {i}",cat\n' for i in range(20))
    body += '"she said "hello" and left",dog\n'  # should be ""hello""
    body += "".join(f'"a note about dog {i}",dog\n' for i in range(20))
    path.write_text("text,label\n" + body)
    report = build(tmp_path, make_spec([{"type": "csv", "path": "data/rows.csv"}]))
    assert report["quarantine"]["reasons"] == {"malformed_row": 1}
    (bad,) = read_jsonl(tmp_path / report["quarantine"]["file"])
    assert bad["line"] == 22 and "not valid CSV" in bad["reason"]
    assert report["rows_read"] == 41 and report["kept"] == 40


def write_csv(tmp_path: Path, bad: str) -> dict:
    """20 cat notes, `bad` from line 22, then 20 dog notes."""
    path = tmp_path / "data" / "rows.csv"
    path.parent.mkdir(parents=True)
    body = "".join(f"a note about cat {i},cat\n" for i in range(20)) + bad
    body += "".join(f"a note about dog {i},dog\n" for i in range(20))
    path.write_text("text,label\n" + body)
    return make_spec([{"type": "csv", "path": "data/rows.csv"}])


def test_a_quote_never_closed_refuses_the_file_where_it_swallowed_the_rest(tmp_path):
    """It read as one quarantined row, and the 20 rows after it were in no split, no
    quarantine and no count."""
    spec = write_csv(tmp_path, '"she left without a word,dog\n')
    with pytest.raises(DataError, match=r"rows.csv:22: a quote opened on this line is never "):
        build(tmp_path, spec)


def test_a_quoted_field_that_ran_over_lines_names_every_line_it_took(tmp_path):
    spec = write_csv(tmp_path, '"she left,dog\nthen came back,dog\n"and "sat" down",dog\n')
    report = build(tmp_path, spec)
    (bad,) = read_jsonl(tmp_path / report["quarantine"]["file"])
    assert bad["line"] == 22 and "ran from line 22 to 24, so these 3 lines" in bad["reason"]
    assert report["kept"] == 40  # the rows after it are read again


@pytest.mark.parametrize(
    "bad",
    [
        '"starts fine\nsecond line has a "bad" quote\nthird line",dog\n',  # breaks on line 23
        '"one line with "bad" quote then\nnext line\nlast",dog\n',  # breaks on its first line
    ],
)
def test_no_line_of_a_broken_quoted_record_is_kept_as_a_row(tmp_path, bad):
    """The parser stops inside the open field; the lines after it up to the one that closes
    it were read as rows of their own, and the last (`third line",dog`) was kept."""
    report = build(tmp_path, write_csv(tmp_path, bad))
    (quarantined,) = read_jsonl(tmp_path / report["quarantine"]["file"])
    assert quarantined["line"] == 22 and "from line 22 to 24" in quarantined["reason"]
    assert report["rows_read"] == 41 and report["kept"] == 40


def test_a_broken_record_that_no_line_closes_is_its_own_line_alone(tmp_path):
    report = build(tmp_path, write_csv(tmp_path, '"she said "hi" and left,dog\n'))
    (quarantined,) = read_jsonl(tmp_path / report["quarantine"]["file"])
    assert quarantined["line"] == 22 and "ran from" not in quarantined["reason"]
    assert report["kept"] == 40  # the rows after it are read as they were


def test_a_very_long_text_is_warned_with_its_line_or_quarantined(tmp_path):
    rows = animal_rows()
    rows[6] = {"text": "cat " * 30_000, "label": "cat"}  # 120,000 characters on line 7
    write_rows(tmp_path / "data" / "rows.jsonl", rows)
    report = build(tmp_path, make_spec(JSONL))
    (warning,) = [w for w in report["warnings"] if "max_chars" in w]
    assert "data/rows.jsonl:7 (120,000)" in warning and report["quarantined"] == 0
    strict = build(tmp_path, make_spec(JSONL, long_text="quarantine"))
    assert strict["quarantine"]["reasons"] == {"too_long": 1}
    assert strict["version"] != report["version"]


def test_a_changed_source_with_the_same_kept_rows_is_a_new_truthful_version(tmp_path):
    rows = animal_rows()
    write_rows(tmp_path / "data" / "rows.jsonl", rows)
    first = build(tmp_path, make_spec(JSONL))
    # the same rows plus an unreadable line: the kept rows do not change, the source does
    write_rows(tmp_path / "data" / "rows.jsonl", rows, b"{not json\n")
    second = build(tmp_path, make_spec(JSONL))
    assert second["new"] and second["version"] != first["version"]
    assert second["rows_id"] == first["rows_id"] and second["same_rows_as"] == [first["version"]]
    assert second["quarantined"] == 1 and first["quarantined"] == 0  # its own report


def test_data_prints_its_warnings_and_the_class_balance(tmp_path, capsys):
    write_rows(tmp_path / "data" / "rows.jsonl", animal_rows(n_cat=60, n_dog=4))
    report = build(tmp_path, make_spec(JSONL))
    assert any(w.startswith("class imbalance in train: cat has") for w in report["warnings"])
    data_view(report, console())
    out = capsys.readouterr().out
    assert "warning" in out and "class imbalance" in out and "%)" in out


def _rows(lab: Path, report: dict, split: str) -> list[dict]:
    return read_jsonl(lab / ".tunelab" / "data" / report["version"] / f"{split}.jsonl")


def test_the_cost_line_says_how_many_signature_workers_each_peak_is_for(tmp_path):
    """`+ 0.23 GiB in each signature worker` did not say how many ran."""
    write_rows(tmp_path / "data" / "rows.jsonl", animal_rows())
    report = build(tmp_path, make_spec(JSONL))
    report["cost"] = {"seconds": 2.0, "peak_memory_gib": 0.32, "worker_peak_memory_gib": 0.23}
    report["cost"]["signature_workers"] = 2
    out = console()
    with out.capture() as seen:
        data_view(report, out)
    assert "peak memory 0.32 GiB (+ 0.23 GiB in each of 2 signature workers)" in seen.get()
    # under datatrove tunelab's workers hash contents alone, and datatrove's are not seen
    report["duplicates"]["engine"] = "datatrove"
    with out.capture() as seen:
        data_view(report, out)
    said = " ".join(seen.get().split())
    assert "(+ 0.23 GiB in each of 2 content-hashing workers; datatrove's own not counted)" in said


def test_a_near_pairs_similarity_is_called_an_estimate(tmp_path):
    """A near pair at "similarity 1.0" left a reader asking why it was not exact: MinHash
    estimates it."""
    words = " ".join(f"w{i}" for i in range(40))
    rows = [*animal_rows(), {"text": words, "label": "cat"}]
    rows.append({"text": words.replace("w20", "w20,"), "label": "cat"})  # other words, alike
    write_rows(tmp_path / "data" / "rows.jsonl", rows)
    report = build(tmp_path, make_spec(JSONL))
    out = console()
    with out.capture() as seen:
        data_view(report, out)
    assert "estimated similarity" in seen.get()
