"""A path a spec gives: relative to the lab folder unless absolute, `~` expanded. Every field
that names a file or folder reads it this one way (`model.path`, `model.tokenizer`,
`data.sources[].path`, `guardrails[].on`, `task.json_schema`): `~/corpus.jsonl` worked for a
model and read as `LAB/~/corpus.jsonl` for a source."""

from __future__ import annotations

from pathlib import Path


def spec_path(lab: Path, given: str | Path) -> Path:
    """`given` as the spec means it: `~` expanded, then relative to `lab` unless absolute."""
    path = Path(given).expanduser()
    return path if path.is_absolute() else Path(lab) / path
