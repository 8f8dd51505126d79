"""The counts a data version's report shows beside each split: documents per source (task
pretrain, whose rows have no label) or rows per label, and no column where no row has a
label. `tunelab data`'s view and the lab report both read them from here."""

from __future__ import annotations


def split_columns(report: dict, manifest: dict | None = None) -> tuple[list[str], dict]:
    """The columns and, per split, `(rows, {column: count})`, from a data version's report
    (its manifest's counts and labels where the report lacks them)."""
    manifest = manifest or {}
    splits = report.get("splits") or manifest.get("counts") or {}
    by_source = report.get("by_source")
    if by_source:
        columns = sorted({s for c in by_source.values() for s in c})
    else:
        columns = report.get("labels") or manifest.get("labels") or []
    per_split = {
        split: (info["n"], by_source.get(split, {}) if by_source else info["labels"])
        for split, info in splits.items()
    }
    return ([] if columns == [""] else columns), per_split
