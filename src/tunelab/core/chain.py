"""The event log as a hash chain: each line carries the sha256 of the line before it.

`append` links a new event to the log's last line (`prev`) while holding an exclusive lock on
the file, so commands that log at the same moment are chained in one order and never interleave
a line. `verify` walks the log: a line whose `prev` is not the hash of the line before it means
a line before it was edited, deleted or reordered, and is named by its number. A log written
before the chain (lines without `prev`) is read as it is, and the chain starts at its first new
event, which links to the last old line; the report says how many lines came before. Which
lines may be old is the store's `format.json`'s to say: none in a lab begun in format 2, those
before its `since_line` in one upgraded from format 1.

An edit can only be taken back into the chain by `tunelab fsck --repair --reason R`, which
appends a `chain_break` event that names the lines it forgives and why. (A chain alone does not
stop someone who rewrites the whole file: its `head`, the hash of the last line, is what other
records can hold to anchor it.)
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path

GENESIS = "0" * 64
"""The `prev` of the first line of a log that starts with the chain."""

BREAK = "chain_break"


def line_hash(line: bytes) -> str:
    return hashlib.sha256(line.rstrip(b"\n")).hexdigest()


def last_line(fd: int, size: int) -> bytes | None:
    """The last non-empty line of the open file (without its newline), or None if empty."""
    if size == 0:
        return None
    chunk = 1 << 16
    start = size
    data = b""
    while start > 0:
        start = max(0, start - chunk)
        data = os.pread(fd, size - start, start)
        body = data.rstrip(b"\n")
        cut = body.rfind(b"\n")
        if cut >= 0 or start == 0:
            return body[cut + 1 :] if body else None
    return None


def linked(event: dict) -> Callable[[bytes | None], str]:
    """The line of `event`, linked to whatever line is last in the log when it is written."""

    def line(previous: bytes | None) -> str:
        return json.dumps(
            {**event, "prev": GENESIS if previous is None else line_hash(previous)},
            ensure_ascii=False,
        )

    return line


def _unlinked(event: dict) -> str:
    """What a line without `prev` after the chain began may be: a tunelab event written by a
    tunelab older than store format 2 (it does not read `.tunelab/format.json`, so it cannot
    refuse the lab, and writes its events unchained), or a line inserted by hand."""
    if {"event", "time"} <= event.keys():
        return (
            "has no link to the line before it: a tunelab event written without the chain, as a "
            "tunelab older than store format 2 writes (open this lab with a newer one), or a "
            "line inserted"
        )
    return "has no link to the line before it (inserted?)"


def _too_late(chained_from: int) -> str:
    return (
        "was written by store format 2 (it holds a link or a record's sha256), yet format.json "
        f"says the chain began at line {chained_from}: format.json was edited (restore it from "
        "a backup)"
    )


def verify(path: Path, chained_from: int | None = None) -> dict:
    """The chain's state: `lines`, `unchained` (old lines before the chain began), `problems`
    (each `{line, problem}`), `breaks` (each `{line, reason, forgives}`) and `head` (the hash of
    the last line, None for an empty log). `chained_from`: the line from which the store's
    format says every line is linked (`layout.chained_from`; None where it does not know): a
    line there without `prev` is a problem, not an old line, so stripping every `prev` does
    not turn the chain off."""
    if not path.exists():
        return {"lines": 0, "unchained": 0, "problems": [], "breaks": [], "head": None}
    raw = [line for line in path.read_bytes().split(b"\n") if line.strip()]
    problems, breaks, forgiven = [], [], set()
    unchained, started, claimed_late = 0, False, False
    for number, line in enumerate(raw, 1):
        try:
            event = json.loads(line)
            if not isinstance(event, dict):
                raise ValueError(f"a JSON {type(event).__name__}")
        except ValueError:  # bytes that do not parse, or JSON that is no event
            problems.append({"line": number, "problem": "not a JSON event (damaged or edited)"})
            started = started or number > 1
            continue
        early = chained_from is not None and number < chained_from
        if early and not claimed_late and ({"prev", "record_sha256"} & event.keys()):
            claimed_late = True  # only format 2 writes these: the format record was edited
            problems.append({"line": number, "problem": _too_late(chained_from)})
        if "prev" not in event:
            if started or (chained_from is not None and number >= chained_from):
                problems.append({"line": number, "problem": _unlinked(event)})
            else:
                unchained += 1
            continue
        started = True
        expected = line_hash(raw[number - 2]) if number > 1 else GENESIS
        if event["prev"] != expected:
            problem = (
                f"does not follow line {number - 1}: a line at or before it was edited, deleted "
                "or reordered"
                if number > 1
                else "is not the log's first line (the chain's start): the first line was "
                "deleted or edited"
            )
            problems.append({"line": number, "problem": problem})
        if event.get("event") == BREAK:
            breaks.append(
                {
                    "line": number,
                    "reason": event.get("reason"),
                    "forgives": event.get("forgives"),
                    "accepted": sorted(event.get("accepted") or {}),
                    # a record accepted that was another run's: what the log's run was lost to
                    **({"replaced": event["replaced"]} if event.get("replaced") else {}),
                }
            )
            forgiven.update(event.get("forgives") or [])
    return {
        "lines": len(raw),
        "unchained": unchained,
        "problems": [p for p in problems if p["line"] not in forgiven],
        "breaks": breaks,
        "head": line_hash(raw[-1]) if raw else None,
    }
