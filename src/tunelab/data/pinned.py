"""`data.eval_from`: validation and test kept from an earlier data version while train changes.

A data change (a cleaning rule, a source, a dedup threshold) made the usual way re-splits the
rows, so validation changes with it and the runs on the two versions cannot be paired. With
`data.eval_from: VERSION`, the new version takes that version's validation and test rows
exactly as stored, and train is every example of the new build that is not one of them (by
id or by text); the usual dedup then drops train's near copies of them. The stored splits
come out byte-identical to the pinned ones (checked: `check_pinned`), so the sealed test's
sha256 does not change and `compare` pairs the runs of both versions.
"""

from __future__ import annotations

from tunelab.core.seal import open_sealed
from tunelab.core.store import SPLITS, Store, StoreError
from tunelab.data.loaders import DataError, Example
from tunelab.data.split import Splits

PINNED = ("validation", "test")


def example_of(row: dict) -> Example:
    """An example as `Example.to_row` stored it (its origin split back into file and line)."""
    file, _, line = row["origin"].rpartition(":")
    located = bool(file) and line.isdigit()
    return Example(
        id=row["id"],
        body=row["text"],
        label=row["label"],
        file=file if located else row["origin"],
        line=int(line) if located else None,
        group=row.get("group"),
        target=row.get("target"),
        source=row.get("source"),
        messages=row.get("messages"),
        label_set=row.get("labels"),  # a multilabel row's set
    )


def pinned_rows(store: Store, version: str) -> dict[str, list[Example]]:
    """The pinned version's validation and test examples, or a DataError naming the field."""
    try:
        store.data_manifest(version)
    except StoreError:
        known = [p.parent.name for p in store.data_manifests()]
        raise DataError(
            f"data.eval_from: {version!r} is not a data version of this lab (known: "
            f"{', '.join(known) or 'none'}); use an id from `tunelab data` or the store"
        ) from None
    test, _ = open_sealed(store, version)  # copied unchanged; no model sees it here
    validation = store.read_split(version, "validation")
    return {
        "validation": [example_of(r) for r in validation],
        "test": [example_of(r) for r in test],
    }


def pin_eval(splits: Splits, pinned: dict[str, list[Example]]) -> tuple[Splits, int]:
    """Validation and test are the pinned ones; train is everything else this build has.
    Also returns how many of this build's examples were kept out of train as being pinned
    ones (by id). A train example with a pinned one's text but another id stays: it is a
    duplicate across splits, which `data.dedup.policy` decides about as in any build."""
    ids = {ex.id for rows in pinned.values() for ex in rows}
    pool = [ex for split in SPLITS for ex in splits.get(split, [])]
    train = [ex for ex in pool if ex.id not in ids]
    return {"train": sorted(train, key=Example.sort_key), **pinned}, len(pool) - len(train)


def check_pinned(store: Store, version: str, pinned_from: str) -> None:
    """The new version's validation and test are the pinned version's, byte for byte."""
    new, old = store.data_manifest(version), store.data_manifest(pinned_from)
    for split in PINNED:
        name = f"{split}.jsonl"
        if new["files"][name] != old["files"][name]:
            raise RuntimeError(
                f"data version {version}: {name} differs from {pinned_from}'s although "
                "data.eval_from pins it"
            )
