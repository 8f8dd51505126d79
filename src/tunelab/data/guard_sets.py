"""Forgetting sets: the fixed texts that guardrails with `on` name, versioned with the data.

A fine-tune can win its task and lose what the base model did well. A guardrail `on` a file
measures every run on text the task never trains on (general prose the base already models
well). The file is read here, when the data version is built: JSONL rows with a `text` (an
`id` is optional; the line number stands in), or UTF-8 text whose documents are separated by
blank lines. Its rows are stored in the version (`guard/<name>.jsonl`, listed with their
sha256 in the manifest's `files`) and the file's sha256 enters the version's settings, so a
changed file makes a new version, and every run of a version is measured on the same text.

A document of the set that is also a training text is not held out: `tunelab data` warns.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from tunelab.core.digest import sha256_file
from tunelab.core.errors import TunelabError
from tunelab.core.spec import Spec
from tunelab.core.spec_paths import spec_path
from tunelab.core.store import Store, read_jsonl, write_jsonl

FOLDER = "guard"
"""Where a data version keeps its forgetting sets, and a run its scores on them."""


@dataclass(frozen=True)
class GuardSet:
    on: str
    """The path as the spec's guardrail names it (relative to the lab)."""
    sha256: str
    rows: list[dict]

    @property
    def file(self) -> str:
        """Its file inside a data version (and a run's folder)."""
        return f"{FOLDER}/{stored_name(self.on)}.jsonl"

    def summary(self) -> dict:
        return {
            "file": self.file,
            "sha256": self.sha256,
            "documents": len(self.rows),
            "bytes": sum(len(r["text"].encode("utf-8")) for r in self.rows),
        }


def stored_name(on: str) -> str:
    """`heldout/news.jsonl` -> `heldout_news`: one flat name per set."""
    stem = on[: -len(Path(on).suffix)] if Path(on).suffix else on
    return re.sub(r"[^A-Za-z0-9._-]+", "_", stem).strip("_.") or "set"


def guard_paths(spec: Spec) -> list[str]:
    """The distinct files the spec's guardrails are `on`, in the spec's order."""
    return list(dict.fromkeys(g.on for g in spec.guardrails if g.on is not None))


def load_guard_sets(spec: Spec, lab: Path) -> list[GuardSet]:
    """Every forgetting set of the spec, read and checked; an error names the guardrail, the
    file and its line."""
    out = []
    names: dict[str, str] = {}
    for on in guard_paths(spec):
        field = f"guardrails.{_index(spec, on)}.on"
        path = spec_path(lab, on)
        if not path.is_file():
            raise TunelabError(
                f"{field}: {on!r} not found (looked at {path}); name a file in "
                "the lab that holds the text to guard"
            )
        other = names.setdefault(stored_name(on), on)
        if other != on:
            raise TunelabError(
                f"{field}: {on!r} and {other!r} would be stored under one name; rename one of them"
            )
        rows = read_text_rows(path)
        if not rows:
            raise TunelabError(f"{field}: {path} holds no text; a forgetting set needs documents")
        out.append(GuardSet(on, sha256_file(path), rows))
    return out


def read_text_rows(path: Path) -> list[dict]:
    """`{id, text}` rows of a JSONL file (one object with a non-empty `text` per line) or of a
    text file (documents separated by blank lines)."""
    if path.suffix == ".jsonl":
        rows = []
        with path.open(encoding="utf-8") as f:
            for line_no, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as err:
                    raise TunelabError(f"{path}:{line_no}: not valid JSON ({err.msg})") from None
                text = row.get("text") if isinstance(row, dict) else None
                if not isinstance(text, str) or not text.strip():
                    raise TunelabError(
                        f"{path}:{line_no}: each row needs a non-empty string `text`"
                    )
                rows.append({"id": str(row.get("id", f"line{line_no}")), "text": text})
        return rows
    try:
        content = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise TunelabError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start})") from None
    parts = [p.strip() for p in re.split(r"\n\s*\n", content)]
    return [{"id": f"doc{i}", "text": p} for i, p in enumerate((p for p in parts if p), 1)]


def overlap_warnings(sets: list[GuardSet], train_texts: Iterable[str]) -> list[str]:
    """Documents of a forgetting set that are also training texts: not held out. The train
    texts are read once, one at a time (a million of them need not be held at once)."""
    wanted = {r["text"].strip() for s in sets for r in s.rows}
    found = {t for t in map(str.strip, train_texts) if t in wanted}
    out = []
    for s in sets:
        shared = sum(r["text"].strip() in found for r in s.rows)
        if shared:
            out.append(
                f"{shared} of {len(s.rows)} documents of the forgetting set {s.on} are also "
                "training texts: the guardrail measures them as held out when they are not"
            )
    return out


def write_sets(folder: Path, sets: list[GuardSet]) -> dict[str, str]:
    """Each set's rows into `folder`'s guard/: its path -> its sha256 (the manifest's files)."""
    files = {}
    for s in sets:
        (folder / FOLDER).mkdir(exist_ok=True)
        write_jsonl(folder / s.file, s.rows)
        files[s.file] = sha256_file(folder / s.file)
    return files


def stored_rows(store: Store, version: str, on: str) -> list[dict]:
    """The rows of the forgetting set `on` as data version `version` keeps them."""
    sets = store.data_manifest(version).get("guard_sets") or {}
    if on not in sets:
        raise TunelabError(
            f"data version {version} was made without the forgetting set {on!r}; run "
            "`tunelab data` with the spec that names it"
        )
    return read_jsonl(store.data_dir(version) / sets[on]["file"])


def _index(spec: Spec, on: str) -> int:
    return next(i for i, g in enumerate(spec.guardrails) if g.on == on)
