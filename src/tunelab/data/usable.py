"""Whether a data version can be used at all: refused early, naming the cause and the fix.

A lab cannot learn from an empty train split, cannot be compared on an empty validation
split, cannot be scored by `final` without a test split, and a classifier with one label
left reports 100% accuracy for nothing. Each of these is found here, when `tunelab data`
builds the version (before it is written), and again from the stored manifest alone when
`run`, `baseline` or `check` start (before any model is loaded), so a refusal takes well under
a second. The checks read only a summary that both give (the manifest's `labels`, `counts`,
`rows`, `presplit` and `sources`), so the two can never disagree.

Refused (a `DataError`):
- a source with no rows (an empty file), or whose every row was quarantined: the most common
  reason, with a count, one example file:line and a hint ("no header row?", "not UTF-8
  text?", for images "are the image paths relative to the lab folder?");
- an empty train or validation split; an empty test split when the spec asks for one (a
  ratio split always does; a user's split does when a source has `split: test`);
- fewer than two labels in the train split of a classification task;
- with `data.missing_label: error`, a label with train examples but none in validation or
  test (a warning otherwise).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from tunelab.core.spec import Spec
from tunelab.core.store import SPLITS, Store
from tunelab.data.raw import DataError, Rejection

HINTS = {
    "bad_encoding": "not UTF-8 text? (a binary file, or another encoding: convert it with "
    "`iconv -t UTF-8`)",
    "broken_json": "not JSON Lines? each line must be one JSON object with double quotes; or "
    "not UTF-8 text (a binary file)?",
    "not_an_object": "each line must be a JSON object ({...}), not a list or a bare value",
    "duplicate_key": "each key may appear once per JSON object",
    "malformed_row": 'not comma-separated, or quotes inside a quoted cell not doubled ("")?',
    "missing_field": "does data.fields name the fields the rows have? (data.fields.id and "
    "data.fields.group may be left out: ids are then file and line)",
    "null_field": "does data.fields name the fields the rows have, and are they filled?",
    "bad_text_type": "does data.fields.text name the text field?",
    "empty_text": "does data.fields.text name the text field?",
    "bad_label_type": "does data.fields.label name the label field?",
    "label_type": "a label written as a number among string labels: quote it, or fix the slip",
    "empty_label": "does data.fields.label name the label field?",
    "bad_target": "does data.fields.target name the answer field?",
    "unknown_label": "do the labels match task.labels?",
    "bad_label_set": "task multilabel reads a JSON list of labels per row, or a string split on "
    "task.separator: is the separator set?",
    "one_hot_label": "task multilabel reads one field of labels per row: build it from the 0/1 "
    "columns",
    "bad_split_value": "the split column's values must be train, validation or test",
    "bad_key": "do data.fields.id and data.fields.group name fields every row has?",
    "duplicate_id": "is the same data listed twice, or are the ids in data.fields.id not unique?",
    "outside_label_folder": "a folder source needs one sub-folder per label",
    "missing_file": "symbolic links whose files are gone (an unmounted drive?): put them back",
    "too_long": "raise data.max_chars, or set data.long_text: warn",
    "label_conflict": "the same texts (or pictures) have different labels in different copies",
    "empty_after_cleaning": "a cleaning rule empties every text",
    "bad_image_type": "does data.fields.image name the image column (a path or an Image)?",
    "image_missing": "are the image paths relative to the lab folder (not to the file)?",
    "image_outside_lab": "copy the images into the lab, or set data.allow_outside_lab: true",
    "image_in_store": "the lab's store (.tunelab/) is not data; point at the image files",
    "image_empty": "are the image files empty (0 bytes)?",
    "image_unreadable": "are these image files at all? (PNG, JPEG, WebP or GIF)",
    "image_truncated": "were the image files cut short (an interrupted copy or download)?",
    "image_too_large": "raise data.images.max_pixels if such large images are meant",
    "image_unsupported": "convert the images to PNG, JPEG, WebP or GIF",
}
CSV_NO_HEADER = (
    "does data.fields name the header's columns? A file without a header row has its first row "
    "read as one (as does one that is not comma-separated)"
)


def check_usable(summary: Mapping[str, Any], spec: Spec) -> list[str]:
    """Raise a `DataError` listing every problem that makes the data unusable; return the
    warnings. `summary` is a data manifest (or what will be one): `labels`, `counts` (per
    split `n` and per-label counts), `rows`, `presplit`, and `sources` with each one's rows
    read and quarantined (a manifest written before these existed skips the source checks)."""
    errors = _source_errors(summary.get("sources") or [])
    if errors:  # an empty split or a missing label would only be their consequence
        raise DataError("\n".join([errors[0], *(f"also: {e}" for e in errors[1:])]))
    errors, warnings = _split_problems(summary, spec)
    if not errors:
        more_errors, more_warnings = _label_problems(summary, spec)
        errors += more_errors
        warnings += more_warnings
    if errors:
        raise DataError("\n".join([errors[0], *(f"also: {e}" for e in errors[1:])]))
    return _encoding_warnings(summary.get("sources") or []) + warnings


def _encoding_warnings(sources: list[dict]) -> list[str]:
    """A source some of whose rows are not UTF-8: a file saved as Windows-1252 or Latin-1 loses
    exactly its rows with accented letters, a biased cut the count alone does not show."""
    out = []
    for src in sources:
        n = (src.get("reasons") or {}).get("bad_encoding")
        if n and n < src.get("rows", 0):
            name = src.get("path") or src.get("name")
            out.append(
                f"{name}: {n:,} of its {src['rows']:,} rows are not UTF-8 text and were "
                "quarantined (a file saved as Windows-1252 or Latin-1 loses exactly its rows with "
                f"accented letters): convert it, e.g. `iconv -f cp1252 -t utf-8 {name} > "
                "converted`, and point the source at that file"
            )
    return out


def require_usable(store: Store, version: str, spec: Spec) -> list[str]:
    """Check a stored data version from its manifest alone (no rows read, no model, no
    torch): the check `run`, `baseline` and `check` make before loading a model. Returns the
    warnings; raises a `DataError` that names the version and says to rebuild it."""
    manifest = store.data_manifest(version)
    try:
        return check_usable(manifest, spec)
    except DataError as err:
        raise DataError(
            f"data version {version} cannot be used: {err}\n"
            "fix the data or the spec, then run `tunelab data` again"
        ) from None


def tally_sources(sources: list[dict], quarantine: list[Rejection]) -> list[dict]:
    """Each source's entry with its quarantine: how many rows, by reason, and the first row
    of each reason (file:line and the reason in words)."""
    out = []
    for entry in sources:
        mine = [r for r in quarantine if r.source == entry["name"]]
        first: dict[str, dict[str, str]] = {}
        for r in mine:
            first.setdefault(r.kind, {"at": r.origin, "reason": r.reason})
        reasons = Counter(r.kind for r in mine)
        out.append(
            {
                **entry,
                "quarantined": len(mine),
                "reasons": dict(sorted(reasons.items())),
                "first": dict(sorted(first.items())),
            }
        )
    if sum(e["quarantined"] for e in out) != len(quarantine):
        raise AssertionError("a quarantined row has no source: the per-source tally is off")
    return out


def _source_errors(sources: list[dict]) -> list[str]:
    errors = []
    for i, src in enumerate(sources):
        if "rows" not in src:
            continue  # recorded before sources were counted
        where = f"data.sources[{i}].path: {src['path']}"
        if src["rows"] == 0:
            errors.append(
                f"{where} has no rows{_empty_kind(src['type'])}; give it rows or remove the source"
            )
        elif src.get("quarantined") == src["rows"]:
            errors.append(_all_quarantined(where, src))
    return errors


def _empty_kind(source_type: str) -> str:
    return {
        "csv": " (an empty file, or only a header: a CSV's first row is its header)",
        "folder": " (no file in a label sub-folder)",
        "image_folder": " (no file in a label sub-folder)",
    }.get(source_type, " (an empty file, or blank lines only)" if source_type == "jsonl" else "")


def _all_quarantined(where: str, src: dict) -> str:
    hint = None
    if src["type"] in ("csv", "tsv") and _main_reason(src) == "missing_field":
        hint = CSV_NO_HEADER
    if src["type"] == "csv" and src["path"].lower().endswith((".tsv", ".tab")):
        hint = "a tab-separated file? give it as `type: tsv`"
    return (
        f"{where}: every row was quarantined ({src['rows']:,} of {src['rows']:,}), "
        + _why_quarantined(src, hint)
    )


def _main_reason(src: dict) -> str:
    reasons = src.get("reasons") or {}
    return max(sorted(reasons), key=lambda k: reasons[k])


def _why_quarantined(src: dict, hint: str | None = None) -> str:
    """`most as label_type (297), e.g. data/d.jsonl:4: label 0 is ...; also empty_text 2. hint`
    for one source's tally, or the sum of several (`_together`)."""
    reasons = src.get("reasons") or {}
    kind = _main_reason(src)
    first = (src.get("first") or {}).get(kind, {})
    hint = hint or HINTS.get(kind)
    others = [f"{k} {n}" for k, n in reasons.items() if k != kind]
    return (
        f"most as {kind} ({reasons[kind]:,})"
        + (f", e.g. {first['at']}: {first['reason']}" if first else "")
        + (f"; also {', '.join(others)}" if others else "")
        + (f". {hint}" if hint else "")
    )


