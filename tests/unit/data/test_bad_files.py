"""A corpus of broken whole files (empty, binary, UTF-16, a header only, a symlink loop, ...),
each with its verdict, through `build_data` itself, as test_bad_inputs.py holds its rows."""

from __future__ import annotations

import bz2
import gzip
import json
import os
from pathlib import Path

import pytest
from test_bad_inputs import CASES, WORDS, Case, good_csv, kept_text, made, through_build_data, write

BINARY = bytes(range(256)) * 40 + b"\x89PNG\r\n\x1a\n\x00\x00" * 50
UTF16 = "\n".join(
    json.dumps({"text": f"row {i} {w}", "label": "ab"[i % 2]}) for i, w in enumerate(WORDS)
).encode("utf-16")


def symlink_loop(path: Path) -> None:
    os.symlink(path.with_name("other.jsonl"), path)
    os.symlink(path, path.with_name("other.jsonl"))


FILE_CASES = [
    Case(
        "empty-jsonl",
        write("rows.jsonl", b"", "jsonl"),
        "refused",
        match=r"data\.sources\[0\]\.path: rows\.jsonl has no rows \(an empty file, or blank lines",
    ),
    Case(
        "blank-lines-only",
        write("rows.jsonl", b"\n \n\n", "jsonl"),
        "refused",
        match=r"rows\.jsonl has no rows",
    ),
    Case(
        "csv-header-only",
        write("rows.csv", b"text,label\n", "csv"),
        "refused",
        match=r"rows\.csv has no rows .*first row is its header",
    ),
    Case(
        "csv-no-header",
        write("rows.csv", b"\n".join(good_csv()[1:]), "csv"),
        "refused",
        match=r"data\.sources\[0\]\.path: rows\.csv: every row was quarantined \(5 of 5\), most "
        r"as missing_field \(5\), e\.g\. rows\.csv:2: missing field\(s\): text "
        r"\(data\.fields\.text\), label \(data\.fields\.label\) \(the row has 'row 0 about the "
        r"apple', 'a'\)\. does data\.fields name the header's columns\?",
    ),
    Case(
        "tsv",
        write("rows.tsv", b"\n".join(r.replace(b",", b"\t") for r in good_csv()) + b"\n", "tsv"),
        "accepted",
        check=kept_text("row 1 about the river"),
    ),
    Case(
        "tsv-given-as-csv",
        write(
            "rows.tsv",
            b"\n".join(r.replace(b",", b"\t") for r in good_csv()) + b"\n",
            "csv",
        ),
        "refused",
        match=r"rows\.tsv: every row was quarantined .*a tab-separated file\? give it as "
        r"`type: tsv`",
    ),
    Case(
        "csv-repeated-header",
        write("rows.csv", b"text,text,label\nx,y,a\n", "csv"),
        "refused",
        match=r"rows\.csv:1: the CSV header names column\(s\) \['text'\] more than once",
    ),
    Case(
        "csv-binary",
        write("rows.csv", BINARY, "csv"),
        "refused",
        match=r"rows\.csv: every row was quarantined .*most as bad_encoding .*e\.g\. "
        r"rows\.csv:\d+: not valid UTF-8.*not UTF-8 text\?",
    ),
    Case(
        "csv-binary-header",
        write("rows.csv", b"\xff\xd8\xff\xe0 JFIF\n" + BINARY, "csv"),
        "refused",
        match=r"rows\.csv: the CSV header is not valid UTF-8; not UTF-8 text\?",
    ),
    Case(
        "jsonl-binary",
        write("rows.jsonl", BINARY, "jsonl"),
        "refused",
        match=r"^data\.sources\[0\]\.path: rows\.jsonl: every row was quarantined \(141 of 141\), "
        r"most as bad_encoding \(89\), e\.g\. rows\.jsonl:2: not valid UTF-8: invalid start byte; "
        r"also broken_json 52\. not UTF-8 text\?[^\n]*$",
    ),
    Case(
        "jsonl-utf16",
        write("rows.jsonl", UTF16, "jsonl"),
        "refused",
        match=r"rows\.jsonl: the file is UTF-16 text .*iconv -f UTF-16 -t UTF-8",
    ),
    Case(
        "jsonl-gzip",  # every line bad UTF-8, with advice to convert an encoding
        write("rows.jsonl.gz", gzip.compress(b'{"text": "x", "label": "a"}\n' * 100), "jsonl"),
        "refused",
        match=r"rows\.jsonl\.gz: the file is gzip-compressed.*`gunzip -k rows\.jsonl\.gz`",
    ),
    Case(
        "csv-bzip2",
        write("rows.csv.bz2", bz2.compress(b"text,label\nx,a\n" * 50), "csv"),
        "refused",
        match=r"rows\.csv\.bz2: the file is bzip2-compressed",
    ),
    Case(
        "csv-utf16",
        write("rows.csv", "text,label\nx,a\n".encode("utf-16"), "csv"),
        "refused",
        match=r"rows\.csv: the file is UTF-16 text",
    ),
    Case(
        "json-array-not-lines",
        write("rows.jsonl", json.dumps([{"text": "x", "label": "a"}], indent=2).encode(), "jsonl"),
        "refused",
        match=r"every row was quarantined.*broken_json.*not JSON Lines\?",
    ),
    Case(
        "jsonl-wrong-field-names",
        write("rows.jsonl", b'{"body": "x y", "cat": "a"}\n' * 3, "jsonl"),
        "refused",
        match=r"every row was quarantined.*missing_field.*text \(data\.fields\.text\).*the row "
        r"has 'body', 'cat'.*does data\.fields name the fields the rows have\?",
    ),
    Case(
        "directory-as-jsonl",
        made(lambda p: p.mkdir(), "rows.jsonl", "jsonl"),
        "refused",
        match=r"data\.sources\[0\]\.path: 'rows\.jsonl' is a folder; a source of type jsonl "
        r"is one file",
    ),
    Case(
        "file-as-folder-source",
        write("rows.jsonl", b"x\n", "folder"),
        "refused",
        match=r"data\.sources\[0\]\.path: 'rows\.jsonl' is not a folder",
    ),
    Case(
        "symlink-loop",
        made(symlink_loop, "rows.jsonl", "jsonl"),
        "refused",
        match=r"data\.sources\[0\]\.path: 'rows\.jsonl' is a loop of symbolic links",
    ),
    Case(
        "dangling-symlink",
        made(lambda p: os.symlink(p.with_name("gone"), p), "rows.jsonl", "jsonl"),
        "refused",
        match=r"'rows\.jsonl' is a symbolic link to a missing file",
    ),
    Case(
        "named-pipe",
        made(lambda p: os.mkfifo(p), "rows.jsonl", "jsonl"),
        "refused",
        match=r"'rows\.jsonl' is not a regular file",
    ),
    Case(
        "missing-file",
        made(lambda p: None, "rows.jsonl", "jsonl"),
        "refused",
        match=r"data\.sources\[0\]\.path: 'rows\.jsonl' not found \(looked at .*\); put the "
        r"file there, or give its path",
    ),
]


def test_the_corpus_is_large_enough() -> None:
    every = CASES + FILE_CASES
    assert len(every) >= 30
    assert len({c.id for c in every}) == len(every)
    assert {c.verdict for c in every} == {"accepted", "quarantined", "refused"}


@pytest.mark.parametrize("case", FILE_CASES, ids=[c.id for c in FILE_CASES])
def test_bad_file(case: Case, tmp_path: Path) -> None:
    through_build_data(case, tmp_path)
