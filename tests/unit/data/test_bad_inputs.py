"""A corpus of broken rows, each with its verdict, through `build_data` itself (whole files:
test_bad_files.py).

Each case writes one source into a tiny lab: six good rows (two labels, so the data is
otherwise usable) and one bad row at a known line, or a whole bad file. The verdict is one of
- accepted: every row kept (and the case's own check on the kept rows),
- quarantined: exactly one quarantine entry, at that file:line, of that kind,
- refused: a `DataError` whose message names the file or spec field, and no version written.
Every built version must account for every row: rows read = kept + quarantined + removed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tunelab.core.spec import validate_spec
from tunelab.core.store import SPLITS, Store, read_jsonl
from tunelab.data import DataError, build_data

WORDS = ["apple", "river", "candle", "mountain", "violin", "harbour"]


def good_jsonl(**extra: Any) -> list[bytes]:
    return [
        json.dumps({"text": f"row {i} about the {w}", "label": "ab"[i % 2], **extra}).encode()
        for i, w in enumerate(WORDS)
    ]


def good_csv() -> list[bytes]:
    return [b"text,label"] + [
        f"row {i} about the {w},{'ab'[i % 2]}".encode() for i, w in enumerate(WORDS)
    ]


def jsonl(bad: bytes | None = None, *, end: bytes = b"\n") -> Callable[[Path], dict]:
    """Six good lines, then `bad` at line 7."""
    lines = good_jsonl() + ([bad] if bad is not None else [])
    return write("rows.jsonl", b"\n".join(lines) + end, "jsonl")


def csv(bad: bytes | None = None, *, end: bytes = b"\n") -> Callable[[Path], dict]:
    """The header at line 1, six good rows at lines 2-7, then `bad` at line 8."""
    lines = good_csv() + ([bad] if bad is not None else [])
    return write("rows.csv", b"\n".join(lines) + end, "csv")


def write(name: str, content: bytes, source_type: str) -> Callable[[Path], dict]:
    def make(lab: Path) -> dict:
        (lab / name).write_bytes(content)
        return {"type": source_type, "path": name}

    return make


def made(fn: Callable[[Path], None], name: str, source_type: str) -> Callable[[Path], dict]:
    def make(lab: Path) -> dict:
        fn(lab / name)
        return {"type": source_type, "path": name}

    return make


@dataclass(frozen=True)
class Case:
    id: str
    make: Callable[[Path], dict]
    verdict: str
    kind: str | None = None
    line: int | None = None
    match: str | None = None
    check: Callable[[list[dict], dict], None] | None = None
    data: dict = field(default_factory=dict)
    task: dict | None = None


def texts_have_no(char: str) -> Callable[[list[dict], dict], None]:
    def check(rows: list[dict], report: dict) -> None:
        assert len(rows) == 6 and not any(char in r["text"] for r in rows)

    return check


def kept_text(expected: str) -> Callable[[list[dict], dict], None]:
    def check(rows: list[dict], report: dict) -> None:
        assert expected in [r["text"] for r in rows]

    return check


def huge_warned(rows: list[dict], report: dict) -> None:
    assert any(len(r["text"]) == 200_000 for r in rows)
    assert any("rows.jsonl:7 (200,000)" in w for w in report["warnings"])


JSONL_CASES = [
    Case("jsonl-missing-field", jsonl(b'{"label": "a"}'), "quarantined", "missing_field", 7),
    Case("jsonl-int-text", jsonl(b'{"text": 12, "label": "a"}'), "quarantined", "bad_text_type", 7),
    Case(
        "jsonl-list-label",
        jsonl(b'{"text": "x y", "label": ["a"]}'),
        "quarantined",
        "bad_label_type",
        7,
    ),
    Case(
        "jsonl-float-label",
        jsonl(b'{"text": "x y", "label": 1.5}'),
        "quarantined",
        "bad_label_type",
        7,
    ),
    Case(
        "jsonl-bool-label",
        jsonl(b'{"text": "x y", "label": true}'),
        "quarantined",
        "bad_label_type",
        7,
    ),
    Case("jsonl-null-text", jsonl(b'{"text": null, "label": "a"}'), "quarantined", "null_field", 7),
    Case("jsonl-empty-text", jsonl(b'{"text": "", "label": "a"}'), "quarantined", "empty_text", 7),
    Case(
        "jsonl-whitespace-text",
        jsonl(b'{"text": " \\t\\n ", "label": "a"}'),
        "quarantined",
        "empty_text",
        7,
    ),
    Case(
        "jsonl-empty-label",
        jsonl(b'{"text": "x y", "label": " "}'),
        "quarantined",
        "empty_label",
        7,
    ),
    Case(
        "jsonl-truncated-last-line",
        jsonl(b'{"text": "cut sho', end=b""),
        "quarantined",
        "broken_json",
        7,
    ),
    Case(
        "jsonl-python-dict-quotes",
        jsonl(b"{'text': 'x y', 'label': 'a'}"),
        "quarantined",
        "broken_json",
        7,
    ),
    Case(
        "jsonl-invalid-utf8",
        jsonl(b'{"text": "caf\xe9 au lait", "label": "a"}'),
        "quarantined",
        "bad_encoding",
        7,
    ),
    Case(
        "jsonl-lone-surrogate-escape",
        jsonl(b'{"text": "bad \\ud800 char", "label": "a"}'),
        "quarantined",
        "bad_encoding",
        7,
    ),
    Case(
        "jsonl-raw-nul-byte",
        jsonl(b'{"text": "nul \x00 here", "label": "a"}'),
        "quarantined",
        "broken_json",
        7,
    ),
    Case(
        "jsonl-repeated-key",
        jsonl(b'{"text": "one", "text": "two", "label": "a"}'),
        "quarantined",
        "duplicate_key",
        7,
    ),
    Case("jsonl-not-an-object", jsonl(b'["x y", "a"]'), "quarantined", "not_an_object", 7),
    Case(
        "jsonl-unknown-label",
        jsonl(b'{"text": "x y", "label": "zebra"}'),
        "quarantined",
        "unknown_label",
        7,
        task={"type": "classification", "labels": ["a", "b"]},
    ),
    Case(
        "jsonl-bom",
        write("rows.jsonl", b"\xef\xbb\xbf" + b"\n".join(good_jsonl()) + b"\n", "jsonl"),
        "accepted",
        check=texts_have_no("\ufeff"),
    ),
    Case(
        "jsonl-crlf",
        write("rows.jsonl", b"\r\n".join(good_jsonl()) + b"\r\n", "jsonl"),
        "accepted",
        check=texts_have_no("\r"),
    ),
    Case(
        "jsonl-extra-fields",
        write("rows.jsonl", b"\n".join(good_jsonl(extra=1, n=[1])), "jsonl"),
        "accepted",
    ),
    Case(
        "jsonl-blank-lines",
        write("rows.jsonl", b"\n\n  \n".join(good_jsonl()), "jsonl"),
        "accepted",
    ),
    Case(
        "jsonl-unicode",
        jsonl('{"text": "東京 🚀 café", "label": "a"}'.encode()),
        "accepted",
        check=kept_text("東京 🚀 café"),
    ),
    Case(
        "jsonl-huge-line",
        jsonl(json.dumps({"text": "w" * 200_000, "label": "a"}).encode()),
        "accepted",
        check=huge_warned,
    ),
    Case(
        "jsonl-huge-line-quarantined",
        jsonl(json.dumps({"text": "w" * 200_000, "label": "a"}).encode()),
        "quarantined",
        "too_long",
        7,
        data={"long_text": "quarantine"},
    ),
]


def with_ids(lab: Path) -> dict:
    rows = [json.loads(line) | {"id": f"k{i}"} for i, line in enumerate(good_jsonl())]
    rows.append({"id": "k2", "text": "another text with the same id", "label": "a"})
    (lab / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return {"type": "jsonl", "path": "rows.jsonl"}


ID_CASES = [
    Case(
        "jsonl-duplicate-id-other-text",
        with_ids,
        "quarantined",
        "duplicate_id",
        7,
        data={"fields": {"id": "id"}},
    ),
]

CSV_CASES = [
    Case("csv-missing-cell", csv(b"only the text"), "quarantined", "missing_field", 8),
    Case("csv-extra-cell", csv(b"some text,a,surplus"), "quarantined", "malformed_row", 8),
    Case("csv-unquoted-comma", csv(b"hello, world,a"), "quarantined", "malformed_row", 8),
    Case("csv-undoubled-quote", csv(b'"he said "hi" twice",a'), "quarantined", "malformed_row", 8),
    Case("csv-unclosed-quote-at-eof", csv(b'"never closed,a'), "quarantined", "malformed_row", 8),
    Case("csv-invalid-utf8", csv(b"caf\xe9 au lait,a"), "quarantined", "bad_encoding", 8),
    Case("csv-empty-text-cell", csv(b",a"), "quarantined", "empty_text", 8),
    Case(
        "csv-quoted-newline",
        csv(b'"spans\ntwo lines",a'),
        "accepted",
        check=kept_text("spans\ntwo lines"),
    ),
    Case(
        "csv-doubled-quotes",
        csv(b'"he said ""hi""",a'),
        "accepted",
        check=kept_text('he said "hi"'),
    ),
    Case(
        "csv-quote-inside-unquoted-cell",
        csv(b'he said "hi",a'),
        "accepted",
        check=kept_text('he said "hi"'),
    ),
    Case(
        "csv-crlf",
        write("rows.csv", b"\r\n".join(good_csv()) + b"\r\n", "csv"),
        "accepted",
        check=texts_have_no("\r"),
    ),
    Case(
        "csv-bom",
        write("rows.csv", b"\xef\xbb\xbf" + b"\n".join(good_csv()), "csv"),
        "accepted",
        check=texts_have_no("\ufeff"),
    ),
]