def _together(sources: list[dict]) -> dict:
    """The quarantine tallies of several sources as one: reasons summed, each one's first."""
    reasons: Counter = Counter()
    first: dict = {}
    for src in sources:
        reasons.update(src.get("reasons") or {})
        for kind, at in (src.get("first") or {}).items():
            first.setdefault(kind, at)
    return {"reasons": dict(sorted(reasons.items())), "first": first}


def _split_problems(summary: Mapping[str, Any], spec: Spec) -> tuple[list[str], list[str]]:
    counts, rows = summary["counts"], summary.get("rows") or {}
    accounting = (
        f" (rows read {rows['rows_read']:,} = kept {rows['kept']:,} + quarantined "
        f"{rows['quarantined']:,} + removed as duplicates {rows['duplicates_removed']:,})"
        if rows
        else ""
    )
    errors, warnings = [], []
    for split in SPLITS:
        if counts.get(split, {}).get("n", 0):
            continue
        fix = _empty_fix(split, summary.get("presplit", False), spec)
        if split == "test" and not _wants_test(summary.get("presplit", False), spec):
            warnings.append(
                f"the test split is empty: `tunelab final` will have nothing to score; {fix}"
            )
        else:
            errors.append(f"the {split} split is empty{accounting}; {fix}")
    tally = _together(summary.get("sources") or [])
    if errors and tally["reasons"]:  # what the quarantine took, the likely cause
        n = sum(tally["reasons"].values())
        errors.append(f"the quarantine ({n:,} rows): {_why_quarantined(tally)}")
    return errors, warnings


def _wants_test(presplit: bool, spec: Spec) -> bool:
    """A ratio split always makes a test split; a user's split asks for one by a source's
    `split: test`. (A split column or a DatasetDict without test rows asks for none.)"""
    return not presplit or any(s.split == "test" for s in spec.data.sources)


def _empty_fix(split: str, presplit: bool, spec: Spec) -> str:
    if not presplit:
        ratios = spec.data.split
        return (
            f"add rows: data.split ({ratios.train:g} / {ratios.validation:g} / "
            f"{ratios.test:g}) needs at least one row in each split"
        )
    carve = (
        "; or hold out a share of the train split with data.split.validation_from_train: 0.1"
        if split == "validation"
        else ""
    )
    if spec.data.fields.split:
        return f"give some rows {split!r} in the split column ({spec.data.fields.split!r}){carve}"
    return (
        f"give a source `split: {split}` (its rows may all have been quarantined or removed){carve}"
    )


def _label_problems(summary: Mapping[str, Any], spec: Spec) -> tuple[list[str], list[str]]:
    counts = summary["counts"]
    present = {
        split: [label for label, n in counts[split]["labels"].items() if n]
        for split in SPLITS
        if counts.get(split, {}).get("n", 0)
    }
    train = present.get("train", [])
    generative = spec.task.generative
    errors, warnings = [], []
    if not generative and len(train) < 2:
        tally = _together(summary.get("sources") or [])
        took = (
            f" The quarantine took {sum(tally['reasons'].values()):,} rows, "
            + _why_quarantined(tally)
            if tally["reasons"]
            else f" Does data.fields.label ({spec.data.fields.label!r}) name the label field?"
        )
        errors.append(
            f"only {len(train)} label(s) remain in the train split ({train}): a classifier needs "
            f"two or more.{took}"
        )
        return errors, warnings
    validation = present.get("validation")
    if not generative and validation and not set(train) & set(validation):
        errors.append(
            f"train and validation share no label (train {train}, validation {validation}): "
            "every prediction would be wrong whatever the model learns. Are they the same labels "
            "written two ways (ids in one file, names in another)? Write them alike in every "
            "file."
        )
        return errors, warnings
    policy = spec.data.missing_label
    for split in ("validation", "test"):
        missing = [label for label in train if label not in present.get(split, train)]
        if not missing:
            continue
        problem = f"label(s) {missing} have train examples but none in the {split} split"
        if policy == "error" and not generative:
            errors.append(
                f"{problem} (data.missing_label: error); add {split} examples of them, or set "
                "data.missing_label: warn"
            )
        else:
            warnings.append(
                f"{problem}: their {split} scores cannot be measured"
                + ("" if generative else _unmeasured_consequence(split, summary, spec))
            )
    zero = "its validation F1 reads 0 for every run, lowering macro-F1 alike for all"
    for split in ("validation", "test"):
        unlearned = [label for label in present.get(split, []) if label not in train]
        if unlearned and not generative:
            unseen = split == "test" and not set(unlearned) & set(validation or [])
            warnings.append(
                f"label(s) {unlearned} are in the {split} split but not in train: the model "
                "cannot learn them"
                + (f" (and with no validation example {zero})" if unseen else "")
            )
    rowless = [
        label
        for label in summary.get("labels") or []
        if not any(label in found for found in present.values())
    ]
    if rowless and not generative:
        warnings.append(
            f"label(s) {rowless} (task.labels) have no row in any split: the model gets a class "
            f"for each that nothing teaches, and {zero}; leave them out of task.labels, or add rows"
        )
    return errors, warnings


def _unmeasured_consequence(split: str, summary: Mapping[str, Any], spec: Spec) -> str:
    """What a label without examples in `split` does to its scores (`tasks/classification.py`,
    `tasks/multilabel.py`), and how to give it some."""
    return (
        f" (its {split} F1 reads 0 for every run, which lowers macro-F1 alike for all, and an "
        f"every_class guardrail leaves it not checked); {more_rows(split, summary, spec, 'it')}"
    )


def more_rows(split: str, summary: Mapping[str, Any], spec: Spec, them: str = "them") -> str:
    """How to give `split` rows of what it lacks: other ratios where tunelab splits, rows
    marked for it where the data is split already (a ratio changes nothing there)."""
    if summary.get("presplit"):
        where = (
            f"the split column ({spec.data.fields.split!r})"
            if spec.data.fields.split
            else "a source's `split`"
        )
        return f"mark some of {them} for {split} in {where}"
    return f"give {them} more rows, or other data.split ratios"