CASES = JSONL_CASES + ID_CASES + CSV_CASES


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_row(case: Case, tmp_path: Path) -> None:
    through_build_data(case, tmp_path)


def through_build_data(case: Case, tmp_path: Path) -> None:
    """Build the case's one source and hold the version to its verdict."""
    lab = tmp_path / "lab"
    lab.mkdir()
    raw: dict = {"data": {"sources": [case.make(lab)], **case.data}, "model": {"path": "x"}}
    if case.task:
        raw["task"] = case.task
    spec = validate_spec(raw)
    store = Store(lab)
    if case.verdict == "refused":
        with pytest.raises(DataError, match=case.match):
            build_data(spec, lab, store)
        assert not list(lab.glob(".tunelab/data/*/manifest.json"))  # nothing was written
        return
    report = build_data(spec, lab, store)
    folder = store.data_dir(report["version"])
    kept = [row for split in SPLITS for row in read_jsonl(folder / f"{split}.jsonl")]
    quarantine = read_jsonl(folder / "quarantine.jsonl")
    assert report["rows_read"] == (
        report["kept"] + report["quarantined"] + report["duplicates_removed"]
    )
    assert report["duplicates_removed"] == 0 and len(kept) == report["kept"]
    source = store.data_manifest(report["version"])["sources"][0]
    assert source["rows"] == report["rows_read"] and source["quarantined"] == len(quarantine)
    if case.verdict == "accepted":
        assert quarantine == [] and report["kept"] == report["rows_read"] >= 6
    else:
        assert [(q["file"], q["line"], q["kind"]) for q in quarantine] == [
            (spec.data.sources[0].path, case.line, case.kind)
        ]
        assert report["kept"] == 6 and report["rows_read"] == 7
    if case.check:
        case.check(kept, report)
